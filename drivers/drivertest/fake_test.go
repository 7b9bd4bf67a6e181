package drivertest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/zclconf/go-cty/cty"

	"github.com/bottlefile/bottlefile/drivers"
)

func TestFake(t *testing.T) {
	var f *Fake
	TestDriver(t, Harness{
		NewDriver: func(t *testing.T) drivers.Driver {
			f = &Fake{}
			if err := f.Configure(t.Context(), drivers.ConfigureRequest{Runtime: "default", Config: cty.EmptyObjectVal}); err != nil {
				t.Fatal(err)
			}
			return f
		},
		Image: "example.invalid/agent:1",
		Inert: true,
		StopOutside: func(t *testing.T, lineage string, obj drivers.LiveObject) {
			if !f.Stop(lineage, obj.Addr) {
				t.Fatalf("the fake has no %s to stop", obj.Addr)
			}
		},
	})
}

// TestFakeRefusals: a fake that declares less runs the refusal checks of
// the suite: what it does not declare, its Plan refuses.
func TestFakeRefusals(t *testing.T) {
	decl := FakeDeclaration()
	decl.Capabilities.Sidecars, decl.Capabilities.Build, decl.Capabilities.Healthcheck = false, false, false
	decl.Capabilities.Attributes = []string{"image", "command"}
	decl.Capabilities.InPlace = nil
	decl.Capabilities.Egress = drivers.EgressCapabilities{Names: true}
	f := &Fake{DriverName: "narrow", DeclareResponse: &decl}
	TestDriver(t, Harness{NewDriver: func(*testing.T) drivers.Driver { return f }, Image: "example.invalid/agent:1", Inert: true})
}

// brokenDrivers are fakes broken on purpose, each with a line the suite must
// print about it.
var brokenDrivers = map[string]struct {
	breakIt func(f *Fake)
	want    string
}{
	"unknown dependency": {
		func(f *Fake) {
			f.PlanFn = func(req drivers.PlanRequest) (drivers.PlanResponse, error) {
				resp, err := Expand(req.Agent)
				resp.Objects[1].DependsOn = append(resp.Objects[1].DependsOn, "agent.conformance.gateway")
				return resp, err
			}
		},
		"agent.conformance depends on agent.conformance.gateway, which is not in the plan",
	},
	"no workload": {
		func(f *Fake) {
			f.PlanFn = func(req drivers.PlanRequest) (drivers.PlanResponse, error) {
				resp, err := Expand(req.Agent)
				resp.Objects[1].Workload = false
				return resp, err
			}
		},
		"agent.conformance is not a workload",
	},
	"plan creates": {
		func(f *Fake) {
			f.PlanFn = func(req drivers.PlanRequest) (drivers.PlanResponse, error) {
				resp, err := Expand(req.Agent)
				_, _ = f.Apply(context.Background(), drivers.ApplyRequest{Op: drivers.OpCreate, Lineage: f.ReadRequest.Lineage, Object: resp.Objects[0]})
				return resp, err
			}
		},
		"Plan changed the runtime",
	},
	"object nobody created": {
		func(f *Fake) {
			f.BeforeApply = func(ctx context.Context, req drivers.ApplyRequest) error {
				if req.Op == drivers.OpCreate {
					f.Put(req.Lineage, drivers.LiveObject{Addr: "agent.conformance.extra", Kind: "volume", ID: "x"})
				}
				return nil
			}
		},
		"Read reports agent.conformance.extra, which was never created",
	},
	"delete fails once": {
		func(f *Fake) {
			var failed bool
			var first string // the suite's own lineage, created in first
			f.BeforeApply = func(ctx context.Context, req drivers.ApplyRequest) error {
				if first == "" {
					first = req.Lineage
				}
				if req.Op == drivers.OpDelete && req.Lineage == first && req.Object.Addr == "agent.conformance" && !failed {
					failed = true
					return errors.New("engine says no")
				}
				return nil
			}
		},
		"delete agent.conformance: engine says no",
	},
}

