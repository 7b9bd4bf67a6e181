package planner

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/bottlefile/bottlefile/addrs"
	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/lang"
	"github.com/bottlefile/bottlefile/state"
)

// Policy snapshots live below their agent: agent.NAME.snapshot.N, N
// counting up, so the newest has the highest N and the address of the next
// one is known at plan time (a saved plan re-plans to the same address).

// policySnapshotIndex returns N for "agent.X.snapshot.N" of the given agent.
func policySnapshotIndex(agentAddr, addr string) (int, bool) {
	a, err := addrs.Parse(addr)
	if err != nil || a.AgentAddr().String() != agentAddr {
		return 0, false
	}
	return a.PolicySnapshotNumber()
}

// NextPolicySnapshot is the address of an agent's next policy snapshot:
// agent.NAME.snapshot.N with N one above any of taken. The planner and a
// snapshot import number them here alone.
func NextPolicySnapshot(agentAddr string, taken []string) string {
	next := 1
	for _, addr := range taken {
		if n, ok := policySnapshotIndex(agentAddr, addr); ok && n >= next {
			next = n + 1
		}
	}
	agent, _ := addrs.Parse(agentAddr)
	return agent.PolicySnapshot(next).String()
}

func snapshotAttrs(agentAddr string, description, triggers cty.Value, policy bool) map[string]cty.Value {
	if description == cty.NilVal {
		description = cty.NullVal(cty.String)
	}
	if triggers == cty.NilVal {
		triggers = cty.NullVal(cty.Map(cty.String))
	}
	return map[string]cty.Value{
		"agent":       cty.StringVal(agentAddr),
		"description": description,
		"triggers":    triggers,
		"policy":      cty.BoolVal(policy),
	}
}

// policySnapshotAttrs are a policy snapshot's attributes: what took it
// ("replace", "destroy", "migrate", "take") is its trigger. A snapshot
// recorded before triggers were recorded has none, and keeps having none,
// so that its hash does not change.
func policySnapshotAttrs(agentAddr string, description cty.Value, trigger string) map[string]cty.Value {
	attrs := snapshotAttrs(agentAddr, description, cty.NilVal, true)
	if trigger != "" {
		attrs["trigger"] = cty.StringVal(trigger)
	}
	return attrs
}

// keptAcrossDestroy reports whether a destroy keeps an agent's policy
// snapshot: its policy snapshots before a destroy, -include-snapshots was
// not given, and the snapshot is not named by -target.
func (p *Planner) keptAcrossDestroy(ap *agentPlan, addr string) bool {
	policy := ap.val.SnapshotPolicy
	return policy != nil && slices.Contains(policy.Before, "destroy") &&
		!p.Options.IncludeSnapshots && !slices.Contains(p.Options.Targets, addr)
}

// expandSnapshots adds the wanted snapshot objects: every snapshot block
// (not in a destroy), and every policy snapshot already taken of an agent
// still in the configuration (in a destroy only when its policy keeps
// snapshots across destroy). Retention prunes some of them later.
func (p *Planner) expandSnapshots(want map[string]*desired, agents map[string]*agentPlan, records []state.Record, destroy bool) hcl.Diagnostics {
	var diags hcl.Diagnostics
	if !destroy {
		for _, name := range p.Config.SnapshotNames() {
			sn := p.Config.Snapshots[name]
			ap, ok := agents[addrs.Agent(sn.AgentName).String()]
			if !ok {
				continue // the agent failed to evaluate; its diagnostics say why
			}
			val, moreDiags := p.Scope.EvalSnapshot(sn)
			diags = append(diags, moreDiags...)
			if moreDiags.HasErrors() {
				continue
			}
			want[sn.Addr()] = &desired{
				runtime: ap.runtime.Name, driver: ap.runtime.Driver.Name(), agent: ap.agent,
				object: drivers.Object{
					Addr: sn.Addr(), Kind: drivers.KindSnapshot,
					Attrs:     snapshotAttrs(ap.agent.Addr(), val.Description, val.Triggers, false),
					InPlace:   []string{"description"},
					DependsOn: []string{ap.agent.Addr()},
				},
			}
		}
	}
	workloads := map[string]*state.Record{}
	for i, r := range records {
		if a, _ := addrs.Parse(r.Addr); r.Workload && a.IsAgent() {
			workloads[r.Addr] = &records[i]
		}
	}
	for _, r := range records {
		if r.Kind != drivers.KindSnapshot {
			continue
		}
		if a, _ := addrs.Parse(r.Addr); a.IsPolicySnapshot() && !p.declared(a.AgentAddr().String()) {
			// Its agent's block is gone (removed.go).
			if p.keptAfterRemoval(r.Addr, workloads[a.AgentAddr().String()], destroy) {
				want[r.Addr] = recordedPolicySnapshot(r, a.AgentAddr().String(), nil)
			}
			continue
		}
		for agentAddr, ap := range agents {
			if _, ok := policySnapshotIndex(agentAddr, r.Addr); !ok {
				continue
			}
			if destroy && !p.keptAcrossDestroy(ap, r.Addr) {
				continue
			}
			want[r.Addr] = recordedPolicySnapshot(r, agentAddr, ap.agent)
		}
	}
	return diags
}

