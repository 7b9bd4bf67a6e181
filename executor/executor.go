package executor

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/hcl/v2"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/planner"
	"github.com/bottlefile/bottlefile/planner/dag"
	"github.com/bottlefile/bottlefile/state"
)

// StateWriter is the part of the state store applying needs.
type StateWriter interface {
	Records() ([]state.Record, error)
	Put(state.Record) error
	Delete(addr string) error
}

// IntentWriter is the part of the state store that records the engine
// creates in flight (state.Intent); a store without it records none.
type IntentWriter interface {
	PutIntent(state.Intent) error
	ClearIntent(addr string) error
}

// RecordMover is implemented by state stores that move records in one
// transaction (state.Store.Move); others are moved record by record.
type RecordMover interface {
	Move(moves map[string]state.Record) error
}

// Resolver evaluates again, at apply, a change whose values were unknown
// at plan time; the planner implements it.
type Resolver interface {
	Resolve(ctx context.Context, records []state.Record, c *planner.Change) error
}

// Hook observes the apply; the command layer turns it into progress lines.
type Hook interface {
	PreApply(s *planner.Step)
	PostApply(s *planner.Step, elapsed time.Duration, err error)
	Skipped(s *planner.Step, cause *planner.Step)
}

// Noter is a Hook that also shows what a driver said about a step
// (drivers.ApplyResponse.Notes).
type Noter interface {
	Note(s *planner.Step, note string)
}

// NilHook does nothing; embed it to implement only part of Hook.
type NilHook struct{}

func (NilHook) PreApply(*planner.Step)                        {}
func (NilHook) PostApply(*planner.Step, time.Duration, error) {}
func (NilHook) Skipped(s *planner.Step, cause *planner.Step)  {}

// Executor applies a plan: it walks the plan's graph, performs each step
// through its runtime's driver, and writes state after every step, before
// any dependent starts.
type Executor struct {
	State       StateWriter
	Lineage     string
	Runtimes    planner.Runtimes
	Parallelism int
	Hook        Hook
	Log         hclog.Logger
	// Abandon, when done, cancels steps already running (a second Ctrl-C).
	Abandon context.Context
	// Resolver fills in values that were unknown at plan time.
	Resolver Resolver
	// Wait is how long a workload is watched after it was created or
	// started, for an early exit, by drivers that can (drivers.Settler);
	// the step fails if it exits. Zero or negative looks once; a workload
	// with a healthcheck is watched until it is healthy whatever Wait is.
	Wait time.Duration
	// Clock is what "now" is to the records it writes (when an object was
	// archived); time.Now when nil.
	Clock func() time.Time
}

// Result says what was done and what was not.
type Result struct {
	Applied []*planner.Step
	Failed  []*planner.Step
	Skipped []*planner.Step
	// Moved counts the agents whose records moved before the walk (a
	// moved block, another runtime block on the same engine).
	Moved int
}

// results collects outcomes from concurrent steps.
type results struct {
	mu  sync.Mutex // guards res
	res Result
}

func (r *results) add(list *[]*planner.Step, s *planner.Step) {
	r.mu.Lock()
	defer r.mu.Unlock()
	*list = append(*list, s)
}

func (r *results) snapshot() Result {
	r.mu.Lock()
	defer r.mu.Unlock()
	return Result{
		Applied: append([]*planner.Step(nil), r.res.Applied...),
		Failed:  append([]*planner.Step(nil), r.res.Failed...),
		Skipped: append([]*planner.Step(nil), r.res.Skipped...),
	}
}

