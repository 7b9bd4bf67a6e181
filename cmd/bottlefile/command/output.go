package command

import "strings"

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
	newOutputsView(*asJSON, m.Stdout).Outputs(outputs, byName)
	return 0
}