// recordedString reads back a string attribute of a record.
func recordedString(r state.Record, name string) cty.Value {
	var s *string
	if err := json.Unmarshal(r.Attrs[name], &s); err != nil || s == nil {
		return cty.NullVal(cty.String)
	}
	return cty.StringVal(*s)
}

// planPolicies adds what snapshot policies and resume ask for: a snapshot
// before each covered replace, destroy or migrate; prunes beyond keep_last
// and max_age; what an uncovered replace or destroy would discard; and the
// snapshot each re-created workload boots from.
func (p *Planner) planPolicies(ctx context.Context, changes map[string]*Change, agents map[string]*agentPlan, lineage string) {
	var discards discardReads
	defer discards.wait()
	p.keptByRemoval = nil
	snaps := indexSnapshots(changes)
	for _, agentAddr := range sortedKeys(agents) {
		ap := agents[agentAddr]
		w := changes[agentAddr]
		policy := ap.val.SnapshotPolicy
		recordPolicy(w, policy)
		var taken *Change
		if w != nil && w.Action == Migrate && !p.canMove(w.Prior.Runtime, w.Runtime) {
			p.policyDiags = append(p.policyDiags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Cannot migrate between these runtimes",
				Detail: fmt.Sprintf("%s moves from runtime %q (%s) to %q (%s), but the first cannot export a snapshot or the second cannot import one, so its filesystem cannot move. Destroy it and create it on the new runtime instead.",
					agentAddr, w.Prior.Runtime, w.Prior.Driver, w.Runtime, w.Driver),
				Subject: ap.agent.RuntimeRange.Ptr(),
			})
		} else if w != nil && w.Action == Migrate {
			// A migration carries the filesystem in a snapshot, taken on the
			// old runtime and moved to the new one, whatever the policy.
			taken = p.takeSnapshot(changes, snaps, ap, w, "migrate")
			taken.Runtime, taken.Driver = w.Prior.Runtime, w.Prior.Driver
			taken.MoveTo = w.Runtime
			w.BootFrom = taken.Addr
		} else if w != nil && w.Live != nil && w.Prior != nil {
			if covered := policyAction(w.Action); covered != "" {
				dropped := covered == "destroy" && p.Options.IncludeSnapshots
				if policy != nil && slices.Contains(policy.Before, covered) && !dropped {
					taken = p.takeSnapshot(changes, snaps, ap, w, covered)
				} else if rt, ok := p.Runtimes[w.Runtime]; ok {
					why := because(ReasonPolicyNotCovered, "covered", covered)
					if dropped {
						why = because(ReasonIncludeSnapshots)
					}
					discards.explain(ctx, rt, w, lineage, covered, why)
				}
			}
		}
		if policy != nil {
			prune(snaps[agentAddr], agentAddr, policy, taken, p.takenSize(ctx, policy, taken, w, lineage), p.pinned(w), p.now())
		}
		if w != nil && w.Restarted {
			planRestarted(w, snaps[agentAddr], ap, p.now()) // restarted.go
		} else if resumeArchived(changes, w, ap) {
			// resumed from its archive snapshot (archive.go)
		} else if w != nil && (w.Action == Create || w.Action == Replace) && ap.val.Resume {
			if d := resume(changes, snaps[agentAddr], ap, w, taken); d != nil {
				p.policyDiags = append(p.policyDiags, d)
			}
		}
		if w != nil && !w.Restarted {
			planCarry(changes, w, taken, ap) // workspace.go
		}
	}
	p.planRemovedAgents(ctx, changes, snaps, &discards, lineage) // removed.go
	p.explainSidecars(ctx, changes, &discards, lineage)
	for _, c := range changes {
		if c.Kind == drivers.KindSnapshot && c.Action == Update {
			c.StateOnly = true // a description is kept in state only
		}
		if c.Kind == drivers.KindSnapshot && (c.Action == Create || c.Action == Replace) {
			if ap, ok := agents[snapshotAgent(c)]; ok {
				spec := ap.spec
				c.AgentSpec = &spec
			}
		}
	}
}

