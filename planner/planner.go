package planner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/bottlefile/bottlefile/addrs"
	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/lang"
	"github.com/bottlefile/bottlefile/state"
)

// StateReader is the part of the state store planning needs.
type StateReader interface {
	Lineage() string
	Serial() uint64
	Records() ([]state.Record, error)
}

// IntentReader is the part of the state store that holds the engine
// creates in flight (state.Intent); a store without it has none.
type IntentReader interface {
	Intents() ([]state.Intent, error)
}

// Planner diffs a configuration against recorded state and live runtimes.
type Planner struct {
	Config   *lang.Config
	Scope    *lang.Scope
	Runtimes Runtimes
	State    StateReader
	Log      hclog.Logger
	Options  Options
	// Registry is every driver there is, to say which runtime an agent's
	// driver setting needs when its own driver lacks it; nil says nothing.
	Registry drivers.Registry
	// Clock is what "now" is to the planner (a snapshot's max_age, the day
	// a time is written with); time.Now when nil. Tests fix it.
	Clock func() time.Time

	// policyDiags collects what planPolicies refuses: migrations that
	// cannot move a snapshot, forks whose snapshot is missing.
	policyDiags hcl.Diagnostics

	// running maps each snapshot to the live workloads that run its image
	// (runningFrom): retention never prunes it.
	running map[string][]*Change

	// keptByRemoval names the agents whose block is gone and whose removal
	// in this plan keeps their policy snapshots (removed.go).
	keptByRemoval map[string]bool

	// unreachable names the runtimes already reported as unreachable in
	// this plan: nothing more is asked of them, and no agent on them is
	// reported again.
	unreachable map[string]bool

	// engines is each runtime's engine identity, as far as this plan
	// learnt it: the declared runtimes' from their drivers, and those no
	// longer declared from their records (recorded, or found by id on an
	// engine). Two runtimes of one identity are one engine.
	engines map[string]string
}

// reachDiag reports a runtime that cannot be reached, once per plan: it
// returns the diagnostic the first time, and nil after.
func (p *Planner) reachDiag(name string, err error) *hcl.Diagnostic {
	if p.unreachable[name] {
		return nil
	}
	if p.unreachable == nil {
		p.unreachable = map[string]bool{}
	}
	p.unreachable[name] = true
	return errorDiag(fmt.Sprintf("Cannot reach runtime %q", name), err.Error(), runtimeRange(p.Config, name))
}

// runtimeRange is where a runtime block is declared, or nil for the
// implicit runtime, which is declared nowhere.
func runtimeRange(cfg *lang.Config, name string) *hcl.Range {
	if cfg == nil {
		return nil
	}
	rt, ok := cfg.Runtimes[name]
	if !ok || rt.Implicit || rt.DeclRange.Filename == "" {
		return nil
	}
	return rt.DeclRange.Ptr()
}

// desired is one object the configuration asks for.
type desired struct {
	runtime   string
	driver    string
	object    drivers.Object
	agent     *lang.Agent
	lifecycle lang.Lifecycle
}