// TestConformanceCatchesBrokenDrivers runs the suite against each broken
// fake in a child process, so that the failures it must report do not fail
// this test, and checks that each was caught and cleaned up.
func TestConformanceCatchesBrokenDrivers(t *testing.T) {
	for name, tt := range brokenDrivers {
		t.Run(name, func(t *testing.T) {
			cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestBrokenDriverChild$", "-test.count=1")
			cmd.Env = append(os.Environ(), "DRIVERTEST_BROKEN="+name)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("the suite passed a broken driver:\n%s", out)
			}
			if !strings.Contains(string(out), tt.want) {
				t.Errorf("the suite did not say %q:\n%s", tt.want, out)
			}
			if !strings.Contains(string(out), "objects left: 0\n") {
				t.Errorf("the suite did not clean up:\n%s", out)
			}
		})
	}
}

// TestBrokenDriverChild is the child process of
// TestConformanceCatchesBrokenDrivers.
func TestBrokenDriverChild(t *testing.T) {
	name := os.Getenv("DRIVERTEST_BROKEN")
	if name == "" {
		t.Skip("run by TestConformanceCatchesBrokenDrivers")
	}
	f := &Fake{}
	brokenDrivers[name].breakIt(f)
	// Registered first, so it runs after the suite's own cleanup.
	t.Cleanup(func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		left := 0
		for _, l := range f.lineages {
			left += len(l.objects)
		}
		fmt.Printf("objects left: %d\n", left)
	})
	TestDriver(t, Harness{NewDriver: func(*testing.T) drivers.Driver { return f }, Image: "example.invalid/agent:1", Inert: true})
}

const lin = "0c7f1c1e-0000-4000-8000-000000000000"

func agentSpec(name string) drivers.AgentSpec {
	return drivers.AgentSpec{
		Addr: "agent." + name,
		Name: name,
		Workload: drivers.MustWorkload(map[string]cty.Value{
			"image":   cty.StringVal("acme/agent:1"),
			"command": cty.ListVal([]cty.Value{cty.StringVal("claude")}),
			"env":     cty.MapVal(map[string]cty.Value{"KEY": cty.StringVal("secret").Mark("sensitive")}),
			"cpus":    cty.NumberIntVal(2),
		}),
	}
}

// create plans the agent and creates its objects in order.
func create(t *testing.T, f *Fake, lineage, name string) map[string]string {
	t.Helper()
	resp, err := f.Plan(t.Context(), drivers.PlanRequest{Agent: agentSpec(name)})
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]string{}
	for _, o := range resp.Objects { // the network comes first
		r, err := f.Apply(t.Context(), drivers.ApplyRequest{Op: drivers.OpCreate, Lineage: lineage, Object: o, Hash: "h-" + o.Addr})
		if err != nil {
			t.Fatal(err)
		}
		ids[o.Addr] = r.ID
	}
	return ids
}

var ctyEqual = cmp.Comparer(func(a, b cty.Value) bool { return a.RawEquals(b) })

func TestFakePlan(t *testing.T) {
	f := &Fake{}
	spec := agentSpec("coder")
	resp, err := f.Plan(t.Context(), drivers.PlanRequest{Agent: spec})
	if err != nil {
		t.Fatal(err)
	}
	want := []drivers.Object{
		{Addr: "agent.coder.network", Kind: "network", Attrs: map[string]cty.Value{"internal": cty.True}},
		{
			Addr: "agent.coder", Kind: "container", Workload: true,
			DependsOn: []string{"agent.coder.network"},
			InPlace:   []string{"cpus", "memory"},
			Attrs: map[string]cty.Value{
				"image":      drivers.WorkloadAttr(spec.Workload, "image"),
				"command":    drivers.WorkloadAttr(spec.Workload, "command"),
				"entrypoint": cty.NullVal(cty.List(cty.String)),
				"env":        drivers.WorkloadAttr(spec.Workload, "env"), // still marked sensitive
				"workdir":    cty.NullVal(cty.String),
				"user":       cty.NullVal(cty.String),
				"cpus":       drivers.WorkloadAttr(spec.Workload, "cpus"),
				"memory":     cty.NullVal(cty.Number),
				"labels":     cty.NullVal(cty.Map(cty.String)),
				"network":    cty.StringVal("agent.coder.network"),
			},
		},
	}
	if diff := cmp.Diff(want, resp.Objects, ctyEqual); diff != "" {
		t.Errorf("Plan (-want +got):\n%s", diff)
	}
	if !f.PlanCalled || f.PlanCalls != 1 || f.PlanRequest.Agent.Addr != "agent.coder" {
		t.Errorf("Plan call not recorded: %v %d %q", f.PlanCalled, f.PlanCalls, f.PlanRequest.Agent.Addr)
	}

	build := agentSpec("built")
	build.Workload = drivers.MustWorkload(map[string]cty.Value{"build": drivers.BuildValue("/src/agent", "")})
	resp, err = f.Plan(t.Context(), drivers.PlanRequest{Agent: build})
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Objects[1].Attrs["build_dockerfile"]; !got.RawEquals(cty.StringVal("Dockerfile")) {
		t.Errorf("build_dockerfile = %#v", got)
	}

	noImage := agentSpec("bare")
	noImage.Workload = drivers.WithWorkloadAttr(noImage.Workload, "image", cty.NilVal)
	if _, err := f.Plan(t.Context(), drivers.PlanRequest{Agent: noImage}); err == nil {
		t.Error("Plan of an agent with neither image nor build succeeded")
	}
}