func snapshotAgent(c *Change) string {
	var s string
	json.Unmarshal(c.After["agent"], &s)
	return s
}

// policyAction is the snapshot_policy.before word for a workload action.
func policyAction(a Action) string {
	switch a {
	case Replace:
		return "replace"
	case Delete:
		return "destroy"
	}
	return ""
}

// snapshotIndex holds the snapshot changes by the agent they are of, so
// that each agent's policy looks at its own and not at every change.
type snapshotIndex map[string][]*Change

// indexSnapshots indexes a policy snapshot by its address (one being
// deleted keeps its number taken) and any other by its agent attribute.
func indexSnapshots(changes map[string]*Change) snapshotIndex {
	idx := snapshotIndex{}
	for _, addr := range sortedKeys(changes) {
		c := changes[addr]
		if c.Kind != drivers.KindSnapshot {
			continue
		}
		agent := snapshotAgent(c)
		if a, _ := addrs.Parse(addr); a.IsPolicySnapshot() {
			agent = a.AgentAddr().String()
		}
		idx[agent] = append(idx[agent], c)
	}
	return idx
}

// takeSnapshot plans a policy snapshot of the workload before it goes.
func (p *Planner) takeSnapshot(changes map[string]*Change, snaps snapshotIndex, ap *agentPlan, w *Change, covered string) *Change {
	reason := because(ReasonSnapshotBefore, "covered", covered, "agent", ap.agent.Addr(), "action", map[string]string{"replace": "replaced", "destroy": "destroyed", "migrate": "migrated"}[covered])
	if covered == "migrate" {
		reason = because(ReasonSnapshotMigrate, "agent", ap.agent.Addr(), "from", w.Prior.Runtime, "to", w.Runtime)
	}
	c := newPolicySnapshot(changes, snaps, ap, w, "before "+covered, covered, reason)
	w.SnapshotFirst = c.Addr
	if covered != "migrate" {
		w.Reasons = append(w.Reasons, because(ReasonSnapshotFirst, "snapshot", c.Addr))
	}
	return c
}

// newPolicySnapshot plans the agent's next policy snapshot,
// agent.X.snapshot.N with N one more than the highest taken, of the
// workload w.
func newPolicySnapshot(changes map[string]*Change, snaps snapshotIndex, ap *agentPlan, w *Change, description, trigger string, reason Reason) *Change {
	return newPolicySnapshotOf(changes, snaps, ap.agent.Addr(), ap.agent.Name, w, description, trigger, reason)
}

// newPolicySnapshotOf is newPolicySnapshot of the agent at agentAddr
// (named name in the configuration; "" when its block is gone).
func newPolicySnapshotOf(changes map[string]*Change, snaps snapshotIndex, agentAddr, name string, w *Change, description, trigger string, reason Reason) *Change {
	var taken []string
	for _, c := range snaps[agentAddr] {
		taken = append(taken, c.Addr)
	}
	addr := NextPolicySnapshot(agentAddr, taken)
	obj := drivers.Object{
		Addr: addr, Kind: drivers.KindSnapshot,
		Attrs:   policySnapshotAttrs(agentAddr, cty.StringVal(description), trigger),
		InPlace: []string{"description"},
	}
	c := &Change{
		Addr: addr, Agent: name, Kind: drivers.KindSnapshot, Runtime: w.Runtime, Driver: w.Driver,
		Action: Create, Object: obj, Fingerprint: fingerprint(obj.Kind, obj.Attrs, nil),
		After:   map[string]json.RawMessage{},
		Reasons: []Reason{reason},
	}
	for name, v := range obj.Attrs {
		c.After[name] = RedactedJSON(v)
	}
	changes[addr] = c
	snaps[agentAddr] = append(snaps[agentAddr], c)
	return c
}

// discardReads ask the drivers, at most maxDiscardReads at once, how much
// each uncovered replace or destroy would throw away: one engine call per
// workload, which a destroy of many agents would otherwise wait for one
// after another.
type discardReads struct {
	wg    sync.WaitGroup
	slots chan struct{}
	reads []*discardRead
}

