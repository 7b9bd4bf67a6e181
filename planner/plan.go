package planner

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/planner/dag"
	"github.com/bottlefile/bottlefile/state"
)

// Change is what the plan does to one object.
type Change struct {
	Addr    string // "agent.coder", "agent.coder.network"
	Agent   string // the name of the agent block it belongs to; "" for orphans
	Kind    string // driver-defined: "container", "network", "image"
	Runtime string // runtime block name
	Driver  string // driver name

	Action Action
	// Reasons say why an action not driven by the configuration is needed
	// (drift, deletion out of band, an interrupted apply): codes with
	// parameters (reasons.go), which the views put in words.
	Reasons []Reason
	// WhatIf, for a change of an egress allowlist, says what the gateway's
	// recent decisions would have been under the new rules (filled in by
	// operations, which reads the gateway's log).
	WhatIf []string
	// Changed names the attributes whose desired value differs from the
	// recorded one; Forcing is the subset that forces replacement.
	Changed []string
	Forcing []string

	// Before is what was recorded and After what is desired, per attribute,
	// as redacted JSON: sensitive values never enter a plan.
	Before map[string]json.RawMessage
	After  map[string]json.RawMessage

	// Object is the desired object; zero for Delete.
	Object drivers.Object
	// Fingerprint is the desired configuration's hash.
	Fingerprint Fingerprint
	// Prior is the state record, if any.
	Prior *state.Record
	// Live is what the runtime reported, if anything.
	Live *drivers.LiveObject
	// PreventDestroy is the desired lifecycle.prevent_destroy, recorded so
	// it keeps protecting the object after its block is removed.
	PreventDestroy bool
	// StateOnly marks an update that changes only the record.
	StateOnly bool
	// Restarted marks a workload whose runtime started a new instance of
	// it by itself (restarted.go): recorded, or resumed from a snapshot.
	Restarted bool

	// Snapshot planning. SnapshotFirst is the snapshot taken before this
	// workload is deleted (a policy's "before"); BootFrom is the snapshot
	// this workload boots from when it is created (resume).
	SnapshotFirst string
	BootFrom      string
	// ArchiveTo, on an archived agent's workload (Archive), is the
	// snapshot it is kept in, recorded with the archive mark: a resume
	// boots from it (archive.go).
	ArchiveTo string
	// Carry, on a workload created with a new image (workspace.go), are
	// the agent's workspace paths copied into it before it starts, from
	// the snapshot CarryFrom, or when that is "" from the workload it
	// replaces, which then goes only once the new one is created.
	Carry     []string
	CarryFrom string
	// WaitFor lists what this change's create or update waits for besides
	// its dependencies: the workloads of agents its agent refers to, and,
	// for an agent's workload, the sidecars of its bottle that have a
	// healthcheck (until they are healthy). It orders only: unlike
	// Object.DependsOn, a replacement does not spread along it.
	// DeleteAfter lists what its delete waits for (a prune waits for the
	// snapshot taken in the same plan, and, in an archive, for the
	// workload's removal: what it ran may be the snapshot pruned).
	WaitFor, DeleteAfter []string
	// AgentSpec is the evaluated agent a snapshot commits, so its image
	// boots like the agent.
	AgentSpec *drivers.AgentSpec
	// MoveTo, on a snapshot, is the runtime it is moved to once taken
	// (migration).
	MoveTo string
	// Stray marks an unrecorded copy of an object on a runtime other than
	// the one its address lives on (left by an interrupted migration).
	Stray bool
	// Twin marks a second live object of the address on the same runtime,
	// carrying the lineage (the engine's duplicate-name check is not
	// atomic: an interrupted apply's create can land beside the next
	// one's). It is deleted by its id, before anything uses the address.
	Twin bool
	// Policy, on an agent's workload, is its snapshot_policy as the
	// executor records it (PolicyKey): a removal of its block keeps what
	// it kept. "" leaves the record's as it is.
	Policy string
	// StopReason, on a Stop, is what the record's stopped mark
	// (StoppedKey) says instead of "true": IdleStopReason for a tick's.
	StopReason string
	// MovedFrom is the address the object is recorded at, when a moved
	// block (or a chain of them) takes it to Addr; FromRuntime is the
	// runtime it is recorded on, when it moves to Runtime, another
	// runtime block on the same engine. Neither changes anything on a
	// runtime: the apply rewrites the records before its first step
	// (MovedRecord), and a change that does nothing else has no step.
	MovedFrom, FromRuntime string
	// NameAddr is the agent address the engine names of the object's
	// bottle derive from, when not its own (drivers.ApplyRequest.NameAddr);
	// RuntimeNameAddr the runtime address its runtime's own objects'
	// names derive from, when the runtime was renamed.
	NameAddr, RuntimeNameAddr string
	// savedDeleteRuntime is DeleteRuntime as a saved plan recorded it,
	// since a plan read from a file has no Prior.
	savedDeleteRuntime string
}

