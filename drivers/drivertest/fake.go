package drivertest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/hcl/v2/hcldec"
	"github.com/zclconf/go-cty/cty"

	"github.com/bottlefile/bottlefile/addrs"
	"github.com/bottlefile/bottlefile/drivers"
)

// Kinds of the objects the Fake plans.
const (
	KindNetwork   = "network"
	KindContainer = "container"
)

var (
	_ drivers.Driver  = (*Fake)(nil)
	_ drivers.Closer  = (*Fake)(nil)
	_ drivers.Settler = (*Fake)(nil)
)

// Fake is an in-memory driver for tests. The zero value is ready to use and
// safe for concurrent use.
//
// It keeps the objects Apply created per lineage, keyed by address, so Read
// reports them with their ID, Hash and Running. Plan expands an agent as the
// docker driver does: a network "agent.NAME.network" and a container
// "agent.NAME" on it.
//
// Every method records its call (XCalled, XCalls, XRequest). A method with XFn
// set returns what XFn returns; otherwise one with XResponse set returns a
// copy of it; in both cases the fake's own behaviour, and its objects, are
// left alone. Set these fields before the driver is in use, and read the
// recorded ones once the calls have returned.
//
// Apply is faithful enough to catch ordering mistakes: creating an object
// whose dependency does not exist fails, as does deleting an object others
// still depend on (a network with a container on it). Deleting an object that
// is already gone succeeds, as deleting a removed container does.
type Fake struct {
	// DriverName is what Name returns: "fake" when empty.
	DriverName string

	// FailApply makes Apply fail for the addresses that are its keys, with
	// the error that is the value, changing nothing.
	FailApply map[string]error
	// BeforeApply, when set, runs at the start of every Apply that does not
	// go to ApplyFn, outside the fake's lock, with Apply's context: it can
	// block (until the context is cancelled, say) or fail the call with an
	// error, in which case nothing changes.
	BeforeApply func(ctx context.Context, req drivers.ApplyRequest) error
	// Now is the clock snapshots are stamped with; time.Now when nil.
	Now func() time.Time
	// Clock is the clock workloads' creates, starts and exits are stamped
	// with; time.Now when nil.
	Clock func() time.Time
	// Nodes, when set, makes the fake a runtime of several machines, like
	// swarm: a workload runs on Nodes[0] as an instance the fake numbers,
	// reported as LiveObject.Instance and recorded as the computed
	// instance and node; Restart starts a new instance elsewhere.
	Nodes []string
	// Unmeasured, when set, makes the fake a runtime that cannot size
	// what a workload wrote cheaply (docker on fuse-overlayfs): Written
	// says this reason instead of a size, and Read leaves sizes out.
	Unmeasured string
	// Forgotten lists the bottles ForgetBottle was asked to forget, as
	// "lineage agent.NAME", in call order.
	Forgotten []string
	// Engine is what EngineID returns: the identity of the engine the
	// fake stands for. Two runtimes served by one Fake with an Engine set
	// are one engine, as two runtime blocks on one docker engine are.
	Engine string

	DeclareCalled   bool
	DeclareResponse *drivers.Declaration

	ConfigureCalled  bool
	ConfigureCalls   int
	ConfigureRequest drivers.ConfigureRequest
	ConfigureFn      func(drivers.ConfigureRequest) error

	ReadCalled   bool
	ReadCalls    int
	ReadRequest  drivers.ReadRequest
	ReadResponse *drivers.ReadResponse
	ReadFn       func(drivers.ReadRequest) (drivers.ReadResponse, error)

	PlanCalled   bool
	PlanCalls    int
	PlanRequest  drivers.PlanRequest
	PlanResponse *drivers.PlanResponse
	PlanFn       func(drivers.PlanRequest) (drivers.PlanResponse, error)

	ApplyCalled bool
	ApplyCalls  int
	// ApplyRequest is the last request; ApplyRequests holds all of them in
	// the order Apply was called.
	ApplyRequest  drivers.ApplyRequest
	ApplyRequests []drivers.ApplyRequest
	ApplyResponse *drivers.ApplyResponse
	ApplyFn       func(drivers.ApplyRequest) (drivers.ApplyResponse, error)

	// SettleFn, when set, answers Settle; without it a workload settles
	// unless it is not running with an Exit (Exit).
	SettleFn    func(context.Context, drivers.SettleRequest) error
	SettleCalls int

	CloseCalled bool

	// ExecRequests holds every Exec request; ExecFn, when set, runs the
	// command instead of exiting 0.
	ExecRequests []drivers.ExecRequest
	ExecFn       func(drivers.ExecRequest) (int, error)

	// ActivityCalls counts Activity calls and ActivityRequest is the last
	// request; ActivityFn, when set, answers instead of what SetActivity
	// set (activity.go).
	ActivityCalls   int
	ActivityRequest drivers.ActivityRequest
	ActivityFn      func(drivers.ActivityRequest) (map[string]drivers.Activity, error)

	// mu guards every field of the Fake: the hooks above while a call reads
	// or records them, and the objects below.
	mu       sync.Mutex
	lineages map[string]*lineage
	lastID   uint64
	// activity is what SetActivity set, by lineage and agent address.
	activity map[[2]string]drivers.Activity
}