// discardRead is one workload's: its reason goes in at index at of the
// change's reasons, where it would have gone had the read been made there.
type discardRead struct {
	w      *Change
	at     int
	reason Reason
}

const maxDiscardReads = 10

// explain starts reading what w's workload wrote, when its driver can say.
func (d *discardReads) explain(ctx context.Context, rt *Runtime, w *Change, lineage, covered string, why Reason) {
	wr, ok := drivers.As[drivers.WrittenReader](rt.Driver)
	if !ok {
		return
	}
	if d.slots == nil {
		d.slots = make(chan struct{}, maxDiscardReads)
	}
	r := &discardRead{w: w, at: len(w.Reasons)}
	d.reads = append(d.reads, r)
	live := *w.Live
	d.wg.Go(func() {
		d.slots <- struct{}{}
		defer func() { <-d.slots }()
		written, err := wr.Written(ctx, lineage, live)
		if err != nil || (written.Bytes <= 0 && written.Unmeasured == "") {
			return
		}
		since := ""
		if !written.Since.IsZero() {
			since = written.Since.UTC().Format("2006-01-02 15:04 UTC")
		}
		if written.Unmeasured != "" {
			// Nothing known, so the warning stands for whatever there is.
			r.reason = because(ReasonDiscardsUnmeasured, "covered", covered, "since", since, "unmeasured", written.Unmeasured)
		} else {
			r.reason = because(ReasonDiscards, "covered", covered, "written_bytes", strconv.FormatInt(written.Bytes, 10), "since", since)
		}
		r.reason.Cause = &why
	})
}

// wait waits for the reads and adds their reasons.
func (d *discardReads) wait() {
	d.wg.Wait()
	for _, r := range d.reads {
		if r.reason.Code != "" {
			r.w.Reasons = slices.Insert(r.w.Reasons, r.at, r.reason)
		}
	}
}

// prune marks the policy snapshots, among the agent's, that fall out of
// retention: beyond keep_last, older than max_age, and then, oldest first,
// those beyond max_total_size. It never prunes the snapshot taken in this
// plan (taken), one pinned (a from_snapshot names it, the workload runs
// it), nor, by size, when nothing is taken, the newest, which a re-created
// workload would resume from.
//
// takenSize is what the snapshot taken is expected to add (what the
// workload wrote, as its runtime tells: takenSize), counted against
// max_total_size before it is measured; 0 when not known.
func prune(ofAgent []*Change, agentAddr string, policy *lang.SnapshotPolicyValue, taken *Change, takenSize int64, pinned map[string]bool, now time.Time) {
	type snap struct {
		n int
		c *Change
	}
	var snaps []snap
	for _, c := range ofAgent {
		n, ok := policySnapshotIndex(agentAddr, c.Addr)
		if ok && c.Action != Delete && c.Action != Forget {
			snaps = append(snaps, snap{n, c})
		}
	}
	sort.Slice(snaps, func(i, j int) bool { return snaps[i].n > snaps[j].n }) // newest first
	drop := func(c *Change, why Reason) {
		c.Action = Delete
		c.Reasons = append(c.Reasons, why)
		c.After = nil
		if taken != nil {
			c.DeleteAfter = append(c.DeleteAfter, taken.Addr) // never fewer snapshots than the policy keeps
		}
	}
	var kept []snap
	for i, s := range snaps {
		if s.c == taken || s.c.Prior == nil || pinned[s.c.Addr] {
			kept = append(kept, s)
			continue
		}
		var why Reason
		if policy.KeepLast > 0 && i >= policy.KeepLast {
			why = because(ReasonKeepLast, "keep_last", strconv.Itoa(policy.KeepLast))
		} else if created := recorded(s.c).Created; policy.MaxAge > 0 && !created.IsZero() && now.Sub(created) > policy.MaxAge {
			why = because(ReasonMaxAge, "max_age", policy.MaxAge.String(), "taken", created.UTC().Format("2006-01-02 15:04 UTC"))
		}
		if why.Code == "" {
			kept = append(kept, s)
			continue
		}
		drop(s.c, why)
	}
	if policy.MaxTotalSize <= 0 {
		return
	}
	var total int64
	for _, s := range kept {
		if s.c == taken {
			continue
		}
		total += snapshotSize(s.c)
	}
	if total+takenSize <= policy.MaxTotalSize {
		return
	}
	why := because(ReasonMaxTotalSize, "max_total_size_bytes", strconv.FormatInt(policy.MaxTotalSize, 10), "total_bytes", strconv.FormatInt(total, 10))
	if taken != nil {
		why.set("taken", taken.Addr)
		if takenSize > 0 {
			why.set("taken_bytes", strconv.FormatInt(takenSize, 10))
		}
	}
	total += takenSize
	for i := len(kept) - 1; i >= 0 && total > policy.MaxTotalSize; i-- { // oldest first
		s := kept[i]
		if s.c == taken || s.c.Prior == nil || pinned[s.c.Addr] || (taken == nil && i == 0) {
			continue
		}
		total -= snapshotSize(s.c)
		drop(s.c, why)
	}
}