// Plan refreshes every runtime (one Read each), expands each agent through
// its driver, and diffs. It has no side effects on any runtime.
func (p *Planner) Plan(ctx context.Context) (*Plan, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	log := p.Log
	if log == nil {
		log = hclog.NewNullLogger()
	}
	opts := p.Options
	records, err := p.State.Records()
	if err != nil {
		return nil, append(diags, errorDiag("Cannot read state", err.Error(), nil))
	}
	plan := &Plan{Lineage: p.State.Lineage(), Serial: p.State.Serial(), Options: opts}
	if ir, ok := p.State.(IntentReader); ok && !opts.NoRefresh {
		if plan.Intents, err = ir.Intents(); err != nil {
			return nil, append(diags, errorDiag("Cannot read state", err.Error(), nil))
		}
	}

	// Moved blocks first: refresh finds the moved records' objects by id.
	records, moves, moreDiags := p.moveRecords(records)
	diags = append(diags, moreDiags...)
	var live liveSet
	if opts.NoRefresh {
		live = p.assumeLive(records)
	} else {
		var moreDiags hcl.Diagnostics
		live, moreDiags = p.refresh(ctx, plan.Lineage, records, opts.Destroy)
		diags = append(diags, moreDiags...)
	}
	records = p.moveRuntimes(records, moves, live)
	nameAddrs, rtNameAddrs := p.nameAddrs(records), runtimeNameAddrs(records)
	want, agents, moreDiags := p.expand(ctx, records, opts.Destroy)
	diags = append(diags, moreDiags...)
	if diags.HasErrors() {
		return nil, diags
	}

	recorded := make(map[string]*state.Record, len(records))
	for i := range records {
		recorded[records[i].Addr] = &records[i]
	}
	changes := make(map[string]*Change, len(want)+len(records))
	type diff struct {
		d   *desired
		rec *state.Record
		lo  *drivers.LiveObject
		c   *Change
	}
	diffs := make([]diff, 0, len(want))
	for addr, d := range want {
		rec := recorded[addr]
		runtime := d.runtime
		if rec != nil && rec.Runtime != d.runtime {
			runtime = rec.Runtime // it is live where it was recorded, until it moves
		}
		diffs = append(diffs, diff{d: d, rec: rec, lo: live.take(runtime, addr)})
	}
	// Hashing and redacting every attribute is most of a large plan's diff:
	// it is spread over the processors.
	inParallel(len(diffs), func(i int) { diffs[i].c = diffObject(diffs[i].d, diffs[i].rec, diffs[i].lo) })
	for _, df := range diffs {
		changes[df.c.Addr] = df.c
	}
	markMoves(changes, moves)
	diags = append(diags, p.unknownAfterReplace(ctx, want, agents, changes)...)
	waitForHealthySidecars(agents, changes)
	for _, c := range changes {
		if slices.Contains(opts.Replace, c.Addr) && (c.Prior != nil || c.Live != nil) && c.Action != Replace {
			c.Action = Replace
			c.Reasons = append(c.Reasons, because(ReasonReplaceRequested))
		}
	}
	propagateReplacement(changes)
	forgetLostSnapshots(changes)

	// What is recorded or live but no longer wanted goes.
	for _, r := range records {
		if _, ok := want[r.Addr]; ok {
			continue
		}
		if _, ok := p.Runtimes[r.Runtime]; !ok {
			diags = append(diags, errorDiag("Runtime no longer declared",
				fmt.Sprintf("%s was created on runtime %q, which the configuration no longer declares. Declare the runtime again so bottlefile can remove it, or forget it with `bottlefile state rm %s`.", r.Addr, r.Runtime, r.Addr), nil))
			continue
		}
		c := &Change{Addr: r.Addr, Kind: r.Kind, Runtime: r.Runtime, Driver: r.Driver, Action: Delete, Prior: recorded[r.Addr], Before: r.Attrs, PreventDestroy: r.PreventDestroy}
		c.Live = live.take(r.Runtime, r.Addr)
		if c.Live == nil {
			c.Action = Forget
			if IsArchived(&r) {
				c.Reasons = append(c.Reasons, because(ReasonArchivedForget))
			} else {
				c.Reasons = append(c.Reasons, because(ReasonGone))
			}
		}
		if m := moves[r.Addr]; m != nil {
			c.MovedFrom, c.FromRuntime = m.from, m.fromRuntime
			c.Reasons = append([]Reason{describeMove(c.Addr, m, c.Runtime)}, c.Reasons...)
		}
		changes[r.Addr] = c
	}
	// nameChanges tells each change (all, or only those planned from
	// nothing) which names its bottle's engine objects carry.
	nameChanges := func(onlyNew bool) {
		for _, c := range changes {
			if onlyNew && (c.Prior != nil || c.Live != nil) {
				continue
			}
			if a, ok := addrs.AgentOf(c.Addr); ok && !c.Stray {
				c.NameAddr = nameAddrs[a.String()]
			}
			c.RuntimeNameAddr = rtNameAddrs[c.Runtime]
		}
	}
	nameChanges(false)
	for _, lo := range live.rest() {
		c := &Change{Addr: lo.obj.Addr, Kind: lo.obj.Kind, Runtime: lo.runtime, Driver: lo.driver, Action: Delete, Live: lo.obj,
			Reasons: []Reason{because(ReasonLeftover, "kind", lo.obj.Kind, "name", lo.obj.Name)}}
		if lo.obj.Leftover != "" {
			c.Twin = true
			c.Reasons[0] = because(ReasonLeftoverUnnamed, "kind", lo.obj.Kind, "name", lo.obj.Name, "leftover", lo.obj.Leftover)
		} else if lo.twin {
			c.Twin = true
			c.Reasons[0] = because(ReasonTwin, "kind", lo.obj.Kind, "name", lo.obj.Name, "id", shortID(lo.obj.ID))
		} else if _, ok := changes[lo.obj.Addr]; ok {
			// The address lives elsewhere: this is a copy on another
			// runtime, left by an interrupted migration.
			c.Stray = true
			c.Reasons[0] = because(ReasonStray, "kind", lo.obj.Kind, "name", lo.obj.Name, "runtime", lo.runtime)
		} else if lo.obj.Kind == drivers.KindSnapshot {
			// Removed, not adopted: a snapshot is recorded before anything
			// it protects is removed, so what an unrecorded one holds is
			// still in its agent's workload (or a recorded snapshot).
			c.Reasons[0] = because(ReasonLeftoverSnapshot, "name", lo.obj.Name)
		}
		changes[c.key()] = c
	}

	resolveIntents(changes, plan.Intents)

	p.running = runningFrom(changes)
	plan.RunningFrom = runningAddrs(p.running)
	switch {
	case len(opts.Take) > 0:
		diags = append(diags, p.planTake(ctx, changes, agents, plan.Lineage)...)
	case len(opts.Archive) > 0:
		diags = append(diags, p.planArchive(changes, agents)...) // archive.go
	case len(opts.Stop) > 0 || len(opts.Start) > 0:
		diags = append(diags, p.planStopStart(changes, agents)...)
	case opts.Tick:
		diags = append(diags, p.planTick(ctx, changes, agents, plan.Lineage, plan)...)
	case opts.RefreshOnly:
		refreshOnly(changes)
	default:
		diags = append(diags, p.planArchived(changes, agents, nil)...) // archive.go
		p.planPolicies(ctx, changes, agents, plan.Lineage)
		diags = append(diags, p.policyDiags...)
		if !opts.Destroy && !opts.NoRefresh {
			activity, moreDiags := p.readActivity(ctx, changes, agents, plan.Lineage)
			diags = append(diags, moreDiags...)
			plan.Due = p.dueTimes(changes, agents, activity)
		}
	}
	// The snapshots and prunes planned just now belong to bottles too: a
	// moved agent's snapshot commits the container its old name names.
	nameChanges(true)
	if len(opts.Targets) > 0 {
		if d := checkAddrs("-target", opts.Targets, changes); d != nil {
			diags = append(diags, d)
		}
		applyTargets(changes, opts.Targets)
	}
	if d := checkExact("-replace", opts.Replace, changes); d != nil {
		diags = append(diags, d)
	}
	diags = append(diags, checkPreventDestroy(changes, want)...)
	if diags.HasErrors() {
		return nil, diags
	}

	for _, c := range changes {
		plan.Changes = append(plan.Changes, c)
	}
	sortChanges(plan.Changes)
	if opts.Destroy {
		plan.Kept = keptSnapshots(plan.Changes, nil)
	} else if len(p.keptByRemoval) > 0 {
		plan.Kept = keptSnapshots(plan.Changes, p.keptByRemoval)
	}
	log.Debug("plan made", "changes", len(plan.Changes), "lineage", plan.Lineage, "serial", plan.Serial)
	return plan, diags
}

// refreshOnly keeps only what brings the state in line with the runtimes.
func refreshOnly(changes map[string]*Change) {
	for addr, c := range changes {
		switch c.Action {
		case Adopt, Forget:
		case Create:
			if IsArchived(c.Prior) { // archived (archive.go): gone on purpose
				c.Action, c.Reasons, c.Changed = NoOp, nil, nil
				continue
			}
			if c.Prior != nil { // recorded, but gone
				c.Action = Forget
				c.Reasons = []Reason{because(ReasonGone)}
				c.After = nil
				continue
			}
			delete(changes, addr)
		case Start:
			if c.Prior == nil || c.Prior.ID != c.Live.ID { // made, never started, not recorded
				c.Action = Adopt
				c.Reasons = []Reason{because(ReasonRefreshOnlyAdopt)}
				continue
			}
			c.Action, c.Reasons = NoOp, nil
		default:
			if c.Prior == nil {
				delete(changes, addr) // unrecorded and unmatched: a normal plan removes it
				continue
			}
			c.Action, c.Reasons, c.Changed, c.Forcing = NoOp, nil, nil, nil
		}
	}
}

