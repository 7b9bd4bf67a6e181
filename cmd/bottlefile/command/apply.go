package command

import (
	"bufio"
	"fmt"
	"strings"
	"time"

	"github.com/bottlefile/bottlefile/operations"
	"github.com/bottlefile/bottlefile/planner"
)

// ApplyCommand plans, asks for approval, and applies. With Destroy set it is
// the destroy command.
type ApplyCommand struct {
	Meta    *Meta
	Destroy bool
}

func (c *ApplyCommand) Synopsis() string {
	if c.Destroy {
		return "Destroy every object bottlefile created"
	}
	return "Create or update the bottles"
}

func (c *ApplyCommand) Help() string {
	if c.Destroy {
		return strings.TrimSpace(`
Usage: bottlefile [global options] destroy [options]

  Plans the removal of every object recorded in the state (and of any
  object carrying the state's lineage), shows it, and asks before doing it.
  An agent whose snapshot_policy.before includes "destroy" is snapshotted
  first, and its policy snapshots are kept: the plan lists them with their
  sizes, and the next apply resumes from them. -include-snapshots removes
  them too, leaving nothing; -target=agent.NAME.snapshot.N removes one.

Options:

  -auto-approve        Do not ask for approval.
  -include-snapshots   Remove the policy snapshots too; take none first.
  -json                Stream events as JSON lines (needs -auto-approve).
  -lock-timeout=DUR    Wait this long for the state lock (default 0s).
  -no-color            Print without color.
  -parallelism=N       Run at most N actions at once (default 10).
  -refresh=false       Trust the state; do not ask the runtimes first.
  -target=ADDR         Destroy only this object and what depends on it.
                       Repeatable.
  -var NAME=VALUE      Set a variable. Repeatable.
  -var-file=FILE       Set variables from an HCL or JSON file.
`)
	}
	return strings.TrimSpace(`
Usage: bottlefile [global options] apply [options] [PLANFILE]

  Plans, shows the plan, asks for approval, and performs it: in dependency
  order, N actions at a time, recording each finished action in the state
  before anything that depends on it starts. A failed action skips what
  depends on it; independent actions finish; the exit code is then 1.

  With PLANFILE (from plan -out), performs exactly that plan without
  asking, and refuses it if the configuration, the state or what is live
  changed since it was made.

  After starting an agent or sidecar, apply watches it for -wait: one that
  exits fails its action with its exit code and the last lines it printed,
  and what depends on it is not started.

  Ctrl-C stops starting new actions and lets running ones finish and be
  recorded; a second Ctrl-C abandons them.

Options:

  -auto-approve        Do not ask for approval.
  -destroy             Plan and perform the removal of everything.
  -include-snapshots   With -destroy, remove the kept snapshots too.
  -json                Stream events as JSON lines (needs -auto-approve
                       or a plan file).
  -lock-timeout=DUR    Wait this long for the state lock (default 0s).
  -no-color            Print without color.
  -parallelism=N       Run at most N actions at once (default 10).
  -refresh=false       Trust the state; do not ask the runtimes first.
  -refresh-only        Only bring the state in line with the runtimes.
  -replace=ADDR        Replace this object even if it has not changed.
  -target=ADDR         Apply only this object, those below it, and what
                       they depend on. Repeatable.
  -var NAME=VALUE      Set a variable. Repeatable.
  -var-file=FILE       Set variables from an HCL or JSON file.
  -wait=DUR            Watch each agent and sidecar this long after it
                       starts; one that exits meanwhile fails its action,
                       with its exit code and last lines (default 250ms, or
                       $BOTTLEFILE_APPLY_WAIT; 0 turns it off). Workloads
                       are watched at the same time. One with a
                       healthcheck is watched until it is healthy.
`)
}

