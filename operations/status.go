package operations

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/bottlefile/bottlefile/addrs"
	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/executor"
	"github.com/bottlefile/bottlefile/planner"
	"github.com/bottlefile/bottlefile/state"
)

// Workload states as status reports them. A runtime's own words (docker's
// "exited", smolvm's "stopped") are folded into these; the runtime's word
// stays in WorkloadStatus.RuntimeState.
const (
	WorkloadRunning      = "running"
	WorkloadExited       = "exited"
	WorkloadNeverStarted = "never started"
	// WorkloadMissing: the state records it, no runtime has it.
	WorkloadMissing = "missing"
	// WorkloadNotCreated: declared, never applied.
	WorkloadNotCreated = "not created"
	// WorkloadArchived: the state records it archived (bottlefile
	// archive); no runtime has it until it is resumed.
	WorkloadArchived = "archived"
)

// BottleStatus is one agent's bottle: what it booted from, its newest
// snapshot, the egress rules in force and its workloads.
type BottleStatus struct {
	Addr    string // agent.NAME
	Runtime string
	Driver  string
	// BootImage is the image the agent's workload was created from, and
	// BootSnapshot the snapshot it booted from instead (resume, migration),
	// "" when none.
	BootImage    string
	BootSnapshot string
	// Newest is the newest recorded snapshot of the agent; nil when none.
	Newest *Snapshot
	// Egress are the allow rules the applied gateway holds, nil when the
	// state records none (everything denied); EgressKnown is false when no
	// gateway or egress attribute is recorded at all.
	Egress      []string
	EgressKnown bool
	// Denials counts the gateway's denials in the last hour; nil when they
	// could not be read.
	Denials *int
	// Workloads are the agent, its sidecars and its gateway, in that order.
	Workloads []WorkloadStatus
	// Idle is how long an agent with an idle policy has gone unused,
	// while it runs and its runtime tells; nil otherwise.
	Idle *time.Duration
}

// WorkloadStatus is one workload of a bottle as its runtime reports it.
type WorkloadStatus struct {
	Addr string
	Role string // "agent", "sidecar" or "gateway"
	ID   string
	// State is one of the Workload* constants; RuntimeState the runtime's
	// own word for it.
	State        string
	RuntimeState string
	// ExitCode is the last run's exit code, for an exited workload whose
	// runtime reports it.
	ExitCode *int
	Created  time.Time
	Started  time.Time // when it last started; zero when not known
	Finished time.Time // when it stopped or was archived; zero while running or not known
	// Written is what it wrote to its own filesystem, in bytes; nil when
	// the runtime does not tell.
	Written *int64
	// Node is the machine it runs on, on a runtime of several (a swarm
	// node's name); "" otherwise.
	Node string
	// Drift says what of a gateway's files differ from what was applied
	// (planner.ConfigDrift): changed inside it by hand; "" otherwise.
	Drift string
	// StoppedFor is why a workload stopped on purpose was stopped, when
	// not by bottlefile stop: "idle" (a tick's idle.stop_after).
	StoppedFor string
}