// Apply performs the plan. Once ctx is done no new step starts; running
// steps finish and are recorded.
func (e *Executor) Apply(ctx context.Context, plan *planner.Plan) (Result, hcl.Diagnostics) {
	hook := e.Hook
	if hook == nil {
		hook = NilHook{}
	}
	log := e.Log
	if log == nil {
		log = hclog.NewNullLogger()
	}
	if err := e.clearResolved(plan); err != nil {
		return Result{}, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Cannot write state", Detail: err.Error()}}
	}
	if err := e.moveRecords(plan); err != nil {
		return Result{}, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Failed to move records", Detail: err.Error()}}
	}
	moved := plan.Summary().Move
	var out results
	w := &Walker{
		Parallelism: e.Parallelism,
		Abandon:     e.Abandon,
		OnSkip: func(v, cause dag.Vertex) {
			s := v.(*planner.Step)
			out.add(&out.res.Skipped, s)
			var c *planner.Step
			if cause != nil {
				c = cause.(*planner.Step)
			}
			hook.Skipped(s, c)
		},
	}
	diags := w.Walk(ctx, plan.Graph(), func(ctx context.Context, v dag.Vertex) hcl.Diagnostics {
		s := v.(*planner.Step)
		hook.PreApply(s)
		start := time.Now()
		err := e.step(ctx, s)
		hook.PostApply(s, time.Since(start), err)
		if err != nil {
			log.Error("step failed", "step", s.Name(), "error", err)
			out.add(&out.res.Failed, s)
			return hcl.Diagnostics{{Severity: hcl.DiagError, Summary: fmt.Sprintf("Failed to %s", s.Name()), Detail: err.Error()}}
		}
		log.Debug("step done", "step", s.Name(), "elapsed", time.Since(start))
		out.add(&out.res.Applied, s)
		return nil
	})
	res := out.snapshot()
	res.Moved = moved
	return res, diags
}

// moveRecords rewrites, before any step, the records the plan moves to
// another address (a moved block) or runtime (one on the same engine):
// nothing on a runtime changes, and every step after finds the records
// where the configuration now has them.
func (e *Executor) moveRecords(plan *planner.Plan) error {
	moves := map[string]state.Record{}
	for _, c := range plan.Changes {
		if rec, from, ok := c.MovedRecord(); ok {
			if rt, ok := e.Runtimes[rec.Runtime]; ok && rt.EngineIdentity() != "" {
				rec.Engine = rt.Engine
			}
			moves[from] = rec
		}
	}
	if len(moves) == 0 {
		return nil
	}
	if m, ok := e.State.(RecordMover); ok {
		return m.Move(moves)
	}
	for from, rec := range moves {
		if err := e.State.Put(rec); err != nil {
			return err
		}
		if from != rec.Addr {
			if err := e.State.Delete(from); err != nil {
				return err
			}
		}
	}
	return nil
}