// key identifies a change in the plan: its address, or for a stray copy
// its address on that runtime.
func (c *Change) key() string {
	if c.Twin && c.Live != nil {
		return c.Addr + "#" + c.Live.ID
	}
	if c.Stray {
		return c.Addr + "@" + c.Runtime
	}
	return c.Addr
}

// carriesFromOld reports a replacement that copies the workspace from the
// workload it replaces.
func (c *Change) carriesFromOld() bool {
	return c.Action == Replace && len(c.Carry) > 0 && c.CarryFrom == ""
}

// DeleteRuntime is the runtime a delete of this change acts on: where the
// object was recorded, which differs from Runtime when it moves.
func (c *Change) DeleteRuntime() string {
	if c.Prior != nil && !c.Stray {
		return c.Prior.Runtime
	}
	if c.savedDeleteRuntime != "" {
		return c.savedDeleteRuntime
	}
	return c.Runtime
}

// Moved reports whether the change moves the object's record to another
// address or runtime.
func (c *Change) Moved() bool { return c.MovedFrom != "" || c.FromRuntime != "" }

// MoveOnly reports whether moving the record is all the change does.
func (c *Change) MoveOnly() bool {
	return c.Moved() && c.Action == Update && c.StateOnly && len(c.Changed) == 0 && !c.Restarted
}

// MovedRecord is the record the apply writes, before its first step, in
// place of the one at MovedFrom (or on FromRuntime): the recorded object
// under its new address and runtime; for a change that does nothing else,
// with the desired configuration it now stands for. ok is false for a
// change that moves nothing.
func (c *Change) MovedRecord() (rec state.Record, from string, ok bool) {
	if !c.Moved() || c.Prior == nil {
		return state.Record{}, "", false
	}
	rec = *c.Prior
	if c.MoveOnly() && c.Fingerprint.Hash != "" {
		rec.Hash, rec.Attrs, rec.AttrHashes = c.Fingerprint.Hash, c.After, c.Fingerprint.Attrs
		rec.PreventDestroy = c.PreventDestroy
		if c.Object.Addr != "" {
			rec.DependsOn = c.Object.DependsOn
		}
	}
	from = c.MovedFrom
	if from == "" {
		from = c.Addr
	}
	return rec, from, true
}

// ID is the runtime's id of the existing object, if there is one.
func (c *Change) ID() string {
	if c.Live != nil {
		return c.Live.ID
	}
	if c.Prior != nil {
		return c.Prior.ID
	}
	return ""
}

// Plan is the set of changes that converge state, runtimes and configuration.
type Plan struct {
	// Changes are sorted by address and include no-ops.
	Changes []*Change
	// Lineage and Serial identify the state the plan was made against.
	Lineage string
	Serial  uint64
	// Options are the modes the plan was made with.
	Options Options
	// Kept lists, in a destroy, the policy snapshots it keeps (a
	// snapshot_policy.before with "destroy"), by address: the next apply
	// resumes from them, and destroy -include-snapshots deletes them.
	Kept []KeptSnapshot
	// RunningFrom maps a snapshot's address to the live workloads that run
	// its image, as the runtimes report it (or, where a runtime cannot
	// tell, as their records say they booted): snapshot rm refuses those.
	// Not saved with a plan.
	RunningFrom map[string][]string
	// Intents are the engine creates an interrupted apply left in flight
	// (state.Intent), as the refresh found them; the plan's changes
	// resolve them, and applying it clears them.
	Intents []state.Intent `json:"-"`
	// Due is when each time policy (snapshot_policy.every, idle) is next
	// due (tick.go); a plan acts on none of them, a tick plan on those due
	// now. Not saved with a plan.
	Due []Due `json:"-"`
}

// KeptSnapshot is one snapshot a destroy keeps.
type KeptSnapshot struct {
	Addr string `json:"address"`
	// Size is in bytes; -1 when unknown (taken by this plan).
	Size int64 `json:"size"`
	// Created is when it was taken; zero when it is taken by this plan.
	Created time.Time `json:"created"`
}

// Applyable reports whether the plan has anything to do.
func (p *Plan) Applyable() bool {
	for _, c := range p.Changes {
		if c.Action != NoOp {
			return true
		}
	}
	return false
}