// Status reports every bottle of this configuration and state, or only
// those of the agents in selectors (agent.NAME; a workload's address selects
// its agent). It reads the state, and each runtime once with one list
// call per object kind; it changes nothing.
func (op *Operation) Status(ctx context.Context, selectors []string) ([]BottleStatus, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	want := map[string]bool{}
	for _, a := range selectors {
		agent, ok := agentOf(a)
		if !ok {
			return nil, hcl.Diagnostics{errorDiag("Not an agent address", fmt.Sprintf("%q is not the address of an agent or one of its workloads (agent.NAME, agent.NAME.sidecar.NAME, agent.NAME.gateway)", a))}
		}
		want[agent] = true
	}
	selected := func(agent string) bool { return len(want) == 0 || want[agent] }

	var records []state.Record
	if op.Store != nil {
		var err error
		if records, err = op.Store.Records(); err != nil {
			return nil, hcl.Diagnostics{errorDiag("Cannot read state", err.Error())}
		}
	}
	bottles := map[string]*BottleStatus{}
	bottle := func(agent string) *BottleStatus {
		b := bottles[agent]
		if b == nil {
			b = &BottleStatus{Addr: agent}
			bottles[agent] = b
		}
		return b
	}
	if op.Config != nil {
		for _, name := range op.Config.AgentNames() {
			if agent := addrs.Agent(name).String(); selected(agent) {
				bottle(agent)
			}
		}
	}

	// What the state records: workloads, boot source, rules, snapshots.
	recorded := map[string]state.Record{}
	for _, r := range records {
		if r.Kind == drivers.KindSnapshot {
			s := snapshotOf(r)
			if agent, ok := agentOf(s.Agent); ok && selected(agent) {
				b := bottle(agent)
				if b.Newest == nil || s.Taken.After(b.Newest.Taken) {
					b.Newest = &s
				}
			}
			continue
		}
		agent, ok := agentOf(r.Addr)
		if !ok || !selected(agent) {
			continue
		}
		b := bottle(agent)
		if r.Addr == agent {
			b.Runtime, b.Driver = r.Runtime, r.Driver
			b.BootImage = attrString(r, "image")
			b.BootSnapshot = r.Computed[executor.BootFromKey]
			if rules, ok := attrRules(r, "egress"); ok { // smolvm: the machine holds them
				b.Egress, b.EgressKnown = rules, true
			}
		}
		if a, _ := addrs.Parse(r.Addr); a.Kind() == addrs.GatewayKind {
			if rules, ok := attrRules(r, "allow"); ok {
				b.Egress, b.EgressKnown = rules, true
			}
		}
		if r.Workload {
			recorded[r.Addr] = r
		}
	}

	// What the runtimes report, in one Read each.
	live := map[string]Live{}
	if lineage := op.Lineage(); lineage != "" {
		for _, name := range op.runtimeNames() {
			objs, moreDiags := op.readRuntimeSizes(ctx, name, lineage)
			diags = append(diags, moreDiags...)
			if moreDiags.HasErrors() {
				return nil, diags
			}
			for _, l := range objs {
				agent, ok := agentOf(l.Addr)
				if !ok || !selected(agent) || l.obj.State == "" {
					continue
				}
				live[l.Addr] = l
				b := bottle(agent)
				if l.Addr == agent && b.Runtime == "" {
					b.Runtime, b.Driver = l.Runtime, l.Driver
				}
			}
		}
	}

	for addr, r := range recorded {
		if _, ok := live[addr]; !ok {
			agent, _ := agentOf(addr)
			b := bottle(agent)
			b.Workloads = append(b.Workloads, notLiveStatus(addr, r))
		}
	}
	for addr, l := range live {
		agent, _ := agentOf(addr)
		b := bottle(agent)
		w := workloadStatus(l)
		if r, ok := recorded[addr]; ok && r.ID == l.ID {
			w.Drift = planner.ConfigDrift(&r, &l.obj)
		}
		b.Workloads = append(b.Workloads, w)
	}

	op.recentDenials(ctx, bottles, live, DenialsWindow)
	diags = append(diags, op.idleStatus(ctx, bottles, recorded, live)...)

	out := make([]BottleStatus, 0, len(bottles))
	for _, b := range bottles {
		if len(b.Workloads) == 0 {
			b.Workloads = []WorkloadStatus{{Addr: b.Addr, Role: "agent", State: WorkloadNotCreated}}
		}
		sort.Slice(b.Workloads, func(i, j int) bool { return lessWorkload(b.Workloads[i].Addr, b.Workloads[j].Addr) })
		out = append(out, *b)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Addr < out[j].Addr })
	for a := range want {
		if _, ok := bottles[a]; !ok {
			return nil, hcl.Diagnostics{unknownAddress("No such agent", fmt.Sprintf("%s is neither declared in the configuration nor recorded in the state.", a), a, op.knownAddresses())}
		}
	}
	return out, diags
}

// DenialsWindow is how far back status counts a gateway's denials.
const DenialsWindow = time.Hour

// statusLogReads bounds how many gateway logs status reads at once.
const statusLogReads = 8

// recentDenials sets the Denials of each bottle that has a live gateway:
// how many requests its gateway refused over the last window, from its
// decision log, as egress denials reads it. A runtime's list calls do not
// carry a log, so this is one log read per gateway, at most
// statusLogReads at a time, the log's own since filter leaving out what
// is older; bottles without a gateway cost nothing, and keep nil (as does
// one whose gateway's log cannot be read: status shows "-").
func (op *Operation) recentDenials(ctx context.Context, bottles map[string]*BottleStatus, live map[string]Live, window time.Duration) {
	since := op.now().Add(-window)
	var mu sync.Mutex // guards the bottles' Denials
	var wg sync.WaitGroup
	slots := make(chan struct{}, statusLogReads)
	for addr, l := range live {
		agent, _ := agentOf(addr)
		b := bottles[agent]
		if role(addr) != "gateway" || b == nil {
			continue
		}
		wg.Go(func() {
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				return
			}
			defer func() { <-slots }()
			decs, err := l.decisions(ctx, since)
			if err != nil {
				if op.Log != nil {
					op.Log.Debug("cannot read the gateway's decisions for status", "addr", addr, "error", err)
				}
				return
			}
			n := 0
			for _, d := range decs {
				if !d.Allowed {
					n++
				}
			}
			mu.Lock()
			defer mu.Unlock()
			b.Denials = &n
		})
	}
	wg.Wait()
}

