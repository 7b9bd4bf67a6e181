package planner

import (
	"context"
	"fmt"
	"slices"

	"github.com/hashicorp/hcl/v2"
)

// DefaultTakeDescription is what a snapshot taken by snapshot take records
// when no description is given.
const DefaultTakeDescription = "taken by snapshot take"

// planTake plans what Options.Take asks for: a new policy snapshot of each
// named agent, and the prunes its policy then calls for. Every other change
// is dropped, as a -target would drop it: snapshot take changes nothing
// else.
func (p *Planner) planTake(ctx context.Context, changes map[string]*Change, agents map[string]*agentPlan, lineage string) hcl.Diagnostics {
	var diags hcl.Diagnostics
	if p.Options.Destroy || p.Options.RefreshOnly {
		return append(diags, errorDiag("Cannot take a snapshot in this plan", "A snapshot is taken in a plan of its own, not with -destroy or -refresh-only.", nil))
	}
	snaps := indexSnapshots(changes)
	keep := map[string]bool{}
	for _, req := range p.Options.Take {
		ap, ok := agents[req.Agent]
		if !ok {
			d := errorDiag("No such agent", fmt.Sprintf("%s is not an agent of the configuration, so it cannot be snapshotted.", req.Agent), nil)
			d.Extra = UnknownAddress{Given: req.Agent, Known: keys(agents)}
			diags = append(diags, d)
			continue
		}
		w := changes[req.Agent]
		if why := notRunning(w); why != "" {
			diags = append(diags, errorDiag(fmt.Sprintf("Cannot snapshot %s", req.Agent),
				fmt.Sprintf("%s has no running workload to commit: %s. Run bottlefile apply first.", req.Agent, why), ap.agent.DeclRange.Ptr()))
			continue
		}
		description := req.Description
		if description == "" {
			description = DefaultTakeDescription
		}
		taken := newPolicySnapshot(changes, snaps, ap, w, description, "take",
			because(ReasonSnapshotTake, "agent", req.Agent))
		keep[taken.Addr] = true
		if policy := ap.val.SnapshotPolicy; policy != nil {
			prune(snaps[req.Agent], req.Agent, policy, taken, p.takenSize(ctx, policy, taken, w, lineage), p.pinned(w), p.now())
		}
		for _, c := range snaps[req.Agent] {
			if c.Action == Delete && c.Prior != nil && slices.Contains(c.DeleteAfter, taken.Addr) {
				keep[c.Addr] = true
			}
		}
	}
	for addr, c := range changes {
		if !keep[addr] {
			delete(changes, addr)
			continue
		}
		if c.Action == Create {
			spec := agents[snapshotAgent(c)].spec
			c.AgentSpec = &spec
		}
	}
	return diags
}

// notRunning says why the agent's workload change w has no running
// workload, or "" when it has one.
func notRunning(w *Change) string {
	switch {
	case w == nil || (w.Live == nil && w.Prior == nil):
		return "it has never been applied"
	case w.Live == nil:
		return "its workload was recorded but is gone from the runtime"
	case !w.Live.Running:
		return "its workload is stopped"
	}
	return ""
}

// stays reports whether the workload change w keeps the workload that runs
// now: it is not deleted, replaced or archived by this plan.
func stays(w *Change) bool {
	return w.Action != Create && w.Action != Replace && w.Action != Migrate && w.Action != Delete && w.Action != Forget && w.Action != Archive
}