func (e *Executor) step(ctx context.Context, s *planner.Step) error {
	c := s.Change
	runtime := c.Runtime
	if s.Op == planner.StepDelete {
		runtime = c.DeleteRuntime()
	}
	rt, ok := e.Runtimes[runtime]
	if !ok {
		return fmt.Errorf("runtime %q is not configured", runtime)
	}
	if run, ok := stepRuns[s.Op]; ok {
		return run(e, ctx, s, rt)
	}
	op := s.Op.DriverOp()
	if op == "" {
		return fmt.Errorf("%s: the executor has no way to %s", c.Addr, s.Op)
	}
	if c.Fingerprint.Hash == "" {
		if e.Resolver == nil {
			return fmt.Errorf("%s has values that are still unknown; run plan again", c.Addr)
		}
		records, err := e.State.Records()
		if err != nil {
			return err
		}
		if err := e.Resolver.Resolve(ctx, records, c); err != nil {
			return err
		}
	}
	id := ""
	if op != drivers.OpCreate {
		id = c.ID()
	}
	req := drivers.ApplyRequest{Op: op, Lineage: e.Lineage, Object: c.Object, Hash: c.Fingerprint.Hash, ID: id, Agent: c.AgentSpec,
		Runtime: c.Runtime, NameAddr: c.NameAddr, RuntimeNameAddr: c.RuntimeNameAddr}
	if op == drivers.OpCreate && c.BootFrom != "" {
		image, err := e.snapshotImage(c.BootFrom)
		if err != nil {
			return err
		}
		req.BootImage = image
	}
	if op == drivers.OpCreate && len(c.Carry) > 0 {
		carry, err := e.carry(c)
		if err != nil {
			return err
		}
		req.Carry = carry
	}
	if op == drivers.OpCreate {
		named := c.Object // named as the engine will name it
		named.Addr = req.NamedAddr(c.Object.Addr)
		if err := e.intend(rt.Driver, c.Addr, c.Kind, c.Runtime, named); err != nil {
			return err
		}
	}
	resp, err := rt.Driver.Apply(ctx, req)
	if err != nil {
		return err
	}
	if op == drivers.OpUpdate && c.StartsAfterUpdate() {
		// Updated in place while stopped: started too, and then watched
		// as any start is.
		notes := resp.Notes
		req.Op, req.ID = drivers.OpStart, cmp.Or(resp.ID, id)
		if resp, err = rt.Driver.Apply(ctx, req); err != nil {
			return fmt.Errorf("updated in place, but starting it: %w", err)
		}
		resp.Notes = append(notes, resp.Notes...)
		op = drivers.OpStart
	}
	if n, ok := e.Hook.(Noter); ok {
		for _, note := range resp.Notes {
			n.Note(s, note)
		}
	}
	if resp.ID == "" {
		resp.ID = id
	}
	computed := resp.RecordComputed()
	if op != drivers.OpCreate && c.Prior != nil && c.Prior.ID == resp.ID {
		// A start or update keeps what the driver does not report again
		// (a gateway's proxy address, say).
		fresh := computed
		computed = maps.Clone(c.Prior.Computed)
		if computed == nil {
			computed = fresh
		}
		maps.Copy(computed, fresh)
	}
	if req.BootImage != "" {
		// Recorded, so that snapshot list can say what boots from which
		// snapshot; updates and starts keep it with the rest.
		computed = maps.Clone(computed)
		if computed == nil {
			computed = map[string]string{}
		}
		computed[BootFromKey] = c.BootFrom
	}
	if op == drivers.OpCreate && (req.Carry != nil || c.Kind == drivers.KindSnapshot) {
		computed = maps.Clone(computed)
		if computed == nil {
			computed = map[string]string{}
		}
		if req.Carry != nil {
			computed[CarriedFromKey] = c.CarryFrom
			if c.CarryFrom == "" {
				computed[CarriedFromKey] = "the workload it replaced"
			}
		} else if base := e.snapshotBase(c); base != "" {
			computed[planner.BaseKey] = base
		}
	}
	if err := e.record(c, resp.ID, marked(computed, s.Op)); err != nil {
		return err
	}
	if op == drivers.OpUpdate || !c.Object.Workload {
		return nil
	}
	return e.settle(ctx, rt.Driver, c, resp.ID)
}

// stepRuns are the steps the executor carries out other than by one
// driver Apply of the step's DriverOp: deletes (which forget the record),
// stops (drivers.Stopper), and the steps that only touch the state.
var stepRuns = map[planner.StepOp]func(e *Executor, ctx context.Context, s *planner.Step, rt *planner.Runtime) error{
	planner.StepDelete:  (*Executor).delete,
	planner.StepStop:    (*Executor).stop,
	planner.StepArchive: (*Executor).archive,
	planner.StepForget: func(e *Executor, _ context.Context, s *planner.Step, _ *planner.Runtime) error {
		return e.State.Delete(s.Change.Addr)
	},
	planner.StepAdopt: func(e *Executor, _ context.Context, s *planner.Step, _ *planner.Runtime) error {
		c := s.Change
		computed := map[string]string{"name": c.Live.Name}
		if c.Kind == drivers.KindSnapshot {
			computed["image"] = c.Live.Name // so it can still be resumed from
		}
		return e.record(c, c.Live.ID, computed)
	},
	planner.StepRecord: func(e *Executor, _ context.Context, s *planner.Step, _ *planner.Runtime) error {
		return e.record(s.Change, s.Change.ID(), marked(liveComputed(s.Change), s.Op))
	},
	planner.StepMove: func(e *Executor, ctx context.Context, s *planner.Step, _ *planner.Runtime) error {
		return e.move(ctx, s.Change)
	},
}