// checkPreventDestroy refuses a plan that would destroy a protected object.
// The record keeps the protection after the block is removed.
func checkPreventDestroy(changes map[string]*Change, want map[string]*desired) hcl.Diagnostics {
	var diags hcl.Diagnostics
	for _, addr := range sortedKeys(changes) {
		c := changes[addr]
		if c.Action != Delete && c.Action != Replace {
			continue
		}
		protected := c.Prior != nil && c.Prior.PreventDestroy
		var subject *hcl.Range
		if d, ok := want[addr]; ok {
			protected = d.lifecycle.PreventDestroy
			if protected {
				subject = d.lifecycle.DeclRange.Ptr()
			}
		}
		if !protected {
			continue
		}
		why := "it is no longer in the configuration, and its record still carries lifecycle.prevent_destroy"
		if c.Action == Replace {
			why = "it must be replaced"
			if len(c.Forcing) > 0 {
				why += " (" + strings.Join(c.Forcing, ", ") + " changed)"
			}
			for _, r := range c.Reasons {
				why += "; " + r.Text()
			}
		} else if subject != nil {
			why = "the plan destroys it"
		}
		diags = append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Object has lifecycle.prevent_destroy set",
			Detail:   fmt.Sprintf("%s is protected by lifecycle.prevent_destroy, but %s. Set prevent_destroy = false and apply first, or change the plan so it keeps %s.", addr, why, addr),
			Subject:  subject,
		})
	}
	return diags
}

func (p *Planner) assumeLive(records []state.Record) liveSet {
	ls := liveSet{}
	for _, r := range records {
		if IsArchived(&r) {
			continue // removed when it was archived
		}
		if ls[r.Runtime] == nil {
			ls[r.Runtime] = map[string]liveEntry{}
		}
		ls[r.Runtime][r.Addr] = liveEntry{runtime: r.Runtime, driver: r.Driver, obj: &drivers.LiveObject{
			Addr: r.Addr, Kind: r.Kind, ID: r.ID, Hash: r.Hash, Running: true,
		}}
	}
	return ls
}

// liveSet holds what refresh found, by runtime and address; take removes an
// entry so what is left at the end is live but unwanted.
type liveSet map[string]map[string]liveEntry

type liveEntry struct {
	runtime, driver string
	obj             *drivers.LiveObject
	// twin marks a second object of the address on the runtime; it is
	// keyed by address and id, so take never returns it.
	twin bool
}

func (ls liveSet) take(runtime, addr string) *drivers.LiveObject {
	e, ok := ls[runtime][addr]
	if !ok {
		return nil
	}
	delete(ls[runtime], addr)
	return e.obj
}

func (ls liveSet) rest() []liveEntry {
	var out []liveEntry
	for _, m := range ls {
		for _, e := range m {
			out = append(out, e)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].obj.Addr < out[j].obj.Addr })
	return out
}

// refresh asks every engine once for everything of this lineage, and
// attributes what it reports to the runtimes that reach it: by the
// recorded id first (an object moved to another address or runtime keeps
// the labels it was made with), then by its runtime label, then, for an
// object made before objects were labelled with their runtime, by the
// record of its address. When a runtime holds two objects of one
// address, the recorded one, else the first, is the address's; the
// others are twins, which the plan removes.
// A destroy's refresh does not ask what objects hold in force (drift of
// files inside gateways): nothing is updated.
func (p *Planner) refresh(ctx context.Context, lineage string, records []state.Record, destroy bool) (liveSet, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	ls := liveSet{}
	p.engines = map[string]string{}
	for _, r := range records {
		if r.Engine != "" {
			p.engines[r.Runtime] = r.Engine
		}
	}
	if lineage == "" {
		return ls, nil // nothing was ever applied: nothing can be ours
	}
	groups, order, reads := p.readEngines(ctx, drivers.ReadRequest{Lineage: lineage, NoConfig: destroy}, records)
	byID := make(map[string]*state.Record, len(records))
	for i := range records {
		if records[i].ID != "" {
			byID[records[i].ID] = &records[i]
		}
	}
	for _, key := range order {
		names := groups[key]
		rt := p.Runtimes[names[0]]
		resp, err := reads[key].resp, reads[key].err
		var ue *drivers.UnreachableError
		if errors.As(err, &ue) {
			for _, name := range names {
				if d := p.reachDiag(name, err); d != nil {
					diags = append(diags, d)
				}
			}
			continue
		}
		if err != nil {
			diags = append(diags, errorDiag(fmt.Sprintf("Cannot refresh runtime %q", names[0]), err.Error(), nil))
			continue
		}
		in := func(runtime string) bool { return slices.Contains(names, runtime) }
		byRuntime := map[string][]*drivers.LiveObject{}
		for i := range resp.Objects {
			o := &resp.Objects[i]
			owner := ""
			if r, ok := byID[o.ID]; ok && o.ID != "" {
				if _, declared := p.Runtimes[r.Runtime]; in(r.Runtime) || !declared {
					owner = r.Runtime
					o.Addr = r.Addr // recorded here, whatever its labels say
					if !declared && key != "" {
						p.engines[r.Runtime] = key
					}
				}
			}
			if owner == "" && o.Runtime != "" && in(o.Runtime) {
				owner = o.Runtime
			}
			if owner == "" && o.Runtime == "" {
				for _, r := range records {
					if r.Addr == o.Addr && in(r.Runtime) {
						owner = r.Runtime
						break
					}
				}
			}
			if owner == "" {
				owner = names[0]
			}
			byRuntime[owner] = append(byRuntime[owner], o)
		}
		for _, name := range names {
			if byRuntime[name] == nil {
				byRuntime[name] = []*drivers.LiveObject{}
			}
		}
		for name, objs := range byRuntime {
			driver := rt.Driver
			if r, ok := p.Runtimes[name]; ok {
				driver = r.Driver
			}
			ls[name] = p.attribute(ctx, lineage, name, driver, objs, records)
		}
	}
	return ls, diags
}