// lineage is the live objects of one lineage.
type lineage struct {
	objects map[string]*object // by address
	users   map[string]int     // address to the number of live objects that depend on it
	sorted  []drivers.LiveObject
	// files holds what each workload wrote (WriteFile); a snapshot copies
	// its workload's files into images, and a workload booted from that
	// image starts with them: enough to test resume without an engine.
	files  map[string][]string
	images map[string][]string
	// aside holds, by id, workloads set aside while their workspace is
	// carried into their replacement (drivers.Carry), until deleted.
	aside map[string]*object
	// logs holds each workload's log lines (Say), gone with the workload.
	logs map[string][]logLine
}

// logLine is one line a workload wrote.
type logLine struct {
	at     time.Time
	stderr bool
	text   string
}

// object is one live object and what Apply must check about it.
type object struct {
	live      drivers.LiveObject
	dependsOn []string
	workload  bool
}

// Factory returns a factory that always gives f, so a test can register the
// fake in a drivers.Registry and look at it afterwards.
func (f *Fake) Factory() drivers.Factory {
	return func(hclog.Logger) (drivers.Driver, error) { return f, nil }
}

// Name returns DriverName, or "fake".
func (f *Fake) Name() string {
	if f.DriverName == "" {
		return "fake"
	}
	return f.DriverName
}

// Declare returns DeclareResponse when it is set, and FakeDeclaration
// otherwise.
func (f *Fake) Declare() drivers.Declaration {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.DeclareCalled = true
	if f.DeclareResponse != nil {
		return *f.DeclareResponse
	}
	return FakeDeclaration()
}

// FakeDeclaration is what a Fake declares by default: a runtime block
// with no attributes, and every capability its Plan and Apply have (it
// accepts sidecars and egress rules and plans nothing for them), exec
// excepted.
func FakeDeclaration() drivers.Declaration {
	return drivers.Declaration{
		Schema: drivers.Schema{Runtime: hcldec.ObjectSpec{}},
		Capabilities: drivers.Capabilities{
			Sidecars:    true,
			Build:       true,
			Healthcheck: true,
			Attributes:  []string{"image", "command", "entrypoint", "env", "workdir", "user", "cpus", "memory", "pids", "labels"},
			InPlace:     []string{"cpus", "memory", "pids"},
			Egress: drivers.EgressCapabilities{
				Names: true, Wildcards: true, Ports: true, Addresses: true, CIDRs: true,
			},
			Snapshots: drivers.SnapshotCapabilities{Take: true, Format: drivers.FormatImage, Export: true, Import: true},
			Logs:      true,
			Exec:      true,
			Workspace: true,
			Activity:  true,
		},
	}
}

// Configure records the request and returns what ConfigureFn returns, or nil.
func (f *Fake) Configure(ctx context.Context, req drivers.ConfigureRequest) error {
	f.mu.Lock()
	f.ConfigureCalled = true
	f.ConfigureCalls++
	f.ConfigureRequest = req
	fn := f.ConfigureFn
	f.mu.Unlock()
	if fn != nil {
		return fn(req)
	}
	return ctx.Err()
}

// Close records the call.
func (f *Fake) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.CloseCalled = true
	return nil
}

// record notes a call of a method in its XCalled, XCalls and XRequest
// fields and returns its hooks XFn and XResponse, under the lock.
func record[Req, Fn, Resp any](f *Fake, req Req, called *bool, calls *int, last *Req, fn *Fn, canned *Resp) (Fn, Resp) {
	f.mu.Lock()
	defer f.mu.Unlock()
	*called = true
	*calls++
	*last = req
	return *fn, *canned
}