// takenSize is what the snapshot taken of the workload w will add, for
// max_total_size to count before it is measured: what the workload wrote
// (a commit adds its own layer), where its runtime tells cheaply; 0
// otherwise, or when no snapshot is taken or no max_total_size counts.
// One read of the runtime.
func (p *Planner) takenSize(ctx context.Context, policy *lang.SnapshotPolicyValue, taken, w *Change, lineage string) int64 {
	if policy == nil || policy.MaxTotalSize <= 0 || taken == nil || w == nil || w.Live == nil {
		return 0
	}
	rt, ok := p.Runtimes[taken.Runtime]
	if !ok {
		return 0
	}
	wr, ok := drivers.As[drivers.WrittenReader](rt.Driver)
	if !ok {
		return 0
	}
	written, err := wr.Written(ctx, lineage, *w.Live)
	if err != nil || written.Unmeasured != "" {
		return 0
	}
	return max(written.Bytes, 0)
}

// snapshotSize is a recorded snapshot's size in bytes; 0 when unknown (one
// not taken yet, or recorded without a size).
func snapshotSize(c *Change) int64 {
	return max(recorded(c).Size, 0)
}

// recorded is the snapshot result the state records for a snapshot's
// change; not known (Size -1, zero times) when it records none.
func recorded(c *Change) drivers.SnapshotResult {
	if c.Prior == nil {
		return drivers.SnapshotResult{Size: -1}
	}
	s, _ := drivers.RecordedSnapshot(c.Prior.Computed)
	return s
}

// BootFromKey is the computed value, on a workload's record, naming the
// snapshot it was created from (resume, migration, from_snapshot).
const BootFromKey = "boot_from"

// pinned is the set of snapshot addresses retention never prunes: those a
// from_snapshot names, or the agent could not be created again; the one
// the agent's workload w booted from while it stays (its image is in use);
// and every one a live workload that stays runs, as its runtime reports
// (a record a crash left wrong cannot unpin it).
func (p *Planner) pinned(w *Change) map[string]bool {
	out := map[string]bool{}
	for _, a := range p.Config.Agents {
		if a.FromSnapshot != "" {
			out[a.FromSnapshot] = true
		}
	}
	if a := archivePinned(w); a != "" {
		out[a] = true // archive.go
	}
	if w != nil && w.Prior != nil && w.Live != nil && stays(w) && w.Prior.Computed[BootFromKey] != "" {
		out[w.Prior.Computed[BootFromKey]] = true
	}
	for snap, ws := range p.running {
		if slices.ContainsFunc(ws, stays) {
			out[snap] = true
		}
	}
	return out
}