// readResult is one engine's answer to Read.
type readResult struct {
	resp drivers.ReadResponse
	err  error
}

// readEngines reads every engine once, by the first runtime of each of
// engineGroups' groups, all at once. With one runtime declared there is
// nothing to group: its Read goes beside its identity, and when every
// record is of that runtime, so that no move between runtimes can hinge
// on it, the plan does not wait for the identity at all (the executor
// does, to record it). A no-op plan waited for the engine's info, the
// slowest call it makes, before its lists (issue 28).
func (p *Planner) readEngines(ctx context.Context, req drivers.ReadRequest, records []state.Record) (map[string][]string, []string, map[string]readResult) {
	read := func(name string) <-chan readResult {
		ch := make(chan readResult, 1)
		go func() {
			resp, err := p.Runtimes[name].Driver.Read(ctx, req)
			ch <- readResult{resp, err}
		}()
		return ch
	}
	var early <-chan readResult
	names := sortedKeys(p.Runtimes)
	if len(names) == 1 {
		early = read(names[0])
		if !slices.ContainsFunc(records, func(r state.Record) bool { return r.Runtime != names[0] }) {
			rt := p.Runtimes[names[0]]
			rt.identifyLater(ctx, p.Log)
			key := "runtime:" + names[0]
			return map[string][]string{key: {names[0]}}, []string{key}, map[string]readResult{key: <-early}
		}
	}
	groups, order := p.engineGroups(ctx)
	pending := make(map[string]<-chan readResult, len(order))
	for _, key := range order {
		if first := groups[key][0]; early != nil && first == names[0] {
			pending[key] = early
		} else {
			pending[key] = read(first)
		}
	}
	reads := make(map[string]readResult, len(order))
	for key, ch := range pending {
		reads[key] = <-ch
	}
	return groups, order, reads
}

// engineGroups groups the declared runtimes by engine identity, asked of
// all of them at once, in the order their first runtime's name sorts; a
// runtime whose driver cannot tell its identity (or fails to) is a group
// of its own, keyed "".
func (p *Planner) engineGroups(ctx context.Context) (map[string][]string, []string) {
	names := sortedKeys(p.Runtimes)
	keys := make([]string, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		p.Runtimes[name].EngineIdentity() // an earlier refresh's, before Engine is written again
		id, ok := drivers.As[drivers.EngineIdentifier](p.Runtimes[name].Driver)
		if !ok {
			continue
		}
		wg.Go(func() {
			if e, err := id.EngineID(ctx); err == nil {
				keys[i] = e
			} else if p.Log != nil {
				p.Log.Debug("cannot tell the runtime's engine", "runtime", name, "error", err)
			}
		})
	}
	wg.Wait()
	groups := map[string][]string{}
	var order []string
	for i, name := range names {
		rt := p.Runtimes[name]
		key := keys[i]
		rt.Engine = key
		if key != "" {
			p.engines[name] = key
		}
		group := key
		if key == "" {
			group = "runtime:" + name
		}
		if _, ok := groups[group]; !ok {
			order = append(order, group)
		}
		groups[group] = append(groups[group], name)
	}
	return groups, order
}

// attribute makes the live entries of one runtime from the objects
// refresh gave it, telling apart twins (two objects of one address).
func (p *Planner) attribute(ctx context.Context, lineage, name string, driver drivers.Driver, objs []*drivers.LiveObject, records []state.Record) map[string]liveEntry {
	recorded := map[string]string{}
	for _, r := range records {
		if r.Runtime == name {
			recorded[r.Addr] = r.ID
		}
	}
	m := make(map[string]liveEntry, len(objs))
	describer, _ := drivers.As[drivers.ExitDescriber](driver)
	for _, o := range objs {
		if describer != nil && !o.Running && o.Exit != nil {
			// How it ended (an out-of-memory kill looks like a stop in
			// the list), for the reason the plan gives: rare, one
			// look per exited workload.
			if e, err := describer.DescribeExit(ctx, lineage, *o); err == nil && e != nil {
				o.Exit = e
			} else if err != nil && p.Log != nil {
				p.Log.Debug("cannot describe how a workload exited", "addr", o.Addr, "error", err)
			}
		}
		e := liveEntry{runtime: name, driver: driver.Name(), obj: o}
		prev, dup := m[o.Addr]
		switch {
		case o.Leftover != "":
			// No record can be it: it is removed by its id.
			e.twin = true
			m[o.Addr+"#"+o.ID] = e
		case !dup:
			m[o.Addr] = e
		case o.ID == recorded[o.Addr] && prev.obj.ID != o.ID:
			prev.twin = true
			m[o.Addr+"#"+prev.obj.ID] = prev
			m[o.Addr] = e
		default:
			e.twin = true
			m[o.Addr+"#"+o.ID] = e
		}
	}
	return m
}

// expand evaluates every agent and asks its runtime's driver for the
// objects it needs.
func (p *Planner) expand(ctx context.Context, records []state.Record, destroy bool) (map[string]*desired, map[string]*agentPlan, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	SetKnown(p.Scope, records)
	want := map[string]*desired{}
	agents := map[string]*agentPlan{}
	for _, name := range p.Config.AgentNames() {
		a := p.Config.Agents[name]
		rt, ok := p.Runtimes[a.RuntimeName]
		if !ok {
			diags = append(diags, errorDiag("Runtime not available", fmt.Sprintf("%s runs on runtime %q, which could not be configured.", a.Addr(), a.RuntimeName), a.DeclRange.Ptr()))
			continue
		}
		ap, moreDiags := p.evalAgent(a, rt)
		diags = append(diags, moreDiags...)
		if moreDiags.HasErrors() {
			continue
		}
		agents[a.Addr()] = ap
		if destroy || p.unreachable[rt.Name] {
			continue // evaluated only for its snapshot policy, or its runtime was reported
		}
		if moreDiags := p.checkCapabilities(ap); moreDiags.HasErrors() {
			diags = append(diags, moreDiags...)
			continue
		}
		resp, err := rt.Driver.Plan(ctx, drivers.PlanRequest{Agent: ap.spec})
		var ue *drivers.UnreachableError
		if errors.As(err, &ue) {
			if d := p.reachDiag(rt.Name, err); d != nil {
				diags = append(diags, d)
			}
			continue
		}
		if err != nil {
			diags = append(diags, planError(a, err))
			continue
		}
		p.addSnapshotDependencies(a, resp.Objects)
		for _, o := range resp.Objects {
			d := &desired{runtime: rt.Name, driver: rt.Driver.Name(), object: o, agent: a, lifecycle: a.Lifecycle}
			if !covers([]string{a.Addr()}, o.Addr) {
				// Shared by the runtime's agents (an egress network): no
				// one agent's lifecycle governs it.
				d.lifecycle = lang.Lifecycle{}
				if prev, ok := want[o.Addr]; ok {
					d.agent = prev.agent
				}
			}
			want[o.Addr] = d
		}
	}
	diags = append(diags, p.expandSnapshots(want, agents, records, destroy)...)
	return want, agents, diags
}