// Read lists the live objects of the lineage, sorted by address. An unknown
// lineage has none.
func (f *Fake) Read(ctx context.Context, req drivers.ReadRequest) (drivers.ReadResponse, error) {
	fn, canned := record(f, req, &f.ReadCalled, &f.ReadCalls, &f.ReadRequest, &f.ReadFn, &f.ReadResponse)
	if fn != nil {
		return fn(req)
	}
	if canned != nil {
		return drivers.ReadResponse{Objects: slices.Clone(canned.Objects)}, nil
	}
	if err := ctx.Err(); err != nil {
		return drivers.ReadResponse{}, err
	}
	if req.Lineage == "" {
		return drivers.ReadResponse{}, errors.New("fake: read: no lineage")
	}
	objs := f.Objects(req.Lineage)
	if req.Sizes && f.Unmeasured == "" {
		f.mu.Lock()
		files := f.lineageLocked(req.Lineage).files
		for i := range objs {
			if objs[i].State != "" {
				n := int64(1000 * len(files[objs[i].Addr]))
				objs[i].Written = &n
			}
		}
		f.mu.Unlock()
	}
	return drivers.ReadResponse{Objects: objs}, nil
}

var _ drivers.EngineIdentifier = (*Fake)(nil)

// EngineID returns Engine.
func (f *Fake) EngineID(context.Context) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.Engine, nil
}

// Plan expands the agent into its network and its container.
func (f *Fake) Plan(ctx context.Context, req drivers.PlanRequest) (drivers.PlanResponse, error) {
	fn, canned := record(f, req, &f.PlanCalled, &f.PlanCalls, &f.PlanRequest, &f.PlanFn, &f.PlanResponse)
	if fn != nil {
		return fn(req)
	}
	if canned != nil {
		return drivers.PlanResponse{Objects: slices.Clone(canned.Objects)}, nil
	}
	if err := ctx.Err(); err != nil {
		return drivers.PlanResponse{}, err
	}
	if err := drivers.Err(drivers.CheckAgent(f.Name(), f.Declare().Capabilities, req.Agent)); err != nil {
		return drivers.PlanResponse{}, err
	}
	return Expand(req.Agent)
}

// Expand is what the Fake plans for an agent: the network "ADDR.network"
// (internal) and the container ADDR on it, a workload whose attributes are
// the agent's values as they are (containerAttrs; a value left unset is a
// typed null), plus "network", the network's address. cpus and memory
// change in place. A build block adds "build_context" and
// "build_dockerfile".
func Expand(a drivers.AgentSpec) (drivers.PlanResponse, error) {
	if a.Addr == "" {
		return drivers.PlanResponse{}, errors.New("fake: plan: the agent has no address")
	}
	build := drivers.WorkloadAttr(a.Workload, "build")
	if build.IsNull() && drivers.WorkloadAttr(a.Workload, "image").IsNull() {
		return drivers.PlanResponse{}, fmt.Errorf("fake: plan: %s has neither an image nor a build", a.Addr)
	}
	network := addrs.NetworkOf(a.Addr)
	attrs := drivers.WorkloadAttrs(a.Workload, containerAttrs...)
	attrs["network"] = cty.StringVal(network)
	if hc := drivers.WorkloadAttr(a.Workload, "healthcheck"); !hc.IsNull() {
		// Recorded only when set, as the docker driver does, so that
		// the hash of a container without one is what it always was.
		attrs["healthcheck"] = hc
	}
	inPlace := []string{"cpus", "memory"}
	if pids := drivers.WorkloadAttr(a.Workload, "pids"); !pids.IsNull() {
		attrs["pids"] = pids // likewise
		inPlace = append(inPlace, "pids")
	}
	if !build.IsNull() {
		w, err := drivers.DecodeWorkload(a.Workload)
		if err != nil {
			return drivers.PlanResponse{}, fmt.Errorf("fake: plan: %s: %w", a.Addr, err)
		}
		dockerfile := w.Build.Dockerfile
		if dockerfile == "" {
			dockerfile = "Dockerfile"
		}
		attrs["build_context"] = cty.StringVal(w.Build.Context)
		attrs["build_dockerfile"] = cty.StringVal(dockerfile)
	}
	return drivers.PlanResponse{Objects: []drivers.Object{
		{
			Addr:  network,
			Kind:  KindNetwork,
			Attrs: map[string]cty.Value{"internal": cty.True},
		},
		{
			Addr:      a.Addr,
			Kind:      KindContainer,
			Attrs:     attrs,
			InPlace:   inPlace,
			DependsOn: []string{network},
			Workload:  true,
		},
	}}, nil
}

