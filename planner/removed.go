package planner

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/bottlefile/bottlefile/addrs"
	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/lang"
	"github.com/bottlefile/bottlefile/state"
)

// An agent whose block is removed from the configuration is destroyed,
// and its policy snapshots go as a destroy would have them go: with
// "destroy" in the snapshot_policy it was applied with, a snapshot is
// taken first and they are all kept (the block is gone, so the policy is
// the one recorded on its workload, PolicyKey); without, the plan says
// what the workload discards and counts the snapshots it deletes. Kept
// snapshots of an agent with no block stay until destroy
// -include-snapshots or snapshot rm removes them; a block of that name
// added again resumes from them.

// PolicyKey is the computed value, on an agent's workload record, holding
// the snapshot_policy it was applied with (JSON); absent for none.
const PolicyKey = "snapshot_policy"

// recordedPolicy is a snapshot_policy as PolicyKey records it.
type recordedPolicy struct {
	Before       []string      `json:"before,omitempty"`
	KeepLast     int           `json:"keep_last,omitempty"`
	MaxAge       time.Duration `json:"max_age,omitempty"`
	MaxTotalSize int64         `json:"max_total_size,omitempty"`
}

// encodePolicy is the PolicyKey value of a policy; "" for none.
func encodePolicy(p *lang.SnapshotPolicyValue) string {
	if p == nil {
		return ""
	}
	data, _ := json.Marshal(recordedPolicy{Before: p.Before, KeepLast: p.KeepLast, MaxAge: p.MaxAge, MaxTotalSize: p.MaxTotalSize}) // plain values: cannot fail
	return string(data)
}

// decodePolicy reads a workload record's PolicyKey: the policy it was
// applied with; nil for none. A record of an older bottlefile, which did
// not record policies, reads as none: the removal of its block then says
// what it discards and deletes.
func decodePolicy(rec *state.Record) *lang.SnapshotPolicyValue {
	if rec == nil || rec.Computed[PolicyKey] == "" {
		return nil
	}
	var r recordedPolicy
	if err := json.Unmarshal([]byte(rec.Computed[PolicyKey]), &r); err != nil {
		return nil
	}
	return &lang.SnapshotPolicyValue{Before: r.Before, KeepLast: r.KeepLast, MaxAge: r.MaxAge, MaxTotalSize: r.MaxTotalSize}
}

// recordPolicy has the agent's workload change w record its policy, and a
// workload that otherwise stays as it is record a policy that changed (or
// that an older bottlefile did not record): only its record changes.
func recordPolicy(w *Change, policy *lang.SnapshotPolicyValue) {
	if w == nil || !w.Object.Workload || w.Action == Delete || w.Action == Forget {
		return
	}
	w.Policy = encodePolicy(policy)
	if w.Action != NoOp || w.Prior == nil || w.Prior.Computed[PolicyKey] == w.Policy {
		return
	}
	w.Action, w.StateOnly = Update, true
	w.Reasons = append(w.Reasons, because(ReasonPolicyRecorded))
}

// declared reports whether the configuration has the agent at agentAddr.
func (p *Planner) declared(agentAddr string) bool {
	a, _ := addrs.Parse(agentAddr)
	_, ok := p.Config.Agents[a.Name()]
	return ok
}

// stillRepeated is the block address (agent.coder) of an instance whose
// key left its block's for_each or count while the block stays declared,
// so a reason says that rather than that the block was removed; "" for
// anything else.
func (p *Planner) stillRepeated(a addrs.Addr) string {
	if a.Key().IsNone() {
		return ""
	}
	for name := range p.Config.Agents {
		if b, err := addrs.Parse("agent." + name); err == nil && b.BlockName() == a.BlockName() {
			return "agent." + a.BlockName()
		}
	}
	return ""
}

// keptAfterRemoval reports whether the policy snapshot at addr of an agent
// whose block is gone stays: its workload (workload, nil when gone
// already) was applied with "destroy" in its policy, or is gone and left
// it (kept by an earlier removal or destroy). A destroy with
// -include-snapshots, or one that targets it, deletes it.
func (p *Planner) keptAfterRemoval(addr string, workload *state.Record, destroy bool) bool {
	if destroy && (p.Options.IncludeSnapshots || slices.Contains(p.Options.Targets, addr)) {
		return false
	}
	if workload == nil {
		return true
	}
	policy := decodePolicy(workload)
	return policy != nil && slices.Contains(policy.Before, "destroy") && !p.Options.IncludeSnapshots
}

// recordedPolicySnapshot is a policy snapshot of the agent at agentAddr
// (agent: its block; nil when the block is gone), wanted as it is
// recorded.
func recordedPolicySnapshot(r state.Record, agentAddr string, agent *lang.Agent) *desired {
	trigger := ""
	if t := recordedString(r, "trigger"); !t.IsNull() {
		trigger = t.AsString()
	}
	return &desired{
		runtime: r.Runtime, driver: r.Driver, agent: agent,
		object: drivers.Object{
			Addr: r.Addr, Kind: drivers.KindSnapshot,
			Attrs:   policySnapshotAttrs(agentAddr, recordedString(r, "description"), trigger),
			InPlace: []string{"description"},
		},
	}
}