func TestFakeReadReturnsWhatApplyCreated(t *testing.T) {
	now := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	f := &Fake{Clock: func() time.Time { return now }}
	ids := create(t, f, lin, "coder")
	create(t, f, "other-lineage", "coder")
	resp, err := f.Read(t.Context(), drivers.ReadRequest{Lineage: lin})
	if err != nil {
		t.Fatal(err)
	}
	want := []drivers.LiveObject{
		{
			Addr: "agent.coder", Kind: "container", ID: ids["agent.coder"], Name: "bf-0c7f1c1e-agent.coder",
			Hash: "h-agent.coder", Running: true, ImageID: imageID(cty.StringVal("acme/agent:1")),
			State: drivers.StateRunning, Created: now, Started: now,
		},
		{
			Addr: "agent.coder.network", Kind: "network", ID: ids["agent.coder.network"], Name: "bf-0c7f1c1e-agent.coder.network",
			Hash: "h-agent.coder.network",
		},
	}
	if diff := cmp.Diff(want, resp.Objects); diff != "" {
		t.Errorf("Read (-want +got):\n%s", diff)
	}

	if ids["agent.coder"] == ids["agent.coder.network"] {
		t.Error("two objects got one ID")
	}
	// The caller may change what Read returned.
	resp.Objects[0].Running = false
	if !f.Objects(lin)[0].Running {
		t.Error("changing Read's result changed the fake")
	}

	// A workload that exited reports its code and when.
	later := now.Add(time.Minute)
	f.Clock = func() time.Time { return later }
	f.WriteFile(lin, "agent.coder", "/a")
	if !f.Exit(lin, "agent.coder", 3) {
		t.Fatal("Exit found no agent.coder")
	}
	resp, err = f.Read(t.Context(), drivers.ReadRequest{Lineage: lin, Sizes: true})
	if err != nil {
		t.Fatal(err)
	}
	got := resp.Objects[0]
	if got.Running || got.State != drivers.StateExited || got.ExitCode != 3 || !got.Finished.Equal(later) || got.Written == nil || *got.Written != 1000 {
		t.Errorf("after Exit(3): %+v", got)
	}
}