// containerAttrs are the workload attributes a fake container records.
var containerAttrs = []string{"image", "command", "entrypoint", "env", "workdir", "user", "cpus", "memory", "labels"}

// Apply performs one operation on the fake's objects.
func (f *Fake) Apply(ctx context.Context, req drivers.ApplyRequest) (drivers.ApplyResponse, error) {
	f.mu.Lock()
	f.ApplyCalled = true
	f.ApplyCalls++
	f.ApplyRequest = req
	f.ApplyRequests = append(f.ApplyRequests, req)
	fn, canned, before := f.ApplyFn, f.ApplyResponse, f.BeforeApply
	f.mu.Unlock()
	if fn != nil {
		return fn(req)
	}
	if canned != nil {
		resp := *canned
		resp.Computed = cloneMap(canned.Computed)
		return resp, nil
	}
	if before != nil {
		if err := before(ctx, req); err != nil {
			return drivers.ApplyResponse{}, err
		}
	}
	if err := ctx.Err(); err != nil {
		return drivers.ApplyResponse{}, err
	}

	f.mu.Lock()
	defer f.mu.Unlock()
	// Objects are kept by the address their names derive from, as an
	// engine keeps them by name: a moved agent's are where it was made.
	addr := req.NamedAddr(req.Object.Addr)
	if err, ok := f.FailApply[req.Object.Addr]; ok {
		return drivers.ApplyResponse{}, err
	}
	if req.Lineage == "" {
		return drivers.ApplyResponse{}, fmt.Errorf("fake: %s %s: no lineage", req.Op, addr)
	}
	if addr == "" {
		return drivers.ApplyResponse{}, fmt.Errorf("fake: %s: the object has no address", req.Op)
	}
	l := f.lineageLocked(req.Lineage)
	obj := l.objects[addr]
	switch req.Op {
	case drivers.OpCreate:
		if req.Object.Kind == drivers.KindSnapshot && obj == nil {
			return f.snapshotLocked(l, req)
		}
		var carried []string
		if c := req.Carry; c != nil {
			from := l.images[c.Image]
			if c.Workload != "" {
				if obj == nil || obj.live.ID != c.Workload {
					return drivers.ApplyResponse{}, fmt.Errorf("fake: create %s: no workload %s to carry the workspace from", addr, c.Workload)
				}
				// Set aside, as the docker driver renames it.
				if l.aside == nil {
					l.aside = map[string]*object{}
				}
				l.aside[obj.live.ID] = obj
				from = l.files[addr]
				delete(l.objects, addr)
				l.sorted, obj = nil, nil
			} else if _, ok := l.images[c.Image]; !ok {
				return drivers.ApplyResponse{}, fmt.Errorf("fake: create %s: no snapshot image %s to carry the workspace from", addr, c.Image)
			}
			for _, file := range from {
				for _, p := range c.Paths {
					if file == p || strings.HasPrefix(file, strings.TrimSuffix(p, "/")+"/") {
						carried = append(carried, file)
						break
					}
				}
			}
		}
		if obj != nil {
			return drivers.ApplyResponse{}, fmt.Errorf("fake: create %s: it already exists as %s", addr, obj.live.ID)
		}
		if req.Object.Kind == "" {
			return drivers.ApplyResponse{}, fmt.Errorf("fake: create %s: the object has no kind", addr)
		}
		deps := make([]string, 0, len(req.Object.DependsOn))
		for _, dep := range req.Object.DependsOn {
			if l.objects[req.NamedAddr(dep)] == nil {
				return drivers.ApplyResponse{}, fmt.Errorf("fake: create %s: it depends on %s, which does not exist", addr, dep)
			}
			deps = append(deps, req.NamedAddr(dep))
		}
		f.lastID++
		obj = &object{
			live: drivers.LiveObject{
				Addr:    req.Object.Addr,
				Kind:    req.Object.Kind,
				ID:      "fake-" + strconv.FormatUint(f.lastID, 10),
				Name:    objectName(req.Lineage, addr),
				Hash:    req.Hash,
				Running: req.Object.Workload,
				Runtime: req.Runtime,
			},
			dependsOn: deps,
			workload:  req.Object.Workload,
		}
		if obj.workload {
			now := f.clock()
			obj.live.State, obj.live.Created, obj.live.Started = drivers.StateRunning, now, now
			obj.live.ImageID = imageID(req.Object.Attrs["image"])
			if req.BootImage != "" {
				files, ok := l.images[req.BootImage]
				if !ok {
					return drivers.ApplyResponse{}, fmt.Errorf("fake: create %s: no snapshot image %s", addr, req.BootImage)
				}
				l.files[addr] = slices.Clone(files)
				obj.live.ImageID = req.BootImage
			}
			if req.Carry != nil {
				l.files[addr] = carried
			}
		}
		if obj.workload && len(f.Nodes) > 0 {
			f.lastID++
			obj.live.Instance, obj.live.Node = "task-"+strconv.FormatUint(f.lastID, 10), f.Nodes[0]
		}
		l.objects[addr] = obj
		for _, dep := range obj.dependsOn {
			l.users[dep]++
		}
	case drivers.OpUpdate, drivers.OpStart:
		if obj == nil {
			return drivers.ApplyResponse{}, fmt.Errorf("fake: %s %s: no such object", req.Op, addr)
		}
		if req.ID != "" && req.ID != obj.live.ID {
			return drivers.ApplyResponse{}, fmt.Errorf("fake: %s %s: no object with id %s (it is %s)", req.Op, addr, req.ID, obj.live.ID)
		}
		if req.Op == drivers.OpStart {
			if !obj.workload {
				return drivers.ApplyResponse{}, fmt.Errorf("fake: start %s: a %s is not a workload", addr, obj.live.Kind)
			}
			obj.live.Running, obj.live.Exit = true, nil
			obj.live.State, obj.live.Started, obj.live.Finished, obj.live.ExitCode = drivers.StateRunning, f.clock(), time.Time{}, 0
			if obj.live.Instance != "" {
				f.lastID++
				obj.live.Instance = "task-" + strconv.FormatUint(f.lastID, 10)
			}
		} else {
			obj.live.Hash = req.Hash
		}
	case drivers.OpDelete:
		if set := l.aside[req.ID]; set != nil {
			delete(l.aside, req.ID)
			for _, dep := range set.dependsOn {
				if l.users[dep]--; l.users[dep] <= 0 {
					delete(l.users, dep)
				}
			}
			return drivers.ApplyResponse{ID: req.ID}, nil
		}
		if obj == nil || req.ID != "" && req.ID != obj.live.ID {
			return drivers.ApplyResponse{ID: req.ID}, nil // already gone
		}
		if n := l.users[addr]; n > 0 {
			return drivers.ApplyResponse{}, fmt.Errorf("fake: delete %s: %d objects still depend on it", addr, n)
		}
		l.removeLocked(addr)
		delete(l.files, addr)
		delete(l.logs, addr)
		return drivers.ApplyResponse{ID: obj.live.ID}, nil
	default:
		return drivers.ApplyResponse{}, fmt.Errorf("fake: %s: unknown operation %q", addr, req.Op)
	}
	l.sorted = nil
	resp := drivers.ApplyResponse{ID: obj.live.ID}
	if obj.live.Instance != "" {
		resp.Computed = map[string]string{drivers.ComputedInstance: obj.live.Instance, drivers.ComputedNode: obj.live.Node}
	}
	return resp, nil
}