// String is a stable one-line-per-change rendering, used as a test oracle.
func (p *Plan) String() string {
	var b strings.Builder
	for _, c := range p.Changes {
		fmt.Fprintf(&b, "%s %s", c.Action.Symbol(), c.Addr)
		if len(c.Forcing) > 0 {
			fmt.Fprintf(&b, " forced by %s", strings.Join(c.Forcing, ", "))
		}
		for _, r := range c.Reasons {
			fmt.Fprintf(&b, " (%s)", r.Text())
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// Step is one operation of the apply graph.
type Step struct {
	Op     StepOp
	Change *Change
}

// Name identifies the step in the graph.
func (s *Step) Name() string {
	if s.Change.Stray {
		return string(s.Op) + " " + s.Change.Addr + " on " + s.Change.Runtime
	}
	if s.Change.Twin && s.Change.Live != nil {
		return string(s.Op) + " " + s.Change.Addr + " copy " + shortID(s.Change.Live.ID)
	}
	return string(s.Op) + " " + s.Change.Addr
}

// Graph builds the operations of the plan and their order: an object is
// created after what it depends on and deleted before it; a replacement
// deletes before it creates, since names are fixed.
func (p *Plan) Graph() *dag.Graph {
	g := &dag.Graph{}
	ups := map[string]*Step{}   // key to its create/update/start/adopt step
	downs := map[string]*Step{} // key to its delete/forget/stop step
	moves := map[string]*Step{} // key to its move step
	for _, c := range p.Changes {
		k := c.key()
		if c.MoveOnly() {
			continue // the apply moved its record before the walk
		}
		up, down := c.steps()
		if up != "" {
			ups[k] = &Step{Op: up, Change: c}
		}
		if down != "" {
			downs[k] = &Step{Op: down, Change: c}
		}
		if c.MoveTo != "" {
			moves[k] = &Step{Op: StepMove, Change: c}
		}
	}
	for _, s := range ups {
		g.Add(s)
	}
	for _, s := range downs {
		g.Add(s)
	}
	// What a step waits for to be usable: a moved snapshot is usable once
	// moved, anything else once created.
	ready := func(addr string) (*Step, bool) {
		if m, ok := moves[addr]; ok {
			return m, true
		}
		s, ok := ups[addr]
		return s, ok
	}
	for k, m := range moves {
		g.Add(m)
		g.Connect(m, ups[k])
	}
	// What a workload carrying its workspace from the one it replaces
	// depends on (its built image) is made new before the old one goes:
	// the old workload stays until the new one is created.
	keptFor := map[string]bool{}
	for _, c := range p.Changes {
		if c.carriesFromOld() {
			for _, dep := range c.Object.DependsOn {
				keptFor[dep] = true
			}
		}
	}
	for k, up := range ups {
		if down, ok := downs[k]; ok {
			if up.Change.Action == Migrate || up.Change.carriesFromOld() || keptFor[k] {
				// The new copy runs before the old one goes (a carry
				// from the old one sets it aside first).
				g.Connect(down, up)
			} else if up.Change.DeleteRuntime() == up.Change.Runtime {
				// Names are fixed: the old one goes first. (Across
				// runtimes the names cannot clash.)
				g.Connect(up, down)
			}
		}
		for _, dep := range up.Change.Object.DependsOn {
			if d, ok := ups[dep]; ok {
				g.Connect(up, d)
			}
		}
		for _, from := range []string{up.Change.BootFrom, up.Change.CarryFrom} {
			if s, ok := ready(from); ok && from != "" {
				g.Connect(up, s)
			}
		}
	}
	// A twin goes before its address is created, adopted or used.
	for _, c := range p.Changes {
		if !c.Twin {
			continue
		}
		down, ok := downs[c.key()]
		if !ok {
			continue
		}
		for _, up := range ups {
			if up.Change.Addr == c.Addr || slices.Contains(up.Change.Object.DependsOn, c.Addr) {
				g.Connect(up, down)
			}
		}
	}
	for _, c := range p.Changes {
		k := c.key()
		// A snapshot is taken before its workload goes; prunes and other
		// late steps wait for what they name.
		if c.SnapshotFirst != "" {
			if d, ok := downs[k]; ok {
				if s, ok := ready(c.SnapshotFirst); ok {
					g.Connect(d, s)
				}
			}
		}
		for _, after := range c.WaitFor {
			if s, ok := ready(after); ok {
				if u, ok := ups[k]; ok {
					g.Connect(u, s)
				}
			}
		}
		for _, after := range c.DeleteAfter {
			s, ok := ready(after)
			if !ok {
				s, ok = downs[after] // one removed (an archived workload)
			}
			if d, found := downs[k]; ok && found {
				g.Connect(d, s)
			}
		}
	}
	// A dependency is deleted only after everything that recorded it as a
	// dependency is gone. An object found live but never recorded has no
	// recorded dependencies: the objects an agent owns sit below its address
	// and depend on it being gone (the container before its network).
	for _, down := range downs {
		c := down.Change
		deps := c.Object.DependsOn
		if c.Prior != nil && !c.Stray {
			deps = c.Prior.DependsOn
		} else if c.Object.Addr == "" {
			for _, d := range downs {
				if d.Change.Runtime == c.Runtime && strings.HasPrefix(d.Change.Addr, c.Addr+".") {
					g.Connect(d, down)
				}
			}
		}
		for _, dep := range deps {
			if d, ok := downs[dep]; ok && d.Change.DeleteRuntime() == c.DeleteRuntime() {
				g.Connect(d, down)
			}
		}
	}
	return g
}

// sortChanges orders changes by address.
func sortChanges(cs []*Change) {
	sort.Slice(cs, func(i, j int) bool { return cs[i].Addr < cs[j].Addr })
}
