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

  -no-color
          Print diagnostics without color.
  -var NAME=VALUE, -var-file=FILE
          Set variables an output needs, as for plan. Only those the
          outputs shown derive from are needed: a list shows a
          sensitive output as (sensitive value) without its variables.
  -json   Print the outputs (or the one named) as JSON.
`)
}

func (c *OutputCommand) Run(args []string) int {
	m := c.Meta
	fs := newFlagSet("output")
	m.noColorFlag(fs)
	asJSON := fs.Bool("json", false, "")
	in := registerInputs(fs)
	if m.showDiags(nil, finishParse(fs, args, 1)) {
		return 1
	}
	// As status: a variable without a value is no error unless an output
	// shown needs it, so the key need not be at hand to read a name.
	op, diags := m.observe(m.Ctx, 0, *in)
	defer op.Close()
	if m.showDiags(op.Files(), diags) {
		return 1
	}
	byName := fs.Arg(0) // "" for all of them
	outputs, diags := op.Outputs(byName)
	if m.showDiags(op.Files(), diags) {
		return 1
	}
	if byName != "" && !*asJSON {
		fmt.Fprintln(m.Stdout, rawOutput(outputs[0].Value))
		return 0
	}
	values := map[string]json.RawMessage{}
	for _, o := range outputs {
		values[o.Name] = planner.RedactedJSON(o.Value)
	}
	if *asJSON {
		var data []byte
		if byName != "" {
			data = values[byName]
		} else {
			data, _ = json.MarshalIndent(values, "", "  ")
		}
		fmt.Fprintln(m.Stdout, string(data))
		return 0
	}
	if len(outputs) == 0 {
		fmt.Fprintln(m.Stdout, "The Bottlefile declares no outputs.")
		return 0
	}
	for _, o := range outputs {
		fmt.Fprintf(m.Stdout, "%s = %s\n", o.Name, planner.FormatJSON(values[o.Name]))
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
