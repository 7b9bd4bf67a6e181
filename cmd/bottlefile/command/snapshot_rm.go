package command

import (
	"errors"
	"fmt"
	"strings"
)

// SnapshotRmCommand removes recorded snapshots.
type SnapshotRmCommand struct{ Meta *Meta }

func (c *SnapshotRmCommand) Synopsis() string { return "Remove recorded snapshots" }

func (c *SnapshotRmCommand) Help() string {
	return strings.TrimSpace(`
Usage: bottlefile [global options] snapshot rm [options] ADDR...

  Removes the recorded snapshots at ADDR... (agent.NAME.snapshot.N, or
  snapshot.NAME once its block is gone from the configuration): their
  images on the runtime and their records, and nothing else. It shows the
  plan and asks for approval first. An address that is not a recorded
  snapshot is refused, as is a snapshot block the configuration still
  declares (remove the block instead: the next apply would take it again).
  So is a snapshot a live workload runs (as its runtime reports the image
  it runs) or an agent's from_snapshot names: removing it loses what they
  would be created from again. -force removes it anyway, and the plan says
  it is data loss.

Options:

  -auto-approve        Do not ask for approval.
  -force               Remove a snapshot even when a workload runs from it
                       or a from_snapshot names it (data loss).
  -lock-timeout=DUR    Wait this long for the state lock (default 0s).
  -no-color            Print without color.
  -var NAME=VALUE      Set a variable. Repeatable.
  -var-file=FILE       Set variables from an HCL or JSON file.
`)
}

func (c *SnapshotRmCommand) Run(args []string) int {
	m := c.Meta
	fs := newFlagSet("snapshot rm")
	m.noColorFlag(fs)
	autoApprove := fs.Bool("auto-approve", false, "")
	force := fs.Bool("force", false, "")
	lockTimeout := fs.Duration("lock-timeout", 0, "")
	in := registerInputs(fs)
	addrs, err := parseInterleaved(fs, args)
	if err != nil {
		return m.fail("Invalid command line", fmt.Errorf("%v. Run with -help to see the options", err))
	}
	if len(addrs) == 0 {
		return m.fail("Invalid command line", errors.New("snapshot rm needs one or more snapshot addresses (`bottlefile snapshot list` lists them)"))
	}

	op, diags := m.open(m.Ctx, false, *lockTimeout, *in)
	defer op.Close()
	v := newApplyView(m, false)
	if v.Diagnostics(op.Files(), diags) {
		return 1
	}
	p, diags := op.PlanRemove(m.Ctx, addrs, *force)
	if v.Diagnostics(op.Files(), diags) {
		return 1
	}
	v.Plan(p, nil)
	if !p.Applyable() {
		return 0
	}
	if !*autoApprove && !(&ApplyCommand{Meta: m}).approve(true, p) {
		fmt.Fprintln(m.Stdout, "\nRemoval cancelled.")
		return 1
	}
	return applyPlan(m, op, p, v, true, 0, 0)
}
