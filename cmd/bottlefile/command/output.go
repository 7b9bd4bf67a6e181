package command

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/zclconf/go-cty/cty"

	"github.com/bottlefile/bottlefile/planner"
)

// OutputCommand prints the configuration's outputs, evaluated against what
// the state records.
type OutputCommand struct {
	Meta *Meta
}

func (c *OutputCommand) Synopsis() string { return "Show output values" }

func (c *OutputCommand) Help() string {
	return strings.TrimSpace(`
Usage: bottlefile [global options] output [-json] [NAME]

  Prints the outputs of the Bottlefile, evaluated against the recorded
  state. A sensitive output shows as (sensitive value) in the list; name it
  to print its value.

Options:

  -var NAME=VALUE, -var-file=FILE
          Set variables the configuration needs, as for plan.
  -json   Print the outputs (or the one named) as JSON.
`)
}

func (c *OutputCommand) Run(args []string) int {
	m := c.Meta
	fs := newFlagSet("output")
	asJSON := fs.Bool("json", false, "")
	in := registerInputs(fs)
	if m.showDiags(nil, finishParse(fs, args, 1)) {
		return 1
	}
	op, diags := m.openOperation(m.Ctx, true, 0, *in)
	defer op.close()
	if m.showDiags(op.files(), diags) {
		return 1
	}
	recs, err := op.store.Records()
	if err != nil {
		return m.fail("Cannot read state", err)
	}
	planner.SetKnown(op.scope, recs)
	names := op.config.OutputNames()
	if fs.NArg() == 1 {
		name := fs.Arg(0)
		if _, ok := op.config.Outputs[name]; !ok {
			return m.fail("No such output", fmt.Errorf("the configuration declares no output %q", name))
		}
		names = []string{name}
	}
	values := map[string]json.RawMessage{}
	for _, name := range names {
		v, diags := op.scope.EvalOutput(op.config.Outputs[name])
		if m.showDiags(op.files(), diags) {
			return 1
		}
		if fs.NArg() == 1 {
			v, _ = v.UnmarkDeep() // asked for by name: reveal it
		}
		if !v.IsWhollyKnown() {
			return m.fail("Output not known yet", fmt.Errorf("output %q depends on values known only after apply; run apply first", name))
		}
		values[name] = planner.RedactedJSON(v)
		if fs.NArg() == 1 && !*asJSON {
			fmt.Fprintln(m.Stdout, rawOutput(v))
			return 0
		}
	}
	if *asJSON {
		var data []byte
		if fs.NArg() == 1 {
			data = values[names[0]]
		} else {
			data, _ = json.MarshalIndent(values, "", "  ")
		}
		fmt.Fprintln(m.Stdout, string(data))
		return 0
	}
	if len(names) == 0 {
		fmt.Fprintln(m.Stdout, "The Bottlefile declares no outputs.")
		return 0
	}
	for _, name := range names {
		fmt.Fprintf(m.Stdout, "%s = %s\n", name, planner.FormatJSON(values[name]))
	}
	return 0
}

// rawOutput prints a string as it is and anything else as HCL would.
func rawOutput(v cty.Value) string {
	if v.Type() == cty.String && !v.IsNull() {
		return v.AsString()
	}
	return planner.FormatJSON(planner.RedactedJSON(v))
}
