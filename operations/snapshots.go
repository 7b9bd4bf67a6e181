package operations

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/bottlefile/bottlefile/addrs"
	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/executor"
	"github.com/bottlefile/bottlefile/planner"
	"github.com/bottlefile/bottlefile/state"
)

// Snapshot is one recorded snapshot, as snapshot list shows it.
type Snapshot struct {
	Addr  string
	Agent string // agent.NAME it was taken of
	// Trigger is what took it: "before replace", "before destroy",
	// "migrate", "take" or "import" for a policy snapshot, "block" for a
	// snapshot block.
	Trigger     string
	Description string
	Runtime     string
	Image       string
	Size        int64 // bytes; -1 when not recorded
	// Taken is when it was taken (for an import, on the machine it came
	// from); zero when not recorded.
	Taken time.Time
	// BootedBy are the workloads whose record says they were created from
	// it.
	BootedBy []string
}

// ListSnapshots reads the snapshots the state of dir records: all of them,
// or, with addr, those of agent addr or the one at addr. It reads the
// state only; no runtime is asked.
func ListSnapshots(dir, addr string, lockTimeout time.Duration) ([]Snapshot, error) {
	store, diags := openState(dir, state.Options{ReadOnly: true, LockTimeout: lockTimeout})
	if diags.HasErrors() {
		return nil, diags
	}
	defer store.Close()
	records, err := store.Records()
	if err != nil {
		return nil, err
	}
	bootedBy := map[string][]string{}
	for _, r := range records {
		if from := r.Computed[executor.BootFromKey]; from != "" && r.Kind != drivers.KindSnapshot {
			bootedBy[from] = append(bootedBy[from], r.Addr)
		}
	}
	var out []Snapshot
	for _, r := range records {
		if r.Kind != drivers.KindSnapshot {
			if r.Addr == addr && !isAgentAddr(addr) {
				return nil, fmt.Errorf("%s is a %s, not a snapshot", addr, r.Kind)
			}
			continue
		}
		s := snapshotOf(r)
		s.BootedBy = bootedBy[r.Addr]
		if addr == "" || s.Addr == addr || (isAgentAddr(addr) && s.Agent == addr) {
			out = append(out, s)
		}
	}
	if len(out) == 0 && addr != "" && !isAgentAddr(addr) {
		var known []string
		for _, r := range records {
			if r.Kind == drivers.KindSnapshot {
				known = append(known, r.Addr)
			}
		}
		return nil, fmt.Errorf("the state records no snapshot at %s.%s", addr, didYouMean(addr, known))
	}
	sort.Slice(out, func(i, j int) bool { return lessSnapshot(out[i], out[j]) })
	return out, nil
}

func snapshotOf(r state.Record) Snapshot {
	snap, _ := drivers.RecordedSnapshot(r.Computed)
	s := Snapshot{
		Addr: r.Addr, Agent: attrString(r, "agent"), Description: attrString(r, "description"),
		Runtime: r.Runtime, Image: snap.Image, Size: snap.Size,
		Taken: snap.Taken, // an import's: when it was taken elsewhere
	}
	if s.Taken.IsZero() {
		s.Taken = snap.Created
	}
	s.Trigger = trigger(r, s.Description)
	return s
}

// trigger says what took a snapshot: the trigger a policy snapshot
// records, or for one recorded before triggers were, what its
// description says.
func trigger(r state.Record, description string) string {
	if t := attrString(r, "trigger"); t != "" {
		if t == "replace" || t == "destroy" {
			return "before " + t
		}
		return t
	}
	if string(r.Attrs["policy"]) != "true" {
		return "block"
	}
	switch {
	case description == "before migrate":
		return "migrate"
	case strings.HasPrefix(description, "before "):
		return description
	case strings.HasPrefix(description, "imported from "):
		return "import"
	}
	return "policy"
}

// lessSnapshot orders by agent, then policy snapshots by number (so 10
// follows 9), then snapshot blocks by name.
func lessSnapshot(a, b Snapshot) bool {
	if a.Agent != b.Agent {
		return a.Agent < b.Agent
	}
	na, nb := policyIndex(a.Addr), policyIndex(b.Addr)
	if (na == 0) != (nb == 0) {
		return na != 0
	}
	if na != nb {
		return na < nb
	}
	return a.Addr < b.Addr
}

// policyIndex is N of agent.X.snapshot.N, or 0.
func policyIndex(addr string) int {
	a, _ := addrs.Parse(addr)
	n, _ := a.PolicySnapshotNumber()
	return n
}

func isAgentAddr(addr string) bool {
	a, _ := addrs.Parse(addr)
	return a.IsAgent()
}

// isPolicySnapshotOf reports whether addr is a policy snapshot of the
// agent at agentAddr.
func isPolicySnapshotOf(addr, agentAddr string) bool {
	a, _ := addrs.Parse(addr)
	return a.IsPolicySnapshot() && a.AgentAddr().String() == agentAddr
}

func attrString(r state.Record, name string) string {
	var s string
	json.Unmarshal(r.Attrs[name], &s) // null or absent leaves ""
	return s
}