func TestFakeDrift(t *testing.T) {
	f := &Fake{}
	ids := create(t, f, lin, "coder")

	if !f.Stop(lin, "agent.coder") {
		t.Fatal("Stop found nothing")
	}
	if f.Objects(lin)[0].Running {
		t.Error("stopped workload still running")
	}
	if _, err := f.Apply(t.Context(), drivers.ApplyRequest{Op: drivers.OpStart, Lineage: lin, ID: ids["agent.coder"], Object: drivers.Object{Addr: "agent.coder"}}); err != nil {
		t.Fatal(err)
	}
	if !f.Objects(lin)[0].Running {
		t.Error("started workload not running")
	}
	if _, err := f.Apply(t.Context(), drivers.ApplyRequest{Op: drivers.OpStart, Lineage: lin, Object: drivers.Object{Addr: "agent.coder.network"}}); err == nil {
		t.Error("started a network")
	}

	if !f.Remove(lin, "agent.coder") {
		t.Fatal("Remove found nothing")
	}
	if f.Remove(lin, "agent.coder") {
		t.Error("Remove found a removed object")
	}
	got := f.Objects(lin)
	if len(got) != 1 || got[0].Addr != "agent.coder.network" {
		t.Errorf("after Remove: %v", got)
	}
	// The network is no longer in use: it can be deleted.
	if _, err := f.Apply(t.Context(), drivers.ApplyRequest{Op: drivers.OpDelete, Lineage: lin, ID: ids["agent.coder.network"], Object: drivers.Object{Addr: "agent.coder.network"}}); err != nil {
		t.Fatal(err)
	}

	leaked := drivers.LiveObject{Addr: "agent.ghost", Kind: "container", ID: "leaked-1", Hash: "h", Running: true}
	f.Put(lin, leaked)
	if diff := cmp.Diff([]drivers.LiveObject{leaked}, f.Objects(lin)); diff != "" {
		t.Errorf("after Put (-want +got):\n%s", diff)
	}
}

func TestFakeApplyRules(t *testing.T) {
	f := &Fake{}
	ids := create(t, f, lin, "coder")
	apply := func(req drivers.ApplyRequest) error {
		req.Lineage = lin
		_, err := f.Apply(t.Context(), req)
		return err
	}
	plan, _ := Expand(agentSpec("coder"))
	container := plan.Objects[1]

	tests := []struct {
		name    string
		req     drivers.ApplyRequest
		wantErr bool
	}{
		{"create twice", drivers.ApplyRequest{Op: drivers.OpCreate, Object: container}, true},
		{"create before its dependency", drivers.ApplyRequest{Op: drivers.OpCreate, Object: drivers.Object{Addr: "agent.x", Kind: "container", DependsOn: []string{"agent.x.network"}}}, true},
		{"create without a kind", drivers.ApplyRequest{Op: drivers.OpCreate, Object: drivers.Object{Addr: "agent.y"}}, true},
		{"delete a network in use", drivers.ApplyRequest{Op: drivers.OpDelete, ID: ids["agent.coder.network"], Object: drivers.Object{Addr: "agent.coder.network"}}, true},
		{"update a missing object", drivers.ApplyRequest{Op: drivers.OpUpdate, Object: drivers.Object{Addr: "agent.z"}}, true},
		{"update with a stale id", drivers.ApplyRequest{Op: drivers.OpUpdate, ID: "fake-999", Object: container}, true},
		{"unknown operation", drivers.ApplyRequest{Op: "explode", Object: container}, true},
		{"delete a missing object", drivers.ApplyRequest{Op: drivers.OpDelete, ID: "fake-999", Object: drivers.Object{Addr: "agent.gone"}}, false},
		{"delete with a stale id leaves the object", drivers.ApplyRequest{Op: drivers.OpDelete, ID: "fake-999", Object: container}, false},
		{"update", drivers.ApplyRequest{Op: drivers.OpUpdate, ID: ids["agent.coder"], Hash: "h2", Object: container}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := apply(tt.req)
			if (err != nil) != tt.wantErr {
				t.Errorf("Apply = %v, want error: %v", err, tt.wantErr)
			}
		})
	}
	objs := f.Objects(lin)
	if len(objs) != 2 || objs[0].Hash != "h2" || objs[0].ID != ids["agent.coder"] {
		t.Errorf("objects after the rules: %v", objs)
	}
	if _, err := f.Apply(t.Context(), drivers.ApplyRequest{Op: drivers.OpCreate, Object: container}); err == nil {
		t.Error("Apply without a lineage succeeded")
	}
	if _, err := f.Read(t.Context(), drivers.ReadRequest{}); err == nil {
		t.Error("Read without a lineage succeeded")
	}
}