// agentName is the name of the agent block the object belongs to; "" for
// a kept snapshot of an agent whose block is gone.
func (d *desired) agentName() string {
	if d.agent == nil {
		return ""
	}
	return d.agent.Name
}

// ignored names the attributes whose changes lifecycle.ignore_changes
// hides, for the agent's own workload object.
func (d *desired) ignored() []string {
	if d.agent == nil || d.object.Addr != d.agent.Addr() {
		return nil
	}
	if d.lifecycle.IgnoreAllChanges {
		return keys(d.object.Attrs)
	}
	return d.lifecycle.IgnoreChanges
}

// diffObject decides the action for one wanted object from its record and
// what is live. Drift is judged on the config hash and a few live facts.
func diffObject(d *desired, rec *state.Record, lo *drivers.LiveObject) *Change {
	var keep map[string]string
	if rec != nil {
		for _, name := range d.ignored() {
			if h, ok := rec.AttrHashes[name]; ok {
				if keep == nil {
					keep = map[string]string{}
				}
				keep[name] = h
			}
		}
	}
	fp := fingerprint(d.object.Kind, d.object.Attrs, keep)
	c := &Change{
		Addr: d.object.Addr, Agent: d.agentName(), Kind: d.object.Kind, Runtime: d.runtime, Driver: d.driver,
		Object: d.object, Fingerprint: fp, Prior: rec, Live: lo,
		After:          make(map[string]json.RawMessage, len(d.object.Attrs)),
		PreventDestroy: d.lifecycle.PreventDestroy,
	}
	for name, v := range d.object.Attrs {
		if _, ok := keep[name]; ok {
			c.After[name] = rec.Attrs[name] // held at its recorded value
			continue
		}
		c.After[name] = RedactedJSON(v)
	}
	if rec != nil {
		c.Before = rec.Attrs
	}
	switch {
	case rec == nil && lo == nil:
		c.Action = Create
	case rec == nil && lo.Unfinished:
		c.Action = Replace
		c.Reasons = append(c.Reasons, because(ReasonLeftoverUnready, "kind", lo.Kind, "name", lo.Name))
	case rec == nil:
		if matches(fp, lo) {
			adopt(c, d, lo, because(ReasonAdoptLeftover, "kind", lo.Kind, "name", lo.Name))
		} else {
			c.Action = Replace
			c.Reasons = append(c.Reasons, because(ReasonLeftoverMismatch, "kind", lo.Kind, "name", lo.Name))
		}
	case rec.Runtime != d.runtime && d.object.Workload && lo != nil:
		c.Action = Migrate
		c.Reasons = append(c.Reasons, because(ReasonMigrate, "from", rec.Runtime, "to", d.runtime))
	case rec.Runtime != d.runtime:
		c.Action = Replace
		c.Forcing = []string{"runtime"}
		c.Reasons = append(c.Reasons, because(ReasonRuntimeChanged, "from", rec.Runtime, "to", d.runtime))
	case lo == nil && IsArchived(rec):
		// Archived (archive.go): it stays away, unless its configuration
		// changed, which resumes its agent (planArchived).
		c.Changed = changedAttrs(rec.AttrHashes, fp.Attrs, d.object.Attrs)
		if len(c.Changed) > 0 || fp.Hash != rec.Hash {
			agent, _ := addrs.AgentOf(c.Addr)
			c.Action = Create
			c.Reasons = append(c.Reasons, because(ReasonArchivedChanged, "agent", agent.String()))
		}
	case lo == nil:
		c.Action = Create
		c.Reasons = append(c.Reasons, because(ReasonGoneRecreate, "id", shortID(rec.ID)))
	default:
		c.Changed = changedAttrs(rec.AttrHashes, fp.Attrs, d.object.Attrs)
		switch {
		case lo.ID != rec.ID && lo.Unfinished:
			c.Action = Replace
			c.Reasons = append(c.Reasons, because(ReasonLiveUnready, "kind", lo.Kind, "id", shortID(lo.ID), "recorded", shortID(rec.ID)))
		case lo.ID != rec.ID && matches(fp, lo):
			// An apply made it and was cut off before recording it (after
			// deleting the recorded one, maybe in an earlier cut-off run).
			c.Changed = nil
			adopt(c, d, lo, because(ReasonAdoptReplaced, "kind", lo.Kind, "id", shortID(lo.ID), "recorded", shortID(rec.ID)))
		case lo.ID != rec.ID:
			// Judged by id, not by the hash label: labels cannot change, so
			// an object updated in place keeps the hash it was created with.
			c.Action = Replace
			c.Reasons = append(c.Reasons, because(ReasonRecreatedOutside, "kind", lo.Kind, "id", shortID(lo.ID), "recorded", shortID(rec.ID)))
		case lo.Drift != "":
			// Changed outside bottlefile, as the runtime tells: made again
			// from the configuration.
			c.Action = Replace
			c.Reasons = append(c.Reasons, because(ReasonDriftReplace, "drift", lo.Drift))
		case len(c.Changed) == 0 && configDrift(rec, lo) != "" && lo.Running:
			// Its files in force were changed inside it: written again.
			c.Action = Update
			c.Reasons = append(c.Reasons, because(ReasonConfigDriftUpdate, "drift", configDrift(rec, lo)))
		case len(c.Changed) > 0:
			if why := configDrift(rec, lo); why != "" {
				c.Reasons = append(c.Reasons, because(ReasonConfigDrift, "drift", why))
			}
			for _, name := range c.Changed {
				if !slices.Contains(d.object.InPlace, name) {
					c.Forcing = append(c.Forcing, name)
				}
			}
			if len(c.Forcing) > 0 {
				c.Action = Replace
			} else {
				c.Action = Update
				if d.object.Workload && !lo.Running && rec.Computed[StoppedKey] == "" {
					// Not left for a second apply to start: the executor
					// starts it after the update (Change.StartsAfterUpdate).
					// One stopped with bottlefile stop stays stopped.
					c.Reasons = append(c.Reasons, stoppedAs(lo.Exit, ReasonStoppedUpdate, ReasonExitedUpdate))
				}
			}
		case fp.Hash != rec.Hash:
			// Same attributes, other hash: the driver changed what it hashes.
			c.Action = Replace
			c.Reasons = append(c.Reasons, because(ReasonHashDiffers))
		case d.object.Workload && restartedByRuntime(rec, lo):
			// Before the stopped case: a task the cluster started in place
			// of the recorded one may still be starting, and what the old
			// one wrote is lost either way.
			// Recorded, unless planPolicies resumes it (restarted.go).
			c.Action, c.StateOnly, c.Restarted = Update, true, true
			c.Reasons = append(c.Reasons, because(ReasonRestartedRecorded, restartedParams(c.Addr, rec, lo)...))
		case d.object.Workload && !lo.Running && rec.Computed[StoppedKey] != "":
			// Stopped with bottlefile stop: it stays stopped until
			// bottlefile start (stop.go).
		case d.object.Workload && !lo.Running:
			c.Action = Start
			c.Reasons = append(c.Reasons, stoppedReason(lo.Exit))
		case rec.PreventDestroy != d.lifecycle.PreventDestroy:
			c.Action = Update
			c.StateOnly = true
			c.Reasons = append(c.Reasons, because(ReasonPreventDestroy, "value", strconv.FormatBool(d.lifecycle.PreventDestroy)))
		}
	}
	return c
}