// readRuntimeSizes reads a runtime as readRuntime does, asking for bytes
// written too.
func (op *Operation) readRuntimeSizes(ctx context.Context, name, lineage string) ([]Live, hcl.Diagnostics) {
	return op.readRuntimeWith(ctx, name, drivers.ReadRequest{Lineage: lineage, Sizes: true})
}

// notLiveStatus is a recorded workload no runtime has: archived, since
// when (Finished), or missing.
func notLiveStatus(addr string, r state.Record) WorkloadStatus {
	w := WorkloadStatus{Addr: addr, Role: role(addr), ID: r.ID, State: WorkloadMissing}
	if planner.IsArchived(&r) {
		w.State = WorkloadArchived
		w.Finished, _ = planner.ArchivedAt(r)
	}
	return w
}

func workloadStatus(l Live) WorkloadStatus {
	o := l.obj
	w := WorkloadStatus{
		Addr: l.Addr, Role: role(l.Addr), ID: l.ID, RuntimeState: o.State,
		Created: o.Created, Started: o.Started, Finished: o.Finished, Written: o.Written,
		Node: o.Node,
	}
	switch {
	case o.Running || o.State == drivers.StateRunning:
		w.State = WorkloadRunning
	case o.State == drivers.StateCreated:
		w.State = WorkloadNeverStarted
	default:
		w.State = WorkloadExited
		if o.State == drivers.StateExited {
			code := o.ExitCode
			w.ExitCode = &code
		}
	}
	return w
}

// agentOf gives the agent an address belongs to: agent.NAME for agent.NAME
// and every address below it.
func agentOf(addr string) (string, bool) {
	a, ok := addrs.AgentOf(addr)
	return a.String(), ok
}

// role names a workload by its place in the bottle.
func role(addr string) string {
	switch a, _ := addrs.Parse(addr); a.Kind() {
	case addrs.SidecarKind:
		return "sidecar"
	case addrs.GatewayKind:
		return "gateway"
	}
	return "agent"
}

// lessWorkload orders the agent first, then its sidecars, then the gateway.
func lessWorkload(a, b string) bool {
	rank := func(addr string) int {
		switch role(addr) {
		case "sidecar":
			return 1
		case "gateway":
			return 2
		}
		return 0
	}
	if ra, rb := rank(a), rank(b); ra != rb {
		return ra < rb
	}
	return a < b
}

// attrRules reads a recorded list of rules; ok is false when the record
// has no such attribute.
func attrRules(r state.Record, name string) ([]string, bool) {
	raw, ok := r.Attrs[name]
	if !ok {
		return nil, false
	}
	var rules []string
	if err := json.Unmarshal(raw, &rules); err != nil {
		return nil, false
	}
	return rules, true
}

// idleStatus marks the workloads a tick stopped for idleness, and sets
// how long each running agent with an idle block has gone unused, asking
// each runtime that can tell (drivers.ActivityReader) once; a runtime
// that fails to tell is a warning.
func (op *Operation) idleStatus(ctx context.Context, bottles map[string]*BottleStatus, recorded map[string]state.Record, live map[string]Live) hcl.Diagnostics {
	var diags hcl.Diagnostics
	byRuntime := map[string][]string{}
	for agent, b := range bottles {
		for i, w := range b.Workloads {
			if r, ok := recorded[w.Addr]; ok && r.Computed[planner.StoppedKey] == planner.IdleStopReason && w.State != WorkloadRunning {
				b.Workloads[i].StoppedFor = planner.IdleStopReason
			}
		}
		name, _, _ := strings.Cut(strings.TrimPrefix(agent, "agent."), "[")
		if l, ok := live[agent]; ok && l.Running && op.Config != nil && op.Config.Agents[name] != nil && op.Config.Agents[name].Idle != nil {
			byRuntime[l.Runtime] = append(byRuntime[l.Runtime], agent)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(byRuntime)) {
		rt, ok := op.Runtimes[name]
		if !ok {
			continue
		}
		ar, ok := drivers.As[drivers.ActivityReader](rt.Driver)
		if !ok {
			continue
		}
		got, err := ar.Activity(ctx, drivers.ActivityRequest{Lineage: op.Lineage(), Agents: byRuntime[name]})
		if err != nil {
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagWarning, Summary: fmt.Sprintf("Cannot read the activity of runtime %q", name), Detail: err.Error()})
			continue
		}
		for agent, a := range got {
			if b := bottles[agent]; b != nil && !a.Busy && !a.LastActive.IsZero() {
				since := a.LastActive
				if started := live[agent].obj.Started; started.After(since) {
					since = started // as the planner counts it
				}
				idle := max(0, op.now().Sub(since))
				b.Idle = &idle
			}
		}
	}
	return diags
}
