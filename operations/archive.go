package operations

import (
	"context"
	"fmt"

	"github.com/hashicorp/hcl/v2"

	"github.com/bottlefile/bottlefile/addrs"
	"github.com/bottlefile/bottlefile/planner"
)

// PlanArchive plans bottlefile archive: each agent committed to a
// snapshot, then its workloads and network removed and their records kept,
// marked archived (planner/archive.go), and nothing else but the prunes
// the snapshot's policy calls for.
func (op *Operation) PlanArchive(ctx context.Context, agents []string) (*planner.Plan, hcl.Diagnostics) {
	return op.planLifecycle(ctx, "archive", planner.Options{Archive: agents}, agents)
}

// Archived reports whether the agent of addr (an agent, or an object
// below it) is archived: its workload's record is marked. start, exec and
// apply resume it.
func (op *Operation) Archived(addr string) (bool, hcl.Diagnostics) {
	agent, ok := addrs.AgentOf(addr)
	if !ok || op.Store == nil {
		return false, nil
	}
	rec, ok, err := op.Store.Get(agent.String())
	if err != nil {
		return false, hcl.Diagnostics{errorDiag("Cannot read state", err.Error())}
	}
	return ok && planner.IsArchived(&rec), nil
}

// lifecycleChange reports whether a lifecycle command (stop, start,
// archive) may apply c without asking: the action it is for, a snapshot
// an archive takes or prunes, or a resume of an archived agent by start.
func lifecycleChange(verb string, c *planner.Change) bool {
	switch {
	case c.Action == planner.NoOp:
		return true
	case verb == "stop":
		return c.Action == planner.Stop
	case verb == "start" && c.Action == planner.Start:
		return true
	case verb == "start":
		return (c.Action == planner.Create || c.Action == planner.Update) && resumes(c)
	}
	// archive
	return c.Action == planner.Archive || c.Takes() || (c.Action == planner.Delete && c.Kind == "snapshot")
}

// resumes reports a change that resumes an archived agent.
func resumes(c *planner.Change) bool {
	for _, r := range c.Reasons {
		if r.Code == planner.ReasonArchiveResume {
			return true
		}
	}
	return false
}

// archivedIn says which archived agents the snapshot at addr keeps (their
// records name it): snapshot rm refuses it, as it refuses one a workload
// runs, since resuming them needs it.
func (op *Operation) archivedIn(addr string) []string {
	if op.Store == nil {
		return nil
	}
	records, err := op.Store.Records()
	if err != nil {
		return nil
	}
	var out []string
	for _, r := range records {
		if planner.IsArchived(&r) && r.Computed[planner.ArchiveSnapshotKey] == addr {
			out = append(out, fmt.Sprintf("%s is archived in it", r.Addr))
		}
	}
	return out
}