// delete removes the object from its runtime (when it is there), then its
// record.
func (e *Executor) delete(ctx context.Context, s *planner.Step, rt *planner.Runtime) error {
	c := s.Change
	runtime := c.DeleteRuntime()
	id := c.ID()
	if c.Live != nil || c.Action == planner.Replace || c.Action == planner.Migrate {
		// The kind of what is deleted: a migration's old object may be
		// of another kind (a container) than its new one (a machine).
		kind := c.Kind
		if c.Live != nil {
			kind = c.Live.Kind
		} else if c.Prior != nil {
			kind = c.Prior.Kind
		}
		if _, err := rt.Driver.Apply(ctx, drivers.ApplyRequest{
			Op: drivers.OpDelete, Lineage: e.Lineage, ID: id,
			Object: drivers.Object{Addr: c.Addr, Kind: kind}, NameAddr: c.NameAddr, RuntimeNameAddr: c.RuntimeNameAddr,
		}); err != nil {
			return err
		}
	}
	if c.Prior == nil || c.Stray {
		return e.clearIntent(c.Addr) // what an interrupted create left is gone
	}
	return e.forget(c.Addr, id, runtime)
}

// marked is computed with the stopped mark (planner.StoppedKey) the step
// leaves on the record, and without the archive marks
// (planner.ArchivedKey) when the step leaves the object live.
func marked(computed map[string]string, op planner.StepOp) map[string]string {
	if _, ok := computed[planner.ArchivedKey]; ok && op.Unarchives() {
		computed = maps.Clone(computed)
		delete(computed, planner.ArchivedKey)
		delete(computed, planner.ArchiveSnapshotKey)
	}
	switch op.Stopped() {
	case +1:
		computed = maps.Clone(computed)
		if computed == nil {
			computed = map[string]string{}
		}
		computed[planner.StoppedKey] = "true"
	case -1:
		if _, ok := computed[planner.StoppedKey]; ok {
			computed = maps.Clone(computed)
			delete(computed, planner.StoppedKey)
		}
	}
	return computed
}

// settle watches a workload just created or started, after it was
// recorded (it exists, whatever becomes of it), without holding an apply
// slot: independent workloads are watched at the same time.
func (e *Executor) settle(ctx context.Context, d drivers.Driver, c *planner.Change, id string) error {
	s, ok := drivers.As[drivers.Settler](d)
	if !ok {
		return nil
	}
	ReleaseSlot(ctx)
	return s.Settle(ctx, drivers.SettleRequest{Lineage: e.Lineage, Object: c.Object, ID: id, Wait: max(e.Wait, 0)})
}

func (e *Executor) record(c *planner.Change, id string, computed map[string]string) error {
	if c.NameAddr != "" && computed[planner.NameAddrKey] != c.NameAddr {
		computed = maps.Clone(computed)
		if computed == nil {
			computed = map[string]string{}
		}
		computed[planner.NameAddrKey] = c.NameAddr
	}
	if c.Object.Workload && computed[planner.PolicyKey] != c.Policy {
		// An agent's snapshot_policy as applied: a removal of its block
		// keeps what it keeps.
		computed = maps.Clone(computed)
		if computed == nil {
			computed = map[string]string{}
		}
		computed[planner.PolicyKey] = c.Policy
		if c.Policy == "" {
			delete(computed, planner.PolicyKey)
		}
	}
	engine := ""
	if rt, ok := e.Runtimes[c.Runtime]; ok {
		engine = rt.EngineIdentity()
	}
	// The state clears the intent of the address in the same write.
	return e.State.Put(state.Record{
		Addr: c.Addr, Kind: c.Kind, Driver: c.Driver, Runtime: c.Runtime, Engine: engine, ID: id,
		Hash: c.Fingerprint.Hash, Workload: c.Object.Workload, DependsOn: c.Object.DependsOn,
		Attrs: c.After, AttrHashes: c.Fingerprint.Attrs, Computed: computed,
		PreventDestroy: c.PreventDestroy,
	})
}