// Restart starts a new instance of a workload on node, as a cluster does
// when the node of the old one goes down (why says so): it runs from what
// the workload was created from, without the files the old one wrote. It
// reports whether the workload exists and has instances (Nodes).
func (f *Fake) Restart(lineage, addr, node, why string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	l := f.lineages[lineage]
	if l == nil || l.objects[addr] == nil || l.objects[addr].live.Instance == "" {
		return false
	}
	o := &l.objects[addr].live
	f.lastID++
	o.Instance, o.Node, o.Restarted = "task-"+strconv.FormatUint(f.lastID, 10), node, why
	o.Running, o.State, o.Started, o.Exit = true, drivers.StateRunning, f.clock(), nil
	if files, ok := l.images[o.ImageID]; ok {
		l.files[addr] = slices.Clone(files)
	} else {
		delete(l.files, addr)
	}
	l.sorted = nil
	return true
}

// Objects returns the live objects of a lineage, sorted by address, without
// recording a call.
func (f *Fake) Objects(lineage string) []drivers.LiveObject {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.objectsLocked(lineage)
}

// Stop stops a workload out of band, as a crash or `docker stop` would. It
// reports whether the object exists.
func (f *Fake) Stop(lineage, addr string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	l := f.lineages[lineage]
	if l == nil || l.objects[addr] == nil {
		return false
	}
	l.objects[addr].live.Running = false
	l.objects[addr].live.State, l.objects[addr].live.Finished = drivers.StateExited, f.clock()
	l.sorted = nil
	return true
}