// ConfigDrift says which parts of the configuration a live object holds
// (LiveObject.Config) differ from those its record says were applied
// ("its rules differ from what was applied ..."); "" when none do, or
// either side cannot tell. Plan updates such an object; status shows it.
func ConfigDrift(rec *state.Record, lo *drivers.LiveObject) string { return configDrift(rec, lo) }

func configDrift(rec *state.Record, lo *drivers.LiveObject) string {
	if lo.Config == "" || rec == nil {
		return ""
	}
	live := drivers.LiveConfigParts(lo.Config)
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(live)) {
		if want, ok := rec.Computed[drivers.ComputedConfigPrefix+k]; ok && want != live[k] {
			parts = append(parts, k)
		}
	}
	switch len(parts) {
	case 0:
		return ""
	case 1:
		return fmt.Sprintf("its %s differ from what was applied (changed outside bottlefile)", parts[0])
	}
	return fmt.Sprintf("its %s and %s differ from what was applied (changed outside bottlefile)", strings.Join(parts[:len(parts)-1], ", "), parts[len(parts)-1])
}

// stoppedReason says why a recorded workload that is not running will be
// started: it exited on its own (with its code, when, and what it printed
// last), or someone stopped it.
func stoppedReason(e *drivers.Exit) Reason {
	return stoppedAs(e, ReasonStopped, ReasonExited)
}

// stoppedAs is the reason of kind stopped (someone stopped it: its code,
// when) or exited (it exited on its own: how, what it printed last), as e
// says.
func stoppedAs(e *drivers.Exit, stopped, exited ReasonCode) Reason {
	if e == nil || e.Stopped {
		if e != nil && !e.At.IsZero() {
			return because(stopped, "code", strconv.Itoa(e.Code), "at", e.At.UTC().Format("2006-01-02 15:04 UTC"))
		}
		return because(stopped)
	}
	return because(exited, "exit", e.Describe(), "last", e.LastLines())
}

// inParallel calls f for 0 .. n-1, spread over as many goroutines as there
// are processors when n is large enough to be worth it.
func inParallel(n int, f func(i int)) {
	workers := min(runtime.GOMAXPROCS(0), n/500+1)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n; i += workers {
				f(i)
			}
		})
	}
	wg.Wait()
}

// matches reports whether a live object was made from the desired
// configuration: its hash label is the desired hash.
func matches(fp Fingerprint, lo *drivers.LiveObject) bool {
	return fp.Hash != "" && lo.Hash == fp.Hash
}

// adopt plans recording a live object that matches the configuration; a
// workload that is not running (made, then cut off before its start; or
// started, and stopped before it was recorded, as an engine that is killed
// and restarts stops it) is started first, not replaced.
func adopt(c *Change, d *desired, lo *drivers.LiveObject, why Reason) {
	if d.object.Workload && !lo.Running {
		c.Action = Start
		why.set("start", "true")
		if lo.Exit != nil {
			why.set("exit", lo.Exit.Describe())
		} else {
			why.set("never_started", "true")
		}
		c.Reasons = append(c.Reasons, why)
		return
	}
	c.Action = Adopt
	c.Reasons = append(c.Reasons, why)
}