// PlanTake plans snapshot take: a new policy snapshot of the agent now,
// and the prunes its snapshot_policy then calls for. Nothing else.
func (op *Operation) PlanTake(ctx context.Context, agent, description string) (*planner.Plan, hcl.Diagnostics) {
	p, diags := op.Plan(ctx, planner.Options{Take: []planner.TakeRequest{{Agent: agent, Description: description}}})
	if diags.HasErrors() {
		return nil, diags
	}
	// It is applied without asking: refuse a plan that would change
	// anything but the agent's snapshots.
	for _, c := range p.Changes {
		if c.Action != planner.NoOp && (c.Kind != drivers.KindSnapshot || !isPolicySnapshotOf(c.Addr, agent)) {
			return nil, append(diags, errorDiag("Cannot take the snapshot", fmt.Sprintf("The plan for it would also %s %s; snapshot take changes only the agent's snapshots. Run plan to see why.", c.Action, c.Addr)))
		}
	}
	if Taken(p) == "" {
		return nil, append(diags, errorDiag("Cannot take the snapshot", fmt.Sprintf("The plan takes no snapshot of %s.", agent)))
	}
	return p, diags
}

// Taken is the address of the snapshot a take plan creates, or "".
func Taken(p *planner.Plan) string {
	for _, c := range p.Changes {
		if c.Takes() {
			return c.Addr
		}
	}
	return ""
}

// PlanRemove plans snapshot rm: deleting exactly the recorded snapshots at
// addrs and nothing else. It refuses an address that is not a recorded
// snapshot, a snapshot block the configuration still declares (the next
// apply would take it again), and, unless force, a snapshot a live
// workload runs or a from_snapshot names (inUse).
func (op *Operation) PlanRemove(ctx context.Context, addrs []string, force bool) (*planner.Plan, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	records, err := op.Store.Records()
	if err != nil {
		return nil, append(diags, errorDiag("Cannot read state", err.Error()))
	}
	recorded := map[string]state.Record{}
	for _, r := range records {
		recorded[r.Addr] = r
	}
	var want []string
	for _, addr := range addrs {
		if slices.Contains(want, addr) {
			continue
		}
		r, ok := recorded[addr]
		switch {
		case !ok:
			known := make([]string, 0, len(records))
			for _, r := range records {
				if r.Kind == drivers.KindSnapshot {
					known = append(known, r.Addr)
				}
			}
			diags = append(diags, unknownAddress("Not a recorded snapshot", fmt.Sprintf("The state records no object at %s. `bottlefile snapshot list` lists the snapshots it records.", addr), addr, known))
		case r.Kind != drivers.KindSnapshot:
			diags = append(diags, errorDiag("Not a snapshot", fmt.Sprintf("%s is a %s, not a snapshot; snapshot rm removes only snapshots (destroy -target=%s removes the rest).", addr, r.Kind, addr)))
		case op.declares(addr):
			diags = append(diags, errorDiag("Snapshot still declared", fmt.Sprintf("%s is still declared in the configuration: remove the snapshot block instead (else the next apply takes it again).", addr)))
		default:
			want = append(want, addr)
		}
	}
	if diags.HasErrors() {
		return nil, diags
	}
	p, moreDiags := op.Plan(ctx, planner.Options{Destroy: true, IncludeSnapshots: true, Targets: want})
	diags = append(diags, moreDiags...)
	if diags.HasErrors() {
		return nil, diags
	}
	// -target keeps what a target depends on (a snapshot block's agent), and
	// a destroy would delete that too: keep exactly the snapshots.
	var kept []*planner.Change
	for _, c := range p.Changes {
		if slices.Contains(want, c.Addr) && (c.Action == planner.Delete || c.Action == planner.Forget) {
			kept = append(kept, c)
		}
	}
	if len(kept) != len(want) {
		return nil, append(diags, errorDiag("Cannot plan the removal", fmt.Sprintf("The plan removes %d of the %d snapshots asked for; run plan -destroy -include-snapshots -target=ADDR to see why.", len(kept), len(want))))
	}
	for _, c := range kept {
		users := op.inUse(p, c.Addr)
		if len(users) == 0 {
			continue
		}
		if !force {
			diags = append(diags, errorDiag("Snapshot in use", fmt.Sprintf("%s cannot be removed: %s. Without it, what boots from it cannot be created again. Remove or change those first, or run snapshot rm -force to remove it anyway (data loss).", c.Addr, strings.Join(users, "; "))))
			continue
		}
		c.Reasons = append(c.Reasons, planner.NewReason(planner.ReasonForceRemoveInUse, "users", strings.Join(users, "; ")))
	}
	if diags.HasErrors() {
		return nil, diags
	}
	// What is left is the removal asked for, not a partial plan of the
	// configuration: it carries no -target for the view to warn about.
	p.Changes, p.Kept, p.Options.Targets = kept, nil, nil
	return p, diags
}

// inUse says what needs the snapshot at addr: the live workloads that run
// its image (as their runtime reports it, else as their record says they
// booted), the agents archived in it, and the agents whose from_snapshot
// names it.
func (op *Operation) inUse(p *planner.Plan, addr string) []string {
	var out []string
	for _, w := range p.RunningFrom[addr] {
		out = append(out, fmt.Sprintf("%s runs from it", w))
	}
	out = append(out, op.archivedIn(addr)...)
	if op.Config != nil {
		for _, name := range op.Config.AgentNames() {
			if a := op.Config.Agents[name]; a.FromSnapshot == addr {
				out = append(out, fmt.Sprintf("%s boots from it (from_snapshot)", a.Addr()))
			}
		}
	}
	return out
}

// declares reports whether the configuration declares a snapshot block at
// addr.
func (op *Operation) declares(addr string) bool {
	a, _ := addrs.Parse(addr)
	if !a.IsSnapshotBlock() || op.Config == nil {
		return false
	}
	_, declared := op.Config.Snapshots[a.Name()]
	return declared
}