// Drift marks an object as changed outside bottlefile, as a runtime that
// can tell reports it (LiveObject.Drift). It reports whether the object
// exists.
func (f *Fake) Drift(lineage, addr, why string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	l := f.lineages[lineage]
	if l == nil || l.objects[addr] == nil {
		return false
	}
	l.objects[addr].live.Drift = why
	l.sorted = nil
	return true
}

// Exit makes a workload exit with code, as its command ending would. It
// reports whether the object exists.
func (f *Fake) Exit(lineage, addr string, code int) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	l := f.lineages[lineage]
	if l == nil || l.objects[addr] == nil {
		return false
	}
	o := &l.objects[addr].live
	o.Running, o.State, o.ExitCode, o.Finished = false, drivers.StateExited, code, f.clock()
	l.sorted = nil
	return true
}

// ExitWith stops a workload as if it exited on its own (or, with
// e.Stopped, was stopped by someone), and Read reports e. It reports
// whether the object exists.
func (f *Fake) ExitWith(lineage, addr string, e drivers.Exit) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	l := f.lineages[lineage]
	if l == nil || l.objects[addr] == nil {
		return false
	}
	o := &l.objects[addr].live
	o.Running, o.State, o.ExitCode, o.Finished = false, drivers.StateExited, e.Code, e.At
	o.Exit = &e
	l.sorted = nil
	return true
}

// now is the snapshots' clock: Now, or time.Now.
func (f *Fake) now() time.Time {
	if f.Now != nil {
		return f.Now().UTC()
	}
	return time.Now().UTC()
}

// clock is the workloads' clock: Clock, or time.Now.
func (f *Fake) clock() time.Time {
	if f.Clock != nil {
		return f.Clock().UTC()
	}
	return time.Now().UTC()

}

// Settle answers with SettleFn when set; otherwise it fails for a
// workload that is not running and has an Exit, as a driver would for one
// that exited right after its start.
func (f *Fake) Settle(ctx context.Context, req drivers.SettleRequest) error {
	f.mu.Lock()
	f.SettleCalls++
	fn := f.SettleFn
	var exit *drivers.Exit
	if l := f.lineages[req.Lineage]; l != nil && l.objects[req.Object.Addr] != nil {
		if live := l.objects[req.Object.Addr].live; !live.Running && live.Exit != nil {
			exit = live.Exit
		}
	}
	f.mu.Unlock()
	if fn != nil {
		return fn(ctx, req)
	}
	if exit != nil {
		return &drivers.ExitError{Addr: req.Object.Addr, Exit: *exit}
	}
	return nil
}

// Remove deletes an object out of band, as `docker rm -f` would, even when
// other objects depend on it. It reports whether the object existed.
func (f *Fake) Remove(lineage, addr string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	l := f.lineages[lineage]
	if l == nil || l.objects[addr] == nil {
		return false
	}
	l.removeLocked(addr)
	return true
}

// Put stores obj in the lineage out of band, replacing any object at its
// address: an object left by a crash between create and record, or one whose
// live facts (image id, hash) changed. A new object is a workload when its
// Kind is KindContainer; a replaced one keeps its dependencies.
func (f *Fake) Put(lineage string, obj drivers.LiveObject) {
	f.mu.Lock()
	defer f.mu.Unlock()
	l := f.lineageLocked(lineage)
	if old := l.objects[obj.Addr]; old != nil {
		old.live = obj
	} else {
		l.objects[obj.Addr] = &object{live: obj, workload: obj.Kind == KindContainer}
	}
	l.sorted = nil
}

func (f *Fake) lineageLocked(name string) *lineage {
	l := f.lineages[name]
	if l == nil {
		if f.lineages == nil {
			f.lineages = make(map[string]*lineage)
		}
		l = &lineage{objects: make(map[string]*object), users: make(map[string]int), files: map[string][]string{}, images: map[string][]string{}, logs: map[string][]logLine{}}
		f.lineages[name] = l
	}
	return l
}

