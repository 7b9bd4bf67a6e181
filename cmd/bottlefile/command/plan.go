package command

import (
	"fmt"
	"strings"
)

// PlanCommand shows what apply would do. It changes nothing on any runtime.
type PlanCommand struct {
	Meta *Meta
}

func (c *PlanCommand) Synopsis() string { return "Show the changes apply would make" }

func (c *PlanCommand) Help() string {
	return strings.TrimSpace(`
Usage: bottlefile [global options] plan [options]

  Compares the Bottlefile with the recorded state and with what is really
  running, and shows the actions apply would take. Nothing on any runtime
  changes: no create, no pull, no build.

Options:

  -destroy             Plan the removal of every object in the state. The
                       snapshots a snapshot_policy takes before a destroy
                       are kept, and the plan lists them.
  -include-snapshots   With -destroy, remove the kept snapshots too.
  -detailed-exitcode   Exit 0 with no changes, 1 on error, 2 with changes.
  -json                Print the plan as one JSON document.
  -markdown            Print the plan as Markdown for a pull request
                       comment: data loss, egress widenings and credential
                       changes first, each change in a collapsible block.
  -out=FILE            Save the plan; apply FILE performs exactly it.
  -refresh=false       Trust the state; do not ask the runtimes what is live.
  -refresh-only        Only bring the state in line with the runtimes.
  -replace=ADDR        Replace this object even if it has not changed.
  -target=ADDR         Plan only this object, those below it, and what
                       they depend on. Repeatable.
  -var NAME=VALUE      Set a variable. Repeatable.
  -var-file=FILE       Set variables from an HCL or JSON file.
  -lock-timeout=DUR    Wait this long for the state lock (default 0s).
  -no-color            Print without color.
  -parallelism=N       Accepted for symmetry with apply (default 10).
`)
}

func (c *PlanCommand) Run(args []string) int {
	m := c.Meta
	a, diags := parsePlanArgs(args)
	m.Color = m.Color && !a.NoColor
	if m.showDiags(nil, diags) {
		return 1
	}
	op, diags := m.open(m.Ctx, true, a.LockTimeout, a.inputs())
	defer op.Close()
	if m.showDiags(op.Files(), diags) {
		return 1
	}
	p, diags := op.Plan(m.Ctx, a.options())
	if m.showDiags(op.Files(), diags) {
		return 1
	}
	if a.Out != "" {
		if err := op.SavePlan(p, a.Out); err != nil {
			return m.fail("Cannot save the plan", err)
		}
	}
	v := newPlanView(a.format(), m.Stdout, m.Color)
	if err := v.Plan(p); err != nil {
		return m.fail("Cannot write the plan", err)
	}
	v.Outputs(op.OutputChanges)
	if a.Out != "" && a.format() == formatHuman {
		fmt.Fprintf(m.Stdout, "\nSaved the plan to %s. To perform exactly these actions, run:\n  bottlefile apply %s\n", a.Out, a.Out)
	}
	if a.DetailedExitCode && p.Applyable() {
		return 2
	}
	return 0
}
