package planner

import (
	"fmt"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"
)

// Options are the plan's modes, as the command line sets them.
type Options struct {
	// Destroy plans the removal of everything recorded or found live.
	Destroy bool
	// NoRefresh trusts the state instead of asking the runtimes
	// (-refresh=false): drift goes unseen.
	NoRefresh bool
	// RefreshOnly plans only to bring the state in line with the runtimes:
	// records of objects that are gone are forgotten, unrecorded objects
	// that match are adopted; nothing on a runtime changes.
	RefreshOnly bool
	// Targets limits the plan to these addresses, the objects below them
	// ("agent.x" covers "agent.x.network") and what they depend on.
	Targets []string
	// Replace forces replacement of these addresses.
	Replace []string
	// IncludeSnapshots, with Destroy, deletes the policy snapshots a
	// snapshot_policy would keep across destroy (destroy
	// -include-snapshots, snapshot rm). Without it they are kept, and
	// Plan.Kept lists them.
	IncludeSnapshots bool
	// Take plans one snapshot of each named agent now (snapshot take): a
	// policy snapshot agent.X.snapshot.N whose trigger is "take", pruned
	// by the agent's keep_last, max_age and max_total_size like the rest.
	Take []TakeRequest
	// Stop plans stopping the workloads of these agents (agent.NAME:
	// the agent's, its sidecars', its gateway's) and recording them as
	// stopped on purpose; Start plans starting them again (bottlefile
	// stop, start, restart). Nothing else changes.
	Stop, Start []string
	// Tick plans only the actions of the time policies due now
	// (snapshot_policy.every, idle.stop_after; bottlefile tick): Plan.Due
	// says which were, and Plan.ArchiveDue which agents are due for
	// Archive, planned on their own.
	Tick bool
	// Archive plans archiving these agents (agent addresses, instances
	// included): each committed to a policy snapshot, then its workloads
	// and networks removed and their records kept, marked archived
	// (archive.go). Nothing else changes. An archived agent is resumed by
	// Start, or by a plan that changes it.
	Archive []string
}

// TakeRequest is one imperative snapshot: the agent to commit and what to
// record as its description.
type TakeRequest struct {
	Agent       string // agent.NAME
	Description string
}

// covers reports whether addr is one of addrs or below one of them.
func covers(addrs []string, addr string) bool {
	for _, a := range addrs {
		if addr == a || strings.HasPrefix(addr, a+".") {
			return true
		}
	}
	return false
}

// targeted reports whether a -target of targets takes addr: what covers
// says, and, as in Terraform, every instance of a block with for_each or
// count for the block's address (agent.coder takes agent.coder["a"]).
func targeted(targets []string, addr string) bool {
	if covers(targets, addr) {
		return true
	}
	for _, a := range targets {
		if strings.HasPrefix(addr, a+"[") && !strings.Contains(a, "[") {
			return true
		}
	}
	return false
}

// applyTargets drops every change not targeted. As in Terraform, a
// targeted create, update or replace keeps what it depends on (made
// first), and a targeted delete keeps the deletes of what depends on it
// (removed first), never what it depends on: destroy -target of a
// snapshot or a sidecar must not take the agent or its network along.
func applyTargets(changes map[string]*Change, targets []string) {
	dependents := map[string][]string{}
	for addr, c := range changes {
		for _, dep := range dependsOn(c) {
			dependents[dep] = append(dependents[dep], addr)
		}
	}
	keep := map[string]bool{}
	var visit func(addr string)
	visit = func(addr string) {
		if keep[addr] {
			return
		}
		keep[addr] = true
		c, ok := changes[addr]
		if !ok {
			return
		}
		if c.Action == Delete {
			for _, d := range dependents[addr] {
				if changes[d].Action == Delete {
					visit(d)
				}
			}
			return
		}
		for _, dep := range dependsOn(c) {
			visit(dep)
		}
	}
	for addr := range changes {
		if targeted(targets, addr) {
			visit(addr)
		}
	}
	for addr := range changes {
		if !keep[addr] {
			delete(changes, addr)
		}
	}
}

// dependsOn is what a change's object depends on, as desired and as
// recorded.
func dependsOn(c *Change) []string {
	deps := slices.Clone(c.Object.DependsOn)
	if c.Prior != nil {
		deps = append(deps, c.Prior.DependsOn...)
	}
	return deps
}

// UnknownAddress is the Extra of a diagnostic about an address given on
// the command line that names nothing: the operations layer adds a "Did
// you mean" from Known, in one place for every command.
type UnknownAddress struct {
	Given string
	Known []string
}

// checkAddrs reports an address given on the command line that matches
// nothing.
func checkAddrs(flag string, addrs []string, changes map[string]*Change) *hcl.Diagnostic {
	for _, a := range addrs {
		found := slices.ContainsFunc(keys(changes), func(addr string) bool { return targeted([]string{a}, addr) })
		if !found {
			d := errorDiag("Invalid target", fmt.Sprintf("%s=%s matches nothing in the configuration or the state.", flag, a), nil)
			d.Extra = UnknownAddress{Given: a, Known: keys(changes)}
			return d
		}
	}
	return nil
}

// checkExact reports an address given on the command line that names no
// object.
func checkExact(flag string, addrs []string, changes map[string]*Change) *hcl.Diagnostic {
	for _, a := range addrs {
		if _, ok := changes[a]; !ok {
			d := errorDiag("Invalid replacement address", fmt.Sprintf("%s=%s names no object in the configuration or the state.", flag, a), nil)
			d.Extra = UnknownAddress{Given: a, Known: keys(changes)}
			return d
		}
	}
	return nil
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