// objectsLocked returns a copy of the lineage's objects sorted by address. The
// sorted list is kept until the next change, so repeated reads of a large
// lineage cost one copy each.
func (f *Fake) objectsLocked(name string) []drivers.LiveObject {
	l := f.lineages[name]
	if l == nil || len(l.objects) == 0 {
		return nil
	}
	if l.sorted == nil {
		l.sorted = make([]drivers.LiveObject, 0, len(l.objects))
		for _, o := range l.objects {
			l.sorted = append(l.sorted, o.live)
		}
		slices.SortFunc(l.sorted, func(a, b drivers.LiveObject) int { return strings.Compare(a.Addr, b.Addr) })
	}
	return slices.Clone(l.sorted)
}

// removeLocked forgets the object at addr and releases its dependencies.
func (l *lineage) removeLocked(addr string) {
	obj := l.objects[addr]
	delete(l.objects, addr)
	for _, dep := range obj.dependsOn {
		if l.users[dep]--; l.users[dep] <= 0 {
			delete(l.users, dep)
		}
	}
	l.sorted = nil
}

// objectName is the runtime name of an object: a short lineage prefix, as
// the real drivers use, so that two checkouts never collide.
func objectName(lineage, addr string) string {
	return "bf-" + lineage[:min(8, len(lineage))] + "-" + addr
}

// imageID stands in for the id an engine gives an image reference.
func imageID(image cty.Value) string {
	image, _ = image.Unmark()
	if image == cty.NilVal || image.IsNull() || !image.IsKnown() || image.Type() != cty.String {
		return ""
	}
	sum := sha256.Sum256([]byte(image.AsString()))
	return "sha256:" + hex.EncodeToString(sum[:])
}

func cloneMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

var _ drivers.WrittenReader = (*Fake)(nil)

// snapshotLocked commits a workload: the snapshot remembers its files.
func (f *Fake) snapshotLocked(l *lineage, req drivers.ApplyRequest) (drivers.ApplyResponse, error) {
	if req.Agent == nil {
		return drivers.ApplyResponse{}, fmt.Errorf("fake: snapshot %s: no agent to commit", req.Object.Addr)
	}
	w := l.objects[req.Agent.Addr]
	if w == nil || !w.workload {
		return drivers.ApplyResponse{}, fmt.Errorf("fake: snapshot %s: %s has no workload to commit", req.Object.Addr, req.Agent.Addr)
	}
	f.lastID++
	id := "fake-" + strconv.FormatUint(f.lastID, 10)
	image := "fake-snapshot-" + id
	l.images[image] = slices.Clone(l.files[req.Agent.Addr])
	l.objects[req.Object.Addr] = &object{live: drivers.LiveObject{
		Addr: req.Object.Addr, Kind: drivers.KindSnapshot, ID: id, Name: image, Hash: req.Hash,
	}}
	l.sorted = nil
	return drivers.ApplyResponse{ID: id, Snapshot: &drivers.SnapshotResult{
		Image: image, Size: int64(1000 * len(l.images[image])), Created: f.now(), Source: w.live.ID,
	}}, nil
}

// WriteFile records that the workload at addr wrote a file.
func (f *Fake) WriteFile(lineage, addr, path string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	l := f.lineageLocked(lineage)
	l.files[addr] = append(l.files[addr], path)
}

// Files lists what the workload at addr has written or booted with.
func (f *Fake) Files(lineage, addr string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.lineageLocked(lineage).files[addr])
}

var _ drivers.BottleForgetter = (*Fake)(nil)

// ForgetBottle records the call in Forgotten.
func (f *Fake) ForgetBottle(lineage, agent string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Forgotten = append(f.Forgotten, lineage+" "+agent)
	return nil
}

// Written reports 1000 bytes per file the workload wrote, or, when
// Unmeasured is set, that it does not measure.
func (f *Fake) Written(ctx context.Context, lineage string, obj drivers.LiveObject) (drivers.Written, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.Unmeasured != "" {
		return drivers.Written{Since: obj.Created, Unmeasured: f.Unmeasured}, nil
	}
	return drivers.Written{Bytes: int64(1000 * len(f.lineageLocked(lineage).files[obj.Addr]))}, nil
}