// changedAttrs names the attributes whose hash differs from the recorded
// one, plus any whose desired value is not known yet.
func changedAttrs(recorded, desired map[string]string, attrs map[string]cty.Value) []string {
	var out []string
	for name := range attrs {
		h, known := desired[name]
		if !known || recorded[name] != h {
			out = append(out, name)
		}
	}
	for name := range recorded {
		if _, ok := attrs[name]; !ok {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// propagateReplacement replaces every existing object that depends on one
// being replaced or re-created: a container cannot outlive its network.
func propagateReplacement(changes map[string]*Change) {
	for changed := true; changed; {
		changed = false
		for _, c := range changes {
			if c.Action == Replace || c.Action == Create || c.Action == Migrate || c.Kind == drivers.KindSnapshot {
				continue // a snapshot outlives the workload it was taken of
			}
			if c.Prior == nil && c.Live == nil {
				continue
			}
			for _, dep := range c.Object.DependsOn {
				d, ok := changes[dep]
				if !ok || (d.Kind == drivers.KindSnapshot && d.Action != Replace) {
					// A snapshot taken again after it was lost outside
					// bottlefile leaves what runs its image alone; one
					// replaced (its triggers changed) replaces it.
					continue
				}
				var why Reason
				switch {
				case d.Action == Replace || d.Action == Create:
					why = because(ReasonDependsReplaced, "dependency", dep, "action", pastTense(d.Action))
				case recreated(d) && c.Prior != nil && c.Live != nil && c.Live.ID == c.Prior.ID:
					// Made on the dependency it was recorded with, which is gone.
					why = because(ReasonDependsRecreated, "dependency", dep)
				default:
					continue
				}
				c.Action = Replace
				c.StateOnly = false
				c.Reasons = append(c.Reasons, why)
				changed = true
				break
			}
		}
	}
}

// recreated reports a change that records a live object made in place of
// the recorded one.
func recreated(c *Change) bool {
	return (c.Action == Adopt || c.Action == Start) && c.Prior != nil && c.Live != nil && c.Prior.ID != c.Live.ID
}

func pastTense(a Action) string {
	if a == Create {
		return "created again"
	}
	return "replaced"
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	if id == "" {
		return "(none)"
	}
	return id
}

// SetKnown gives the scope what the state knows of each agent's workload
// (its id and name) and of each snapshot block (its id and image), so
// expressions like agent.x.id and snapshot.y.image evaluate.
func SetKnown(scope *lang.Scope, records []state.Record) {
	for _, r := range records {
		addr, _ := addrs.Parse(r.Addr) // an address of no known form is neither
		switch {
		case r.Workload && addr.IsAgent():
			attrs := map[string]cty.Value{"id": cty.StringVal(r.ID)}
			if name, ok := r.Computed["name"]; ok {
				attrs["name"] = cty.StringVal(name)
			}
			scope.SetAgent(addr.Name(), cty.ObjectVal(attrs))
		case r.Kind == drivers.KindSnapshot && addr.IsSnapshotBlock():
			attrs := map[string]cty.Value{"id": cty.StringVal(r.ID)}
			if snap, ok := drivers.RecordedSnapshot(r.Computed); ok {
				attrs["image"] = cty.StringVal(snap.Image)
			}
			scope.SetSnapshot(addr.Name(), cty.ObjectVal(attrs))
		}
	}
}

// planError turns a driver's Plan error into a diagnostic, pointing at the
// egress rule it names when it names one.
func planError(a *lang.Agent, err error) *hcl.Diagnostic {
	subject := a.DeclRange.Ptr()
	var re *drivers.RuleError
	if !errors.As(err, &re) {
		return errorDiag(fmt.Sprintf("Cannot plan %s", a.Addr()), err.Error(), subject)
	}
	if rng, ok := a.EgressRuleRange(re.Index); ok {
		subject = rng.Ptr()
		return &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Egress rule not supported by this runtime",
			Detail: fmt.Sprintf("%s runs on runtime %q: %v", a.Addr(), a.RuntimeName, err), Subject: subject}
	}
	return errorDiag(fmt.Sprintf("Cannot plan %s", a.Addr()), err.Error(), subject)
}

// agentPlan is one agent evaluated for this plan.
type agentPlan struct {
	agent   *lang.Agent
	val     lang.AgentValue
	spec    drivers.AgentSpec
	runtime *Runtime
}

// evalAgent evaluates one agent into the spec its driver plans from.
func (p *Planner) evalAgent(a *lang.Agent, rt *Runtime) (*agentPlan, hcl.Diagnostics) {
	val, diags := p.Scope.EvalAgent(a)
	if diags.HasErrors() {
		return nil, diags
	}
	spec := agentSpec(a, val)
	spec.EgressCeiling = rt.EffectiveCeiling()
	var moreDiags hcl.Diagnostics
	spec.Driver, moreDiags = p.Scope.EvalAgentDriver(a, rt.Driver.Name(), rt.Driver.Declare().Schema.Agent, p.Registry.AgentSetting)
	diags = append(diags, moreDiags...)
	if moreDiags.HasErrors() {
		return nil, diags
	}
	return &agentPlan{agent: a, val: val, spec: spec, runtime: rt}, diags
}

// Resolve re-evaluates a change whose desired values were unknown at plan
// time (agent.x.id of an agent created in the same apply), now that what it
// depends on is applied and recorded. The executor calls it just before the
// change's create or update.
func (p *Planner) Resolve(ctx context.Context, records []state.Record, c *Change) error {
	a, ok := p.Config.Agents[c.Agent]
	if !ok {
		return fmt.Errorf("%s belongs to no agent in the configuration", c.Addr)
	}
	rt, ok := p.Runtimes[c.Runtime]
	if !ok {
		return fmt.Errorf("runtime %q is not configured", c.Runtime)
	}
	SetKnown(p.Scope, records)
	ap, diags := p.evalAgent(a, rt)
	if diags.HasErrors() {
		return diags
	}
	if addr, _ := addrs.Parse(c.Addr); addr.IsSnapshotBlock() && c.Kind == drivers.KindSnapshot {
		if sn, ok := p.Config.Snapshots[addr.Name()]; ok {
			return p.resolveSnapshot(sn, ap, c)
		}
	}
	if diags := p.checkCapabilities(ap); diags.HasErrors() {
		return diags
	}
	resp, err := rt.Driver.Plan(ctx, drivers.PlanRequest{Agent: ap.spec})
	if err != nil {
		return err
	}
	for _, o := range resp.Objects {
		if o.Addr != c.Addr {
			continue
		}
		fp := fingerprint(o.Kind, o.Attrs, nil)
		if fp.Hash == "" {
			return fmt.Errorf("%s still has unknown values after what it depends on was applied", c.Addr)
		}
		o.DependsOn = c.Object.DependsOn
		c.Object, c.Fingerprint = o, fp
		for name, v := range o.Attrs {
			c.After[name] = RedactedJSON(v)
		}
		return nil
	}
	return fmt.Errorf("the driver no longer plans %s", c.Addr)
}

// resolveSnapshot evaluates a snapshot block again (its description or
// triggers read agent.x.id of an agent created in the same apply), with
// the agent it commits as it is now.
func (p *Planner) resolveSnapshot(sn *lang.Snapshot, ap *agentPlan, c *Change) error {
	val, diags := p.Scope.EvalSnapshot(sn)
	if diags.HasErrors() {
		return diags
	}
	attrs := snapshotAttrs(ap.agent.Addr(), val.Description, val.Triggers, false)
	fp := fingerprint(drivers.KindSnapshot, attrs, nil)
	if fp.Hash == "" {
		return fmt.Errorf("%s still has unknown values after what it depends on was applied", c.Addr)
	}
	c.Object.Attrs, c.Fingerprint = attrs, fp
	for name, v := range attrs {
		c.After[name] = RedactedJSON(v)
	}
	spec := ap.spec
	c.AgentSpec = &spec
	return nil
}

// refersTo lists the agents and snapshot blocks an agent refers to
// (agent.x.id, snapshot.x.image, depends_on): each is created before it.
func refersTo(a *lang.Agent) []string {
	var out []string
	for _, ref := range a.References() {
		if r, _ := addrs.Parse(ref); (r.IsAgent() || r.IsSnapshotBlock()) && ref != a.Addr() {
			out = append(out, ref)
		}
	}
	return out
}

// addSnapshotDependencies makes the agent's workloads depend on the
// snapshots whose images they may run: the snapshot blocks the agent
// refers to (image = snapshot.X.image) and, for a fork of another agent,
// the snapshot it boots from. Each is taken before the workload is
// created, and deleted only after it (an image in use cannot go).
func (p *Planner) addSnapshotDependencies(a *lang.Agent, objects []drivers.Object) {
	var deps []string
	for _, ref := range refersTo(a) {
		if r, _ := addrs.Parse(ref); r.IsSnapshotBlock() {
			deps = append(deps, ref)
		}
	}
	if dep := p.Config.ForkDependency(a); dep != "" && !slices.Contains(deps, dep) {
		deps = append(deps, dep)
	}
	for i := range objects {
		o := &objects[i]
		if !o.Workload || !covers([]string{a.Addr()}, o.Addr) {
			continue
		}
		for _, dep := range deps {
			if !slices.Contains(o.DependsOn, dep) {
				o.DependsOn = append(slices.Clone(o.DependsOn), dep)
			}
		}
	}
}

// waitForHealthySidecars orders each agent's workload after the sidecars
// of its bottle that have a healthcheck: created or started in the same
// apply, the agent starts once they are healthy (the executor's settle
// waits for that before the step is done). It is an ordering only
// (WaitFor), not a dependency: a sidecar replaced does not replace the
// agent. A healthcheck not yet known may be one: it is waited for.
func waitForHealthySidecars(agents map[string]*agentPlan, changes map[string]*Change) {
	for addr, ap := range agents {
		c, ok := changes[addr]
		if !ok || !c.Object.Workload {
			continue
		}
		for _, sc := range ap.spec.Sidecars {
			if drivers.WorkloadAttr(sc.Workload, "healthcheck").IsNull() {
				continue
			}
			if s, ok := changes[sc.Addr]; ok && s.Object.Workload && !slices.Contains(c.WaitFor, sc.Addr) {
				c.WaitFor = append(c.WaitFor, sc.Addr)
			}
		}
	}
}

// unknownAfterReplace orders each agent after the agents and snapshot
// blocks it refers to, and makes what it reads of one created anew (an
// agent's id or name, a snapshot's image) unknown, as it will be: the
// referring agent is planned again, and a value that changes forces what
// it forces. Without this a replaced agent's old id, or a re-taken
// snapshot's old image, would be handed to the agents that refer to it.
func (p *Planner) unknownAfterReplace(ctx context.Context, want map[string]*desired, agents map[string]*agentPlan, changes map[string]*Change) hcl.Diagnostics {
	var diags hcl.Diagnostics
	for _, ap := range agents {
		after := refersTo(ap.agent)
		if len(after) == 0 {
			continue
		}
		for _, c := range changes {
			if c.Agent == ap.agent.Name && !c.Stray && covers([]string{ap.agent.Addr()}, c.Addr) {
				c.WaitFor = append(c.WaitFor, after...)
			}
		}
	}
	for _, sn := range p.Config.Snapshots {
		c, ok := changes[sn.Addr()]
		if !ok {
			continue
		}
		for _, ref := range sn.References() {
			if r, _ := addrs.Parse(ref); (r.IsAgent() || r.IsSnapshotBlock()) && r != addrs.Agent(sn.AgentName) {
				c.WaitFor = append(c.WaitFor, ref)
			}
		}
	}
	renewed := map[string]bool{}
	for round := 0; round <= len(agents); round++ {
		var fresh []string
		for addr, ap := range agents {
			if c, ok := changes[addr]; ok && !renewed[addr] && (c.Action == Create || c.Action == Replace || c.Action == Migrate) {
				renewed[addr] = true
				fresh = append(fresh, addr)
				p.Scope.SetAgent(ap.agent.Name, cty.UnknownVal(ap.agent.ObjectType()))
			}
		}
		for _, name := range p.Config.SnapshotNames() {
			addr := addrs.Snapshot(name).String()
			// One never taken is unknown already; one taken again is not.
			if c, ok := changes[addr]; ok && !renewed[addr] && c.Prior != nil && (c.Action == Create || c.Action == Replace) {
				renewed[addr] = true
				fresh = append(fresh, addr)
				p.Scope.SetSnapshot(name, cty.UnknownVal(lang.SnapshotObjectType))
			}
		}
		if len(fresh) == 0 {
			return diags
		}
		for _, ap := range agents {
			if !slices.ContainsFunc(refersTo(ap.agent), func(r string) bool { return slices.Contains(fresh, r) }) {
				continue
			}
			again, moreDiags := p.evalAgent(ap.agent, ap.runtime)
			diags = append(diags, moreDiags...)
			if moreDiags.HasErrors() {
				continue
			}
			resp, err := ap.runtime.Driver.Plan(ctx, drivers.PlanRequest{Agent: again.spec})
			if err != nil {
				diags = append(diags, planError(ap.agent, err))
				continue
			}
			ap.spec, ap.val = again.spec, again.val
			p.addSnapshotDependencies(ap.agent, resp.Objects)
			for _, o := range resp.Objects {
				old, ok := changes[o.Addr]
				if !ok {
					continue
				}
				d := want[o.Addr]
				d.object = o
				c := diffObject(d, old.Prior, old.Live)
				c.WaitFor = old.WaitFor
				changes[o.Addr] = c
			}
		}
	}
	return diags
}

// now is the planner's clock.
func (p *Planner) now() time.Time {
	if p.Clock != nil {
		return p.Clock()
	}
	return time.Now()
}