// planRemovedAgents plans, for each agent whose block is gone and whose
// workload this plan deletes, what its recorded policy says of its
// snapshots: one taken first and all kept, or what is discarded.
func (p *Planner) planRemovedAgents(ctx context.Context, changes map[string]*Change, snaps snapshotIndex, discards *discardReads, lineage string) {
	for _, agentAddr := range sortedKeys(changes) {
		w := changes[agentAddr]
		a, _ := addrs.Parse(agentAddr)
		if !a.IsAgent() || w.Prior == nil || !w.Prior.Workload || w.Stray || w.Twin || p.declared(agentAddr) {
			continue
		}
		if w.Action != Delete && w.Action != Forget {
			continue
		}
		block := p.stillRepeated(a)
		policy := decodePolicy(w.Prior)
		keeps := policy != nil && slices.Contains(policy.Before, "destroy") && !p.Options.IncludeSnapshots
		if keeps {
			if p.keptByRemoval == nil {
				p.keptByRemoval = map[string]bool{}
			}
			p.keptByRemoval[agentAddr] = true
			var taken *Change
			if w.Action == Delete && w.Live != nil {
				reason := because(ReasonRemovedDestroy, "agent", agentAddr, "block", block)
				taken = newPolicySnapshotOf(changes, snaps, agentAddr, "", w, "before destroy", "destroy", reason)
				// No block to evaluate: the snapshot keeps the config of the
				// image the workload runs, as every snapshot does.
				taken.AgentSpec = &drivers.AgentSpec{Addr: agentAddr}
				w.SnapshotFirst = taken.Addr
				w.Reasons = append(w.Reasons, because(ReasonSnapshotFirstGone, "snapshot", taken.Addr))
			}
			prune(snaps[agentAddr], agentAddr, policy, taken, p.takenSize(ctx, policy, taken, w, lineage), p.pinned(nil), p.now())
			continue
		}
		var why Reason
		switch {
		case p.Options.IncludeSnapshots:
			why = because(ReasonIncludeSnapshots)
		case policy == nil:
			why = because(ReasonRemovedNoPolicy, "block", block)
		default:
			why = because(ReasonRemovedNoDestroy, "block", block)
		}
		if rt, ok := p.Runtimes[w.Runtime]; ok && w.Action == Delete && w.Live != nil {
			discards.explain(ctx, rt, w, lineage, "destroy", why)
		}
		for _, c := range snaps[agentAddr] {
			if c.Action == Delete && len(c.Reasons) == 0 {
				c.Reasons = append(c.Reasons, because(ReasonRemovedNoKeep, "agent", agentAddr, "block", block))
			}
		}
	}
}

// explainSidecars says what each replace or destroy of a sidecar
// discards: no snapshot_policy covers a sidecar, whose filesystem is in
// no snapshot.
func (p *Planner) explainSidecars(ctx context.Context, changes map[string]*Change, discards *discardReads, lineage string) {
	for _, addr := range sortedKeys(changes) {
		c := changes[addr]
		a, _ := addrs.Parse(c.Addr)
		if a.Kind() != addrs.SidecarKind || c.Live == nil || c.Prior == nil || c.Stray || c.Twin {
			continue
		}
		covered := policyAction(c.Action)
		if covered == "" {
			continue
		}
		if rt, ok := p.Runtimes[c.DeleteRuntime()]; ok {
			discards.explain(ctx, rt, c, lineage, covered, because(ReasonSidecarNoSnapshot))
		}
	}
}

// runningFrom maps each snapshot to the workloads that run its image now:
// as the runtime reports the image a live workload runs (LiveObject
// ImageID: docker's image id, a swarm service's image reference, a smolvm
// machine's image), else, where that names no snapshot, as the workload's
// record says it booted (BootFromKey). What the runtime says wins over a
// record a crash may have left wrong.
func runningFrom(changes map[string]*Change) map[string][]*Change {
	images := map[string]string{} // a snapshot's image id or reference, to its address
	for _, c := range changes {
		if c.Kind != drivers.KindSnapshot || c.Live == nil || c.Stray || c.Twin {
			continue
		}
		images[c.Live.ID] = c.Addr
		if c.Live.Name != "" {
			images[c.Live.Name] = c.Addr
		}
		if s, ok := drivers.RecordedSnapshot(priorComputed(c)); ok && s.Image != "" {
			images[s.Image] = c.Addr
		}
	}
	out := map[string][]*Change{}
	for _, addr := range sortedKeys(changes) {
		c := changes[addr]
		if c.Kind == drivers.KindSnapshot || c.Live == nil || c.Stray || c.Twin {
			continue
		}
		snap := ""
		if id := c.Live.ImageID; id != "" {
			snap = images[id]
			if snap == "" {
				snap = images[withoutDigest(id)]
			}
		}
		if snap == "" && c.Prior != nil {
			// The runtime names no snapshot's image (it cannot tell, or
			// names the image a pack was made of): the record says.
			snap = c.Prior.Computed[BootFromKey]
		}
		if snap != "" {
			out[snap] = append(out[snap], c)
		}
	}
	return out
}

func priorComputed(c *Change) map[string]string {
	if c.Prior == nil {
		return nil
	}
	return c.Prior.Computed
}

// withoutDigest is an image reference without its @sha256:… pin (a swarm
// service runs ref@digest).
func withoutDigest(ref string) string {
	if i := strings.LastIndex(ref, "@sha256:"); i > 0 {
		return ref[:i]
	}
	return ref
}

// runningAddrs is runningFrom by address, for Plan.RunningFrom.
func runningAddrs(running map[string][]*Change) map[string][]string {
	out := make(map[string][]string, len(running))
	for snap, cs := range running {
		for _, c := range cs {
			out[snap] = append(out[snap], c.Addr)
		}
	}
	return out
}