func TestFakeFailApply(t *testing.T) {
	boom := errors.New("boom")
	f := &Fake{FailApply: map[string]error{"agent.coder": boom}}
	plan, _ := Expand(agentSpec("coder"))
	if _, err := f.Apply(t.Context(), drivers.ApplyRequest{Op: drivers.OpCreate, Lineage: lin, Object: plan.Objects[0]}); err != nil {
		t.Fatal(err)
	}
	_, err := f.Apply(t.Context(), drivers.ApplyRequest{Op: drivers.OpCreate, Lineage: lin, Object: plan.Objects[1]})
	if !errors.Is(err, boom) {
		t.Errorf("Apply = %v, want %v", err, boom)
	}
	if got := len(f.Objects(lin)); got != 1 {
		t.Errorf("%d objects after a failed create, want 1", got)
	}
	if f.ApplyCalls != 2 || len(f.ApplyRequests) != 2 || f.ApplyRequest.Object.Addr != "agent.coder" {
		t.Errorf("calls not recorded: %d %d %q", f.ApplyCalls, len(f.ApplyRequests), f.ApplyRequest.Object.Addr)
	}
}

func TestFakeHooks(t *testing.T) {
	f := &Fake{DriverName: "other"}
	if f.Name() != "other" {
		t.Errorf("Name() = %q", f.Name())
	}
	if (&Fake{}).Name() != "fake" {
		t.Error(`default Name() is not "fake"`)
	}
	if d, err := f.Factory()(nil); err != nil || d != f {
		t.Errorf("Factory gave %v, %v", d, err)
	}

	cfgErr := errors.New("bad runtime")
	f.ConfigureFn = func(req drivers.ConfigureRequest) error { return cfgErr }
	if err := f.Configure(t.Context(), drivers.ConfigureRequest{Runtime: "local"}); !errors.Is(err, cfgErr) {
		t.Errorf("Configure = %v", err)
	}
	if !f.ConfigureCalled || f.ConfigureRequest.Runtime != "local" {
		t.Error("Configure not recorded")
	}

	canned := &drivers.ReadResponse{Objects: []drivers.LiveObject{{Addr: "agent.canned"}}}
	f.ReadResponse = canned
	resp, err := f.Read(t.Context(), drivers.ReadRequest{Lineage: lin})
	if err != nil || len(resp.Objects) != 1 || resp.Objects[0].Addr != "agent.canned" {
		t.Errorf("Read with ReadResponse = %v, %v", resp, err)
	}
	readErr := errors.New("engine down")
	f.ReadFn = func(req drivers.ReadRequest) (drivers.ReadResponse, error) { return drivers.ReadResponse{}, readErr }
	if _, err := f.Read(t.Context(), drivers.ReadRequest{Lineage: lin}); !errors.Is(err, readErr) {
		t.Errorf("Read with ReadFn = %v", err)
	}
	if f.ReadCalls != 2 || f.ReadRequest.Lineage != lin {
		t.Errorf("Read not recorded: %d %q", f.ReadCalls, f.ReadRequest.Lineage)
	}

	f.PlanResponse = &drivers.PlanResponse{Objects: []drivers.Object{{Addr: "agent.canned"}}}
	if resp, _ := f.Plan(t.Context(), drivers.PlanRequest{Agent: agentSpec("coder")}); len(resp.Objects) != 1 {
		t.Errorf("Plan with PlanResponse = %v", resp)
	}

	f.ApplyResponse = &drivers.ApplyResponse{ID: "canned"}
	if resp, _ := f.Apply(t.Context(), drivers.ApplyRequest{Op: drivers.OpCreate, Lineage: lin, Object: drivers.Object{Addr: "a", Kind: "k"}}); resp.ID != "canned" {
		t.Errorf("Apply with ApplyResponse = %v", resp)
	}
	f.ApplyFn = func(req drivers.ApplyRequest) (drivers.ApplyResponse, error) {
		return drivers.ApplyResponse{ID: "fn"}, nil
	}
	if resp, _ := f.Apply(t.Context(), drivers.ApplyRequest{Op: drivers.OpCreate, Lineage: lin}); resp.ID != "fn" {
		t.Errorf("Apply with ApplyFn = %v", resp)
	}
	if got := f.Objects(lin); len(got) != 0 {
		t.Errorf("canned responses changed the fake: %v", got)
	}

	if err := f.Close(); err != nil || !f.CloseCalled {
		t.Errorf("Close = %v, recorded %v", err, f.CloseCalled)
	}
}