// intend records, before an engine call that creates the object at addr,
// that the call is in flight: a process killed before it records the
// result leaves the intent for the next refresh to resolve (planner).
// A failed create keeps it: the engine may have made part of it.
func (e *Executor) intend(d drivers.Driver, addr, kind, runtime string, o drivers.Object) error {
	iw, ok := e.State.(IntentWriter)
	if !ok {
		return nil
	}
	in := state.Intent{Addr: addr, Kind: kind, Driver: d.Name(), Runtime: runtime, PID: os.Getpid()}
	if n, ok := drivers.As[drivers.EngineNamer](d); ok {
		in.Name = n.EngineName(e.Lineage, o)
	}
	if err := iw.PutIntent(in); err != nil {
		return fmt.Errorf("recording that %s is about to be created: %w", addr, err)
	}
	return nil
}

// clearIntent forgets the intent of addr once what it was for is recorded
// (or, for what an interrupted create left, removed).
func (e *Executor) clearIntent(addr string) error {
	if iw, ok := e.State.(IntentWriter); ok {
		return iw.ClearIntent(addr)
	}
	return nil
}

// clearResolved forgets the intents the plan's refresh resolved: what they
// left on the engine is in the plan (adopted, replaced or removed), or
// nothing was made (a create that lands late is taken over by the create
// of its address: the drivers adopt or replace the lineage's own object of
// a name). The intents this apply records come after.
func (e *Executor) clearResolved(plan *planner.Plan) error {
	iw, ok := e.State.(IntentWriter)
	if !ok {
		return nil
	}
	for _, in := range plan.Intents {
		if err := iw.ClearIntent(in.Addr); err != nil {
			return err
		}
	}
	return nil
}

// BootFromKey is the computed value, on a workload's record, naming the
// snapshot it was created from (resume, migration, from_snapshot).
const BootFromKey = planner.BootFromKey

// CarriedFromKey is the computed value, on a workload's record, naming
// where its workspace was carried from when it was created with a new
// image: a snapshot's address, or the workload it replaced.
const CarriedFromKey = "carried_from"

// carry is what a workload create copies into the new workload: the
// workspace paths, from the snapshot's image as its record has it, or
// from the live workload it replaces.
func (e *Executor) carry(c *planner.Change) (*drivers.Carry, error) {
	carry := &drivers.Carry{Paths: c.Carry}
	if c.CarryFrom != "" {
		image, err := e.snapshotImage(c.CarryFrom)
		if err != nil {
			return nil, err
		}
		carry.Image = image
		return carry, nil
	}
	if carry.Workload = c.ID(); carry.Workload == "" {
		return nil, fmt.Errorf("%s: the workload to carry %s from is not known", c.Addr, strings.Join(c.Carry, ", "))
	}
	return carry, nil
}

// snapshotBase is the image identity of the workload a snapshot is taken
// of, as its record has it now (before any replacement): the plan
// compares it with the agent's image when the agent resumes from it.
func (e *Executor) snapshotBase(c *planner.Change) string {
	var agent string
	if err := json.Unmarshal(c.After["agent"], &agent); err != nil || agent == "" {
		return ""
	}
	records, err := e.State.Records()
	if err != nil {
		return ""
	}
	for _, r := range records {
		if r.Addr == agent && r.Workload {
			return planner.ImageIdentity(r.AttrHashes)
		}
	}
	return ""
}

// snapshotImage is what a workload boots from to resume from a snapshot,
// as the snapshot's record has it (it may have been taken moments ago).
func (e *Executor) snapshotImage(addr string) (string, error) {
	records, err := e.State.Records()
	if err != nil {
		return "", err
	}
	for _, r := range records {
		if r.Addr == addr {
			if snap, _ := drivers.RecordedSnapshot(r.Computed); snap.Image != "" {
				return snap.Image, nil
			}
			return "", fmt.Errorf("snapshot %s has no image recorded", addr)
		}
	}
	return "", fmt.Errorf("snapshot %s is not in the state", addr)
}

// forget removes the record of a deleted object, unless the record has
// meanwhile been rewritten for a new object at the same address (a
// migration creates the new copy before it deletes the old one).
func (e *Executor) forget(addr, deletedID, runtime string) error {
	records, err := e.State.Records()
	if err != nil {
		return err
	}
	for _, r := range records {
		if r.Addr == addr && r.Runtime == runtime && (r.ID == deletedID || deletedID == "") {
			return e.State.Delete(addr)
		}
	}
	return nil
}

