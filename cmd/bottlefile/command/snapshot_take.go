package command

import (
	"fmt"
	"strings"

	"github.com/bottlefile/bottlefile/operations"
)

// SnapshotTakeCommand takes a policy snapshot of an agent now.
type SnapshotTakeCommand struct{ Meta *Meta }

func (c *SnapshotTakeCommand) Synopsis() string { return "Snapshot an agent now (for hooks)" }

func (c *SnapshotTakeCommand) Help() string {
	return strings.TrimSpace(`
Usage: bottlefile [global options] snapshot take [options] ADDR

  Commits the filesystem of agent ADDR (agent.NAME) now, as its next
  policy snapshot agent.NAME.snapshot.N, and records it: the agent resumes
  from it when it is next created, as from any policy snapshot. The
  agent's snapshot_policy (keep_last, max_age, max_total_size) prunes
  older ones in the same plan. Nothing else changes.

  It is meant for harness hooks (before a risky action, on an error), so
  it shows the plan and applies it without asking: a hook must not wait
  for an answer. The last line of its output is the new snapshot's
  address.

Options:

  -description=TEXT    What to record as the snapshot's description.
  -lock-timeout=DUR    Wait this long for the state lock (default 0s).
  -no-color            Print without color.
  -var NAME=VALUE      Set a variable. Repeatable.
  -var-file=FILE       Set variables from an HCL or JSON file.
`)
}

func (c *SnapshotTakeCommand) Run(args []string) int {
	m := c.Meta
	fs := newFlagSet("snapshot take")
	m.noColorFlag(fs)
	description := fs.String("description", "", "")
	lockTimeout := fs.Duration("lock-timeout", 0, "")
	in := registerInputs(fs)
	addr, code := parseOneArg(m, fs, args, "snapshot take needs one agent address, like agent.coder")
	if code != 0 {
		return code
	}

	op, diags := m.open(m.Ctx, false, *lockTimeout, *in)
	defer op.Close()
	v := newApplyView(m, false)
	if v.Diagnostics(op.Files(), diags) {
		return 1
	}
	p, diags := op.PlanTake(m.Ctx, addr, *description)
	if v.Diagnostics(op.Files(), diags) {
		return 1
	}
	v.Plan(p, nil)
	if code := applyPlan(m, op, p, v, false, 0, 0); code != 0 {
		return code
	}
	fmt.Fprintln(m.Stdout, operations.Taken(p))
	return 0
}