// resume picks the snapshot a (re)created workload boots from: the one
// from_snapshot pins, or the newest of its agent's snapshots. A pinned
// snapshot that is not there is an error when the agent has no image of
// its own to start from.
func resume(changes map[string]*Change, ofAgent []*Change, ap *agentPlan, w *Change, taken *Change) *hcl.Diagnostic {
	var from *Change
	if pin := ap.agent.FromSnapshot; pin != "" {
		from = changes[pin]
		gone, removal := "", ""
		switch {
		case from == nil:
			gone = "it is not in the state (bottlefile snapshot list shows the snapshots there are)"
		case from.Action == Delete || from.Action == Forget:
			removal = strings.Join(ReasonTexts(from.Reasons), "; ")
			gone = "this plan removes it: " + removal
		}
		if gone == "" {
			// booting from it, below
		} else if ap.val.Workload.GetAttr("image").IsNull() && ap.val.Workload.GetAttr("build").IsNull() {
			return &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Snapshot to boot from is missing",
				Detail:   fmt.Sprintf("%s boots from %s (from_snapshot), and has no image of its own, but %s.", ap.agent.Addr(), pin, gone),
				Subject:  ap.agent.FromSnapshotRange.Ptr(),
			}
		} else {
			if removal != "" {
				w.Reasons = append(w.Reasons, because(ReasonPinRemoved, "snapshot", pin, "removal", removal))
			} else {
				w.Reasons = append(w.Reasons, because(ReasonPinMissing, "snapshot", pin))
			}
			return nil
		}
	} else if taken != nil {
		from = taken
	} else {
		var newest time.Time
		for _, c := range ofAgent {
			if c.Prior == nil || c.Action == Delete || c.Action == Forget || snapshotAgent(c) != ap.agent.Addr() {
				continue
			}
			created := recorded(c).Created
			if !created.IsZero() && (from == nil || created.After(newest)) {
				from, newest = c, created
			}
		}
	}
	if from == nil {
		return nil
	}
	w.BootFrom = from.Addr
	carried, note := carryFromSnapshot(w, from, taken, ap) // workspace.go
	if carried {
		return nil
	}
	if note.Code != "" {
		defer func() { w.Reasons = append(w.Reasons, note) }()
	}
	switch {
	case from == taken:
		w.Reasons = append(w.Reasons, because(ReasonBootsTaken, "snapshot", from.Addr))
	case ap.agent.FromSnapshot != "":
		why := because(ReasonBootsPinned, "snapshot", from.Addr)
		if of := snapshotAgent(from); of != "" && of != ap.agent.Addr() {
			why.set("of", of)
		}
		if from.Prior == nil {
			why.set("first", "true")
		} else if created := recorded(from).Created; !created.IsZero() {
			why.set("taken", created.UTC().Format("2006-01-02 15:04 UTC"))
		}
		w.Reasons = append(w.Reasons, why)
	case from.Prior != nil:
		w.Reasons = append(w.Reasons, because(ReasonResumes, "snapshot", from.Addr, "taken", formatCreated(recorded(from).Created)))
	default:
		w.Reasons = append(w.Reasons, because(ReasonBootsFrom, "snapshot", from.Addr))
	}
	return nil
}

// canMove reports whether a snapshot can move from one runtime to another.
func (p *Planner) canMove(from, to string) bool {
	f, t := p.Runtimes[from], p.Runtimes[to]
	if f == nil || t == nil {
		return false
	}
	_, exports := drivers.As[drivers.SnapshotExporter](f.Driver)
	_, imports := drivers.As[drivers.SnapshotImporter](t.Driver)
	return exports && imports
}

// forgetLostSnapshots plans forgetting each recorded snapshot whose image
// is gone from its runtime: taking it again would commit whatever runs
// now, or nothing at all, and call it the snapshot that was lost. A
// snapshot block is the exception when its agent runs and stays: it is
// taken again, as any snapshot block that is not taken is.
func forgetLostSnapshots(changes map[string]*Change) {
	for _, c := range changes {
		if c.Kind != drivers.KindSnapshot || c.Action != Create || c.Prior == nil || c.Live != nil {
			continue
		}
		agent := snapshotAgent(c)
		why := because(ReasonSnapshotLost)
		if _, policy := policySnapshotIndex(agent, c.Addr); !policy {
			if w := changes[agent]; notRunning(w) == "" && stays(w) {
				c.Reasons = []Reason{because(ReasonSnapshotRetaken, "agent", agent)}
				continue
			}
			why = because(ReasonSnapshotLostAgent, "agent", agent)
		}
		c.Action = Forget
		c.Reasons = []Reason{why}
		c.After = nil
	}
}

// keptSnapshots lists the policy snapshots a destroy leaves in place: of
// every agent, or of those in of (agents whose block a plan removes).
func keptSnapshots(changes []*Change, of map[string]bool) []KeptSnapshot {
	var out []KeptSnapshot
	for _, c := range changes {
		if c.Kind != drivers.KindSnapshot || (c.Action != NoOp && c.Action != Create && c.Action != Update) {
			continue
		}
		agent := snapshotAgent(c)
		if _, ok := policySnapshotIndex(agent, c.Addr); !ok || (of != nil && !of[agent]) {
			continue
		}
		k := KeptSnapshot{Addr: c.Addr, Size: -1}
		if c.Prior != nil && c.Action != Create {
			r := recorded(c)
			k.Size, k.Created = r.Size, r.Created
		}
		out = append(out, k)
	}
	return out
}

// formatCreated writes when a snapshot was made as the state records it;
// "" when not known.
func formatCreated(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02 15:04 UTC")
}