func (c *ApplyCommand) Run(args []string) int {
	m := c.Meta
	a, diags := parseApplyArgs(args, c.Destroy)
	m.Color = m.Color && !a.NoColor
	if a.JSON && !a.AutoApprove && a.PlanFile == "" {
		diags = append(diags, argError("-json needs -auto-approve (or a saved plan): there is no prompt to answer"))
	}
	if m.showDiags(nil, diags) {
		return 1
	}
	v := newApplyView(m, a.JSON)
	if a.PlanFile != "" {
		return c.applySaved(a, v)
	}
	op, diags := m.open(m.Ctx, false, a.LockTimeout, a.inputs())
	defer op.Close()
	if v.Diagnostics(op.Files(), diags) {
		return 1
	}
	p, diags := op.Plan(m.Ctx, a.options())
	if v.Diagnostics(op.Files(), diags) {
		return 1
	}
	v.Plan(p, op.OutputChanges)
	if !p.Applyable() {
		return 0
	}
	if !a.AutoApprove && !c.approve(a.Destroy, p) {
		fmt.Fprintln(m.Stdout, "\nApply cancelled.")
		return 1
	}
	return applyPlan(m, op, p, v, a.Destroy, a.Parallelism, a.waitOption())
}

// applySaved applies a plan file, refusing it when anything it was made
// from has changed: the configuration, the state, or what is live.
func (c *ApplyCommand) applySaved(a *applyArgs, v applyView) int {
	m := c.Meta
	saved, err := planner.ReadPlanFile(a.PlanFile)
	if err != nil {
		return failView(v, "Cannot read the saved plan", err)
	}
	in := a.inputs()
	in.Saved = saved.Variables
	op, diags := m.open(m.Ctx, false, a.LockTimeout, in)
	defer op.Close()
	if v.Diagnostics(op.Files(), diags) {
		return 1
	}
	p, diags := op.PlanSaved(m.Ctx, saved)
	if v.Diagnostics(op.Files(), diags) {
		return 1
	}
	if !p.Applyable() {
		v.Message("The saved plan has no changes.")
		return 0
	}
	return applyPlan(m, op, p, v, saved.Options.Destroy, a.Parallelism, a.waitOption())
}

// applyPlan applies a plan with progress lines and a summary of what was
// and was not done, and returns the exit code.
func applyPlan(m *Meta, op *operations.Operation, p *planner.Plan, v applyView, destroy bool, parallelism int, wait time.Duration) int {
	if !p.Applyable() {
		return 0
	}
	v.Starting()
	res, diags := op.Apply(m.Ctx, p, operations.ApplyOptions{Parallelism: parallelism, Hook: newProgressHook(v.Event), Abandon: m.Abandon, Wait: wait})
	// An interrupt that came once every action had started stopped
	// nothing: what ran finished, and the apply is complete.
	failed := v.Diagnostics(op.Files(), diags) || len(res.Failed) > 0 || len(res.Skipped) > 0
	if m.Ctx.Err() != nil && !failed {
		v.Message("\nInterrupted after every action had started: each of them finished.")
	}
	v.Summary(applyResult(res, destroy, failed, op.Store.WriteErr()))
	if failed {
		return 1
	}
	if !destroy {
		// As Terraform: the outputs, now that what they refer to exists.
		if outputs, diags := op.Outputs(""); !diags.HasErrors() {
			v.Outputs(outputs)
		}
	}
	return 0
}

// approve asks for approval of plan p; one that deletes snapshots says so
// again in the question, since their loss is the one apply cannot undo.
// (-auto-approve does not ask: the plan it printed says it.)
func (c *ApplyCommand) approve(destroy bool, p *planner.Plan) bool {
	m := c.Meta
	what := "perform these actions"
	if destroy {
		what = "destroy all of these objects"
	}
	restate := ""
	if sum := p.Summary(); sum.SnapshotDelete > 0 {
		restate = fmt.Sprintf("  %s\n  The %s cannot be restored.\n", sum.String(), sum.SnapshotsDeleted())
	}
	fmt.Fprintf(m.Stdout, "\nDo you want to %s?\n%s  Only 'yes' will be accepted to approve.\n\n  Enter a value: ", what, restate)
	line, _ := bufio.NewReader(m.Stdin).ReadString('\n')
	return strings.TrimSpace(line) == "yes"
}
