package command

import (
	"fmt"
	"strings"

	"github.com/bottlefile/bottlefile/planner"
)

// GraphCommand prints the action graph in DOT.
type GraphCommand struct {
	Meta *Meta
}

func (c *GraphCommand) Synopsis() string { return "Print the action graph in DOT" }

func (c *GraphCommand) Help() string {
	return strings.TrimSpace(`
Usage: bottlefile [global options] graph [-plan=FILE]

  Prints the steps apply would take and their order as a DOT digraph (an
  edge points from a step to the step it waits for). Without -plan it
  plans now, which changes nothing on any runtime. Render with, for
  example, "bottlefile graph | dot -Tsvg > graph.svg".

Options:

  -var NAME=VALUE, -var-file=FILE
          Set variables the configuration needs, as for plan.
  -plan=FILE   Print the graph of a saved plan.
`)
}

func (c *GraphCommand) Run(args []string) int {
	m := c.Meta
	fs := newFlagSet("graph")
	m.noColorFlag(fs)
	planFile := fs.String("plan", "", "")
	in := registerInputs(fs)
	if m.showDiags(nil, finishParse(fs, args, 0)) {
		return 1
	}
	var p *planner.Plan
	if *planFile != "" {
		saved, err := planner.ReadPlanFile(*planFile)
		if err != nil {
			return m.fail("Cannot read the saved plan", err)
		}
		p = saved.Plan()
	} else {
		op, diags := m.open(m.Ctx, true, 0, *in)
		defer op.Close()
		if m.showDiags(op.Files(), diags) {
			return 1
		}
		p, diags = op.Plan(m.Ctx, planner.Options{})
		if m.showDiags(op.Files(), diags) {
			return 1
		}
	}
	fmt.Fprint(m.Stdout, p.Graph().Dot())
	return 0
}