func TestFakeBeforeApplyBlocksUntilCancelled(t *testing.T) {
	started := make(chan struct{})
	f := &Fake{BeforeApply: func(ctx context.Context, req drivers.ApplyRequest) error {
		close(started)
		<-ctx.Done()
		return ctx.Err()
	}}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error)
	go func() {
		plan, _ := Expand(agentSpec("coder"))
		_, err := f.Apply(ctx, drivers.ApplyRequest{Op: drivers.OpCreate, Lineage: lin, Object: plan.Objects[0]})
		done <- err
	}()
	<-started
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Apply = %v, want context.Canceled", err)
	}
	if got := f.Objects(lin); len(got) != 0 {
		t.Errorf("a cancelled Apply created %v", got)
	}
}

func TestFakeConcurrent(t *testing.T) {
	f := &Fake{}
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Go(func() {
			name := fmt.Sprintf("a%02d", i)
			resp, err := f.Plan(context.Background(), drivers.PlanRequest{Agent: agentSpec(name)})
			if err != nil {
				t.Error(err)
				return
			}
			for _, o := range resp.Objects {
				if _, err := f.Apply(context.Background(), drivers.ApplyRequest{Op: drivers.OpCreate, Lineage: lin, Object: o, Hash: "h"}); err != nil {
					t.Error(err)
				}
			}
			if _, err := f.Read(context.Background(), drivers.ReadRequest{Lineage: lin}); err != nil {
				t.Error(err)
			}
			f.Stop(lin, "agent."+name)
		})
	}
	wg.Wait()
	objs := f.Objects(lin)
	if len(objs) != 100 {
		t.Fatalf("%d objects, want 100", len(objs))
	}
	seen := map[string]bool{}
	for _, o := range objs {
		if seen[o.ID] {
			t.Errorf("ID %s given twice", o.ID)
		}
		seen[o.ID] = true
	}
}

// populate creates n agents (2n objects) in the lineage.
func populate(tb testing.TB, f *Fake, n int) {
	for i := range n {
		resp, err := f.Plan(context.Background(), drivers.PlanRequest{Agent: agentSpec(fmt.Sprintf("a%05d", i))})
		if err != nil {
			tb.Fatal(err)
		}
		for _, o := range resp.Objects {
			if _, err := f.Apply(context.Background(), drivers.ApplyRequest{Op: drivers.OpCreate, Lineage: lin, Object: o, Hash: "h"}); err != nil {
				tb.Fatal(err)
			}
		}
	}
}

func TestFakeReadLarge(t *testing.T) {
	f := &Fake{}
	populate(t, f, 10_000)
	resp, err := f.Read(t.Context(), drivers.ReadRequest{Lineage: lin})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Objects) != 20_000 {
		t.Fatalf("Read returned %d objects", len(resp.Objects))
	}
	for i := 1; i < len(resp.Objects); i++ {
		if resp.Objects[i-1].Addr >= resp.Objects[i].Addr {
			t.Fatalf("Read not sorted at %d: %s, %s", i, resp.Objects[i-1].Addr, resp.Objects[i].Addr)
		}
	}
	// Read is one allocation once the sorted list is built.
	allocs := testing.AllocsPerRun(10, func() {
		if _, err := f.Read(context.Background(), drivers.ReadRequest{Lineage: lin}); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 1 {
		t.Errorf("Read of 20000 objects makes %v allocations, want 1", allocs)
	}
}

func BenchmarkFakeRead(b *testing.B) {
	f := &Fake{}
	populate(b, f, 10_000)
	b.ReportAllocs()
	for b.Loop() {
		resp, err := f.Read(context.Background(), drivers.ReadRequest{Lineage: lin})
		if err != nil || len(resp.Objects) != 20_000 {
			b.Fatal(err, len(resp.Objects))
		}
	}
}

func BenchmarkFakePlan(b *testing.B) {
	f := &Fake{}
	spec := agentSpec("coder")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := f.Plan(context.Background(), drivers.PlanRequest{Agent: spec}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkFakePopulate10kAgents(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		populate(b, &Fake{}, 10_000)
	}
}