var (
	_ drivers.SnapshotExporter = (*Fake)(nil)
	_ drivers.SnapshotImporter = (*Fake)(nil)
)

// ExportSnapshot writes a snapshot image's files as JSON, standing in for
// a docker-save stream.
func (f *Fake) ExportSnapshot(ctx context.Context, image string, w io.Writer) error {
	f.mu.Lock()
	var files []string
	found := false
	for _, l := range f.lineages {
		if fs, ok := l.images[image]; ok {
			files, found = fs, true
		}
	}
	f.mu.Unlock()
	if !found {
		return fmt.Errorf("fake: export: no snapshot image %s", image)
	}
	return json.NewEncoder(w).Encode(files)
}

// ImportSnapshot reads what ExportSnapshot wrote into a snapshot of this fake.
func (f *Fake) ImportSnapshot(ctx context.Context, req drivers.ImportRequest, r io.Reader) (drivers.ApplyResponse, error) {
	var files []string
	if err := json.NewDecoder(r).Decode(&files); err != nil {
		return drivers.ApplyResponse{}, fmt.Errorf("fake: import: %w", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	l := f.lineageLocked(req.Lineage)
	f.lastID++
	id := "fake-" + strconv.FormatUint(f.lastID, 10)
	image := "fake-snapshot-" + id
	l.images[image] = files
	l.objects[req.Object.Addr] = &object{live: drivers.LiveObject{Addr: req.Object.Addr, Kind: drivers.KindSnapshot, ID: id, Name: image, Hash: req.Hash}}
	l.sorted = nil
	return drivers.ApplyResponse{ID: id, Snapshot: &drivers.SnapshotResult{Image: image, Size: int64(1000 * len(files)), Created: time.Now().UTC()}}, nil
}

var _ drivers.LogReader = (*Fake)(nil)

// Say appends a line to the log of the workload at addr, stamped with
// Clock, as the workload writing it would.
func (f *Fake) Say(lineage, addr string, stderr bool, text string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	l := f.lineageLocked(lineage)
	l.logs[addr] = append(l.logs[addr], logLine{at: f.clock(), stderr: stderr, text: text})
}

// Logs copies what Say recorded for the workload, with LogOptions' Since,
// Tail and Timestamps; Follow returns at the end all the same. A workload
// the fake does not have, or an object that is no workload, is an error.
func (f *Fake) Logs(ctx context.Context, lineage string, obj drivers.LiveObject, opts drivers.LogOptions, stdout, stderr io.Writer) error {
	f.mu.Lock()
	l := f.lineageLocked(lineage)
	o := l.objects[obj.Addr]
	if o == nil || !o.workload {
		f.mu.Unlock()
		return fmt.Errorf("fake: %s keeps no log", obj.Addr)
	}
	var lines []logLine
	for _, ln := range l.logs[obj.Addr] {
		if opts.Since.IsZero() || !ln.at.Before(opts.Since) {
			lines = append(lines, ln)
		}
	}
	f.mu.Unlock()
	if opts.Tail > 0 && len(lines) > opts.Tail {
		lines = lines[len(lines)-opts.Tail:]
	}
	for _, ln := range lines {
		w := stdout
		if ln.stderr {
			w = stderr
		}
		if w == nil {
			continue
		}
		text := ln.text + "\n"
		if opts.Timestamps {
			text = ln.at.UTC().Format(time.RFC3339Nano) + " " + text
		}
		if _, err := io.WriteString(w, text); err != nil {
			return err
		}
	}
	return nil
}

var _ drivers.Execer = (*Fake)(nil)

// Exec runs ExecFn, when set, for a workload the fake has; without it the
// command exits 0 and prints nothing. It records the request in
// ExecRequests.
func (f *Fake) Exec(ctx context.Context, lineage string, obj drivers.LiveObject, req drivers.ExecRequest) (int, error) {
	f.mu.Lock()
	f.ExecRequests = append(f.ExecRequests, req)
	fn := f.ExecFn
	o := f.lineageLocked(lineage).objects[obj.Addr]
	f.mu.Unlock()
	if o == nil || !o.workload {
		return 0, fmt.Errorf("fake: exec in %s: no such workload", obj.Addr)
	}
	if !o.live.Running {
		return 0, fmt.Errorf("fake: exec in %s: it is not running", obj.Addr)
	}
	if fn != nil {
		return fn(req)
	}
	return 0, nil
}
