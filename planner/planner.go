package planner

import (
	"encoding/json"
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

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

// Planner diffs a configuration against recorded state and live runtimes.
type Planner struct {
	Config   *lang.Config
	Scope    *lang.Scope
	Runtimes Runtimes
	State    StateReader
	Log      hclog.Logger
	// Destroy plans the removal of everything recorded or found live.
	Destroy bool
}

// desired is one object the configuration asks for.
type desired struct {
	runtime string
	driver  string
	object  drivers.Object
	decl    hcl.Range
}

// Plan refreshes every runtime (one Read each), expands each agent through
// its driver, and diffs. It has no side effects on any runtime.
func (p *Planner) Plan(ctx context.Context) (*Plan, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	log := p.Log
	if log == nil {
		log = hclog.NewNullLogger()
	}
	records, err := p.State.Records()
	if err != nil {
		return nil, append(diags, errorDiag("Cannot read state", err.Error(), nil))
	}
	plan := &Plan{Lineage: p.State.Lineage(), Serial: p.State.Serial(), Destroy: p.Destroy}

	live, moreDiags := p.refresh(ctx, plan.Lineage)
	diags = append(diags, moreDiags...)
	if diags.HasErrors() {
		return nil, diags
	}

	want := map[string]*desired{}
	if !p.Destroy {
		want, moreDiags = p.expand(ctx, records)
		diags = append(diags, moreDiags...)
		if diags.HasErrors() {
			return nil, diags
		}
	}

	recorded := make(map[string]*state.Record, len(records))
	for i := range records {
		recorded[records[i].Addr] = &records[i]
	}
	changes := make(map[string]*Change, len(want)+len(records))
	for addr, d := range want {
		c := diffObject(d, recorded[addr], live.take(d.runtime, addr))
		changes[addr] = c
	}
	propagateReplacement(changes)

	// What is recorded or live but no longer wanted is deleted.
	for _, r := range records {
		if _, ok := want[r.Addr]; ok {
			continue
		}
		if _, ok := p.Runtimes[r.Runtime]; !ok {
			diags = append(diags, errorDiag("Runtime no longer declared",
				fmt.Sprintf("%s was created on runtime %q, which the configuration no longer declares. Declare the runtime again so bottlefile can remove it, or forget it with `bottlefile state rm %s`.", r.Addr, r.Runtime, r.Addr), nil))
			continue
		}
		c := &Change{Addr: r.Addr, Kind: r.Kind, Runtime: r.Runtime, Driver: r.Driver, Action: Delete, Prior: &records[indexOf(records, r.Addr)], Before: r.Attrs}
		c.Live = live.take(r.Runtime, r.Addr)
		if c.Live == nil {
			c.Reasons = append(c.Reasons, "it no longer exists on the runtime; only its record is removed")
		}
		changes[r.Addr] = c
	}
	for _, lo := range live.rest() {
		if _, ok := changes[lo.obj.Addr]; ok {
			continue
		}
		c := &Change{Addr: lo.obj.Addr, Kind: lo.obj.Kind, Runtime: lo.runtime, Driver: lo.driver, Action: Delete, Live: lo.obj,
			Reasons: []string{fmt.Sprintf("%s %s carries this state's lineage but is not recorded (left by an interrupted apply)", lo.obj.Kind, lo.obj.Name)}}
		changes[lo.obj.Addr] = c
	}

	for _, c := range changes {
		plan.Changes = append(plan.Changes, c)
	}
	sortChanges(plan.Changes)
	log.Debug("plan made", "changes", len(plan.Changes), "lineage", plan.Lineage, "serial", plan.Serial)
	return plan, diags
}

func indexOf(records []state.Record, addr string) int {
	for i := range records {
		if records[i].Addr == addr {
			return i
		}
	}
	return -1
}

// liveSet holds what refresh found, by runtime and address; take removes an
// entry so what is left at the end is live but unwanted.
type liveSet map[string]map[string]liveEntry

type liveEntry struct {
	runtime, driver string
	obj             *drivers.LiveObject
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

// refresh asks every runtime once for everything of this lineage.
func (p *Planner) refresh(ctx context.Context, lineage string) (liveSet, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	ls := liveSet{}
	if lineage == "" {
		return ls, nil // nothing was ever applied: nothing can be ours
	}
	for _, name := range sortedKeys(p.Runtimes) {
		rt := p.Runtimes[name]
		resp, err := rt.Driver.Read(ctx, drivers.ReadRequest{Lineage: lineage})
		if err != nil {
			diags = append(diags, errorDiag(fmt.Sprintf("Cannot refresh runtime %q", name), err.Error(), nil))
			continue
		}
		m := make(map[string]liveEntry, len(resp.Objects))
		for i := range resp.Objects {
			o := &resp.Objects[i]
			m[o.Addr] = liveEntry{runtime: name, driver: rt.Driver.Name(), obj: o}
		}
		ls[name] = m
	}
	return ls, diags
}

// expand evaluates every agent and asks its runtime's driver for the
// objects it needs.
func (p *Planner) expand(ctx context.Context, records []state.Record) (map[string]*desired, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	for _, r := range records {
		if r.Kind == "container" && r.ID != "" && strings.Count(r.Addr, ".") == 1 {
			p.Scope.SetAgent(strings.TrimPrefix(r.Addr, "agent."), cty.ObjectVal(map[string]cty.Value{"id": cty.StringVal(r.ID)}))
		}
	}
	want := map[string]*desired{}
	for _, name := range p.Config.AgentNames() {
		a := p.Config.Agents[name]
		rt, ok := p.Runtimes[a.RuntimeName]
		if !ok {
			diags = append(diags, errorDiag("Runtime not available", fmt.Sprintf("%s runs on runtime %q, which could not be configured.", a.Addr(), a.RuntimeName), a.DeclRange.Ptr()))
			continue
		}
		val, moreDiags := p.Scope.EvalAgent(a)
		diags = append(diags, moreDiags...)
		if moreDiags.HasErrors() {
			continue
		}
		spec := drivers.AgentSpec{
			Addr: a.Addr(), Name: a.Name,
			Image: val.Image, Command: val.Command, Entrypoint: val.Entrypoint, Env: val.Env,
			Workdir: val.Workdir, User: val.User, CPUs: val.CPUs, Memory: val.Memory, Labels: val.Labels,
		}
		if val.Build != nil {
			spec.Build = &drivers.BuildSpec{Context: val.Build.Context, Dockerfile: val.Build.Dockerfile}
		}
		resp, err := rt.Driver.Plan(ctx, drivers.PlanRequest{Agent: spec})
		if err != nil {
			diags = append(diags, errorDiag(fmt.Sprintf("Cannot plan %s", a.Addr()), err.Error(), a.DeclRange.Ptr()))
			continue
		}
		for _, o := range resp.Objects {
			want[o.Addr] = &desired{runtime: rt.Name, driver: rt.Driver.Name(), object: o, decl: a.DeclRange}
		}
	}
	return want, diags
}

// diffObject decides the action for one wanted object from its record and
// what is live. Drift is judged on the config hash and a few live facts.
func diffObject(d *desired, rec *state.Record, lo *drivers.LiveObject) *Change {
	fp := fingerprint(d.object.Kind, d.object.Attrs)
	c := &Change{
		Addr: d.object.Addr, Kind: d.object.Kind, Runtime: d.runtime, Driver: d.driver,
		Object: d.object, Fingerprint: fp, Prior: rec, Live: lo,
		After: make(map[string]json.RawMessage, len(d.object.Attrs)),
	}
	for name, v := range d.object.Attrs {
		c.After[name] = RedactedJSON(v)
	}
	if rec != nil {
		c.Before = rec.Attrs
	}
	switch {
	case rec == nil && lo == nil:
		c.Action = Create
	case rec == nil:
		if fp.Hash != "" && lo.Hash == fp.Hash && (!d.object.Workload || lo.Running) {
			c.Action = Adopt
			c.Reasons = append(c.Reasons, fmt.Sprintf("%s %s carries this state's lineage but is not recorded (left by an interrupted apply); it matches the configuration and will be recorded", lo.Kind, lo.Name))
		} else {
			c.Action = Replace
			c.Reasons = append(c.Reasons, fmt.Sprintf("%s %s carries this state's lineage but is not recorded (left by an interrupted apply), and does not match the configuration", lo.Kind, lo.Name))
		}
	case rec.Runtime != d.runtime:
		c.Action = Replace
		c.Forcing = []string{"runtime"}
		c.Reasons = append(c.Reasons, fmt.Sprintf("it moves from runtime %q to %q", rec.Runtime, d.runtime))
	case lo == nil:
		c.Action = Create
		c.Reasons = append(c.Reasons, fmt.Sprintf("it was recorded as %s but no longer exists on the runtime (deleted outside bottlefile)", shortID(rec.ID)))
	default:
		c.Changed = changedAttrs(rec.AttrHashes, fp.Attrs, d.object.Attrs)
		switch {
		case lo.Hash != rec.Hash:
			c.Action = Replace
			c.Reasons = append(c.Reasons, fmt.Sprintf("the live %s carries config hash %s, not the recorded %s (re-created outside bottlefile)", lo.Kind, shortID(lo.Hash), shortID(rec.Hash)))
		case len(c.Changed) > 0:
			for _, name := range c.Changed {
				if !slices.Contains(d.object.InPlace, name) {
					c.Forcing = append(c.Forcing, name)
				}
			}
			if len(c.Forcing) > 0 {
				c.Action = Replace
			} else {
				c.Action = Update
			}
		case fp.Hash != rec.Hash:
			// Same attributes, other hash: the driver changed what it hashes.
			c.Action = Replace
			c.Reasons = append(c.Reasons, "its recorded configuration hash differs from the desired one")
		case d.object.Workload && !lo.Running:
			c.Action = Start
			c.Reasons = append(c.Reasons, "it was stopped outside bottlefile; it will be started, not replaced")
		}
	}
	return c
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
			if c.Action == Replace || c.Action == Create {
				continue
			}
			if c.Prior == nil && c.Live == nil {
				continue
			}
			for _, dep := range c.Object.DependsOn {
				d, ok := changes[dep]
				if !ok || (d.Action != Replace && d.Action != Create) {
					continue
				}
				c.Action = Replace
				c.Reasons = append(c.Reasons, fmt.Sprintf("%s, which it depends on, will be %s", dep, pastTense(d.Action)))
				changed = true
				break
			}
		}
	}
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