// move streams a snapshot just taken on one runtime into another, records
// it there, and removes the original: the state never points at both.
func (e *Executor) move(ctx context.Context, c *planner.Change) error {
	from, to := e.Runtimes[c.Runtime], e.Runtimes[c.MoveTo]
	if from == nil || to == nil {
		return fmt.Errorf("moving %s from runtime %q to %q: both must be configured", c.Addr, c.Runtime, c.MoveTo)
	}
	exporter, ok := drivers.As[drivers.SnapshotExporter](from.Driver)
	if !ok {
		return fmt.Errorf("moving %s: the %s driver cannot export snapshots", c.Addr, from.Driver.Name())
	}
	importer, ok := drivers.As[drivers.SnapshotImporter](to.Driver)
	if !ok {
		return fmt.Errorf("moving %s: the %s driver cannot import snapshots", c.Addr, to.Driver.Name())
	}
	records, err := e.State.Records()
	if err != nil {
		return err
	}
	var taken *state.Record
	var snap drivers.SnapshotResult
	for i := range records {
		if records[i].Addr == c.Addr {
			taken = &records[i]
			snap, _ = drivers.RecordedSnapshot(taken.Computed)
		}
	}
	if taken == nil || snap.Image == "" {
		return fmt.Errorf("moving %s: the snapshot is not recorded", c.Addr)
	}
	if err := e.intend(to.Driver, c.Addr, c.Kind, c.MoveTo, c.Object); err != nil {
		return err
	}
	// Stream: the exporter writes into a pipe the importer reads, so no
	// full copy of the image lands on disk in between.
	pr, pw := io.Pipe()
	exportErr := make(chan error, 1)
	go func() {
		err := exporter.ExportSnapshot(ctx, snap.Image, pw)
		pw.CloseWithError(err)
		exportErr <- err
	}()
	resp, err := importer.ImportSnapshot(ctx, drivers.ImportRequest{Lineage: e.Lineage, Object: c.Object, Hash: c.Fingerprint.Hash}, pr)
	pr.CloseWithError(err)
	if xerr := <-exportErr; xerr != nil && err == nil {
		err = xerr
	}
	if err != nil {
		return fmt.Errorf("moving %s from runtime %q to %q: %w", c.Addr, c.Runtime, c.MoveTo, err)
	}
	moved := *taken
	// Recorded on the runtime it moved to, with that runtime's engine
	// ("" when its driver tells none): the taken record's would make the
	// next plan think the two runtimes one engine, and move the agent's
	// records between them instead of migrating it.
	moved.Runtime, moved.Driver, moved.ID, moved.Engine = c.MoveTo, to.Driver.Name(), resp.ID, to.EngineIdentity()
	moved.Computed = resp.RecordComputed()
	if base := taken.Computed[planner.BaseKey]; base != "" {
		moved.Computed[planner.BaseKey] = base // the image it was taken of moves with it
	}
	if err := e.State.Put(moved); err != nil {
		return err
	}
	_, err = from.Driver.Apply(ctx, drivers.ApplyRequest{Op: drivers.OpDelete, Lineage: e.Lineage, ID: taken.ID, Object: drivers.Object{Addr: c.Addr, Kind: c.Kind}})
	if err != nil && e.Log != nil {
		e.Log.Warn("the moved snapshot's original could not be removed; the next plan removes it", "addr", c.Addr, "error", err)
	}
	return nil
}

// liveComputed is what a record rewrite records as computed values: the
// record's, with the instance and node the runtime reports now when it
// started a new instance of the workload by itself.
func liveComputed(c *planner.Change) map[string]string {
	computed := c.Prior.Computed
	lo := c.Live
	if lo == nil || lo.Instance == "" || computed[drivers.ComputedInstance] == lo.Instance {
		return computed
	}
	computed = maps.Clone(computed)
	if computed == nil {
		computed = map[string]string{}
	}
	computed[drivers.ComputedInstance] = lo.Instance
	if lo.Node != "" {
		computed[drivers.ComputedNode] = lo.Node
	}
	return computed
}
