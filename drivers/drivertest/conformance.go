package drivertest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/zclconf/go-cty/cty"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/planner/dag"
)

// cleanupTimeout bounds how long TestDriver spends deleting what a failed run
// left behind.
const cleanupTimeout = 2 * time.Minute

// Harness is what the conformance suite needs to drive one kind of
// runtime.
type Harness struct {
	// NewDriver returns a driver already configured against a runtime the
	// test may use, with a state directory when the driver keeps
	// snapshots there.
	NewDriver func(t *testing.T) drivers.Driver
	// Image is an image reference that runtime can run without a registry
	// (a local image whose command may be "sleep 600").
	Image string
	// StopOutside stops a live workload behind the driver's back, as a
	// user or a reboot would (docker stop, smolvm machine stop). Nil skips
	// the start-after-stop check.
	StopOutside func(t *testing.T, lineage string, obj drivers.LiveObject)
	// ImportArchive is a docker-save tar of Image, for a driver that
	// imports snapshots but cannot export them; with an exporter, the
	// suite imports what it exported.
	ImportArchive func(t *testing.T) []byte
	// Outside starts (once per call) an HTTP server outside every bottle,
	// on the network the runtime's gateways reach the world through, and
	// returns its address as an egress rule names it ("IP:PORT") and the
	// text its page holds. Nil skips the egress cases of the boundary.
	Outside func(t *testing.T) (addr, body string)
	// RemoveOutside removes a live workload behind the driver's back, as
	// someone with the engine's CLI would (docker rm -f, docker service
	// rm). Nil skips the boundary's drift case.
	RemoveOutside func(t *testing.T, lineage string, obj drivers.LiveObject)
	// Inert says the runtime runs no process (the in-memory Fake): the
	// boundary cases, which run commands in workloads, are skipped.
	Inert bool
}

// TestDriver is the conformance suite every driver must pass. What it
// checks beyond the basics depends on what the driver declares
// (Declare): a capability declared is exercised, one not declared is
// refused by the generic capability check and by the driver's own Plan.
//
// The suite works in fresh random lineages, so it never touches anything
// else on the runtime, and deletes whatever it created when it fails. It
// checks, in order, that:
//   - the declaration is consistent: snapshot export, import and logs
//     are declared exactly when the driver implements SnapshotExporter,
//     SnapshotImporter and LogReader; attributes are workload attributes;
//   - every feature the driver does not declare (sidecars, build,
//     attributes, egress rules by kind) is refused by drivers.CheckAgent
//     with a message naming the driver, and by Plan; every kind of egress
//     rule it declares passes the check;
//   - Read of a lineage nothing was created in returns nothing;
//   - Plan of an agent returns the agent's own object, a workload at the
//     agent's address, and other objects below that address, whose
//     dependencies are all in the same response and form no cycle; Plan is
//     repeatable and changes nothing on the runtime;
//   - Apply creates the objects in dependency order, and Read then reports
//     each of them with the ID Apply returned and the hash it was given, with
//     the workload running, and nothing else;
//   - each declared in-place attribute (cpus, memory) changes with an
//     update that keeps the workload's ID and leaves it running;
//   - a workload stopped behind the driver's back reads as not running,
//     and a start brings it back under the same ID;
//   - with snapshots declared, a snapshot of the workload is taken, read,
//     exported and imported as declared (into another lineage, which the
//     first does not see), and deleted, twice without error;
//   - the same agent applied in a second lineage is reported only there,
//     and deleting it leaves the first lineage's objects alone;
//   - the boundary, capability by capability (boundary.go): exec runs
//     in a workload and returns its exit code; the log holds what the
//     agent printed; the agent reaches its sidecar by name; Settle returns
//     once a sidecar's healthcheck passes; the agent reaches the outside
//     server its egress allows through its gateway and not around it; an
//     agent whose egress does not allow it gets a 403 from its gateway;
//     another bottle's agent reaches no sidecar of the first; a workload
//     made again from a snapshot has what was written before it; one
//     removed behind the driver's back no longer reads as running;
//   - Apply deletes the objects in reverse order, after which Read returns
//     nothing, and deleting them again succeeds (deletes are idempotent).
func TestDriver(t *testing.T, h Harness) {
	t.Helper()
	d := h.NewDriver(t)
	image := h.Image
	lineage := uuid.NewString()
	agent := conformanceAgent(image)
	decl := d.Declare()
	caps := decl.Capabilities
	var planned []drivers.Object // in dependency order once Plan passed
	t.Cleanup(func() { deleteLineage(t, d, lineage, planned) })

	t.Run("Name", func(t *testing.T) {
		if d.Name() == "" {
			t.Error("Name() is empty")
		}
	})
	t.Run("Declaration", func(t *testing.T) { checkDeclaration(t, d, decl) })
	t.Run("Refusals", func(t *testing.T) { checkRefusals(t, d, caps, image) })

	t.Run("ReadUnknownLineage", func(t *testing.T) {
		resp, err := d.Read(t.Context(), drivers.ReadRequest{Lineage: lineage})
		if err != nil {
			t.Fatalf("Read: %v", err)
		}
		if len(resp.Objects) != 0 {
			t.Errorf("Read of a new lineage returned %d objects: %v", len(resp.Objects), resp.Objects)
		}
	})

	t.Run("Plan", func(t *testing.T) {
		resp, err := d.Plan(t.Context(), drivers.PlanRequest{Agent: agent})
		if err != nil {
			t.Fatalf("Plan: %v", err)
		}
		order, ok := checkPlan(t, agent.Addr, resp.Objects)
		if !ok {
			return
		}
		again, err := d.Plan(t.Context(), drivers.PlanRequest{Agent: agent})
		if err != nil {
			t.Fatalf("second Plan: %v", err)
		}
		if got, want := shape(again.Objects), shape(resp.Objects); got != want {
			t.Errorf("Plan is not repeatable:\nfirst:\n%s\nsecond:\n%s", want, got)
		}
		read, err := d.Read(t.Context(), drivers.ReadRequest{Lineage: lineage})
		if err != nil {
			t.Fatalf("Read after Plan: %v", err)
		}
		if len(read.Objects) != 0 {
			t.Fatalf("Plan changed the runtime: Read returns %v", read.Objects)
		}
		planned = order
	})
	if planned == nil {
		t.Fatal("no usable plan: Apply not tested")
	}

	ids := map[string]string{}
	created := t.Run("ApplyCreate", func(t *testing.T) {
		for _, o := range planned {
			resp, err := d.Apply(t.Context(), drivers.ApplyRequest{
				Op: drivers.OpCreate, Lineage: lineage, Object: o, Hash: testHash(lineage, o.Addr),
			})
			if err != nil {
				t.Fatalf("create %s: %v", o.Addr, err)
			}
			if resp.ID == "" {
				t.Fatalf("create %s returned no ID", o.Addr)
			}
			ids[o.Addr] = resp.ID
		}
		read, err := d.Read(t.Context(), drivers.ReadRequest{Lineage: lineage})
		if err != nil {
			t.Fatalf("Read: %v", err)
		}
		live := map[string]drivers.LiveObject{}
		for _, o := range read.Objects {
			if _, dup := live[o.Addr]; dup {
				t.Errorf("Read reports %s twice", o.Addr)
			}
			live[o.Addr] = o
		}
		for _, o := range planned {
			got, ok := live[o.Addr]
			if !ok {
				t.Errorf("Read does not report %s", o.Addr)
				continue
			}
			delete(live, o.Addr)
			if got.Kind != o.Kind {
				t.Errorf("%s: Kind %q, planned %q", o.Addr, got.Kind, o.Kind)
			}
			if got.ID != ids[o.Addr] {
				t.Errorf("%s: ID %q, Apply returned %q", o.Addr, got.ID, ids[o.Addr])
			}
			if want := testHash(lineage, o.Addr); got.Hash != want {
				t.Errorf("%s: Hash %q, want %q", o.Addr, got.Hash, want)
			}
			if o.Workload && !got.Running {
				t.Errorf("%s: the workload is not running after create", o.Addr)
			}
		}
		for addr := range live {
			t.Errorf("Read reports %s, which was never created", addr)
		}
		other, err := d.Read(t.Context(), drivers.ReadRequest{Lineage: uuid.NewString()})
		if err != nil {
			t.Fatalf("Read of another lineage: %v", err)
		}
		if len(other.Objects) != 0 {
			t.Errorf("Read of another lineage returned %v", other.Objects)
		}
	})
	if !created {
		return
	}

	workload := func(t *testing.T, l string) drivers.LiveObject {
		t.Helper()
		read, err := d.Read(t.Context(), drivers.ReadRequest{Lineage: l})
		if err != nil {
			t.Fatalf("Read: %v", err)
		}
		for _, o := range read.Objects {
			if o.Addr == agent.Addr {
				return o
			}
		}
		t.Fatalf("Read does not report %s", agent.Addr)
		return drivers.LiveObject{}
	}
	var self drivers.Object // the agent's workload as planned
	for _, o := range planned {
		if o.Addr == agent.Addr {
			self = o
		}
	}

	t.Run("UpdateInPlace", func(t *testing.T) {
		changes := map[string]func(a *drivers.AgentSpec){
			"cpus": func(a *drivers.AgentSpec) {
				a.Workload = drivers.WithWorkloadAttr(a.Workload, "cpus", cty.NumberIntVal(1))
			},
			"memory": func(a *drivers.AgentSpec) {
				a.Workload = drivers.WithWorkloadAttr(a.Workload, "memory", cty.NumberIntVal(256<<20))
			},
		}
		tested := 0
		for _, name := range caps.InPlace {
			change, ok := changes[name]
			if !ok {
				continue // egress: another object's, driver-specific
			}
			tested++
			changed := agent
			change(&changed)
			resp, err := d.Plan(t.Context(), drivers.PlanRequest{Agent: changed})
			if err != nil {
				t.Fatalf("Plan with %s changed: %v", name, err)
			}
			i := slices.IndexFunc(resp.Objects, func(o drivers.Object) bool { return o.Addr == agent.Addr })
			if i < 0 {
				t.Fatalf("Plan with %s changed has no %s", name, agent.Addr)
			}
			obj := resp.Objects[i]
			if !slices.Contains(obj.InPlace, name) {
				t.Errorf("%s is declared to change in place, but the workload's InPlace is %v", name, obj.InPlace)
				continue
			}
			up, err := d.Apply(t.Context(), drivers.ApplyRequest{
				Op: drivers.OpUpdate, Lineage: lineage, Object: obj, Hash: testHash(lineage, agent.Addr), ID: ids[agent.Addr],
			})
			if err != nil {
				t.Fatalf("update %s: %v", name, err)
			}
			if up.ID != "" && up.ID != ids[agent.Addr] {
				t.Errorf("update of %s returned ID %q, want the workload's %q", name, up.ID, ids[agent.Addr])
			}
			if got := workload(t, lineage); got.ID != ids[agent.Addr] || !got.Running {
				t.Errorf("after updating %s in place: %+v, want ID %q running", name, got, ids[agent.Addr])
			}
		}
		if tested == 0 {
			t.Skipf("the %s driver declares no workload attribute that changes in place", d.Name())
		}
	})

	t.Run("StartAfterStopOutside", func(t *testing.T) {
		if h.StopOutside == nil {
			t.Skip("the harness cannot stop a workload behind the driver's back")
		}
		before := workload(t, lineage)
		h.StopOutside(t, lineage, before)
		if got := workload(t, lineage); got.Running {
			t.Fatalf("a workload stopped outside still reads as running: %+v", got)
		}
		resp, err := d.Apply(t.Context(), drivers.ApplyRequest{
			Op: drivers.OpStart, Lineage: lineage, Object: self, Hash: testHash(lineage, agent.Addr), ID: before.ID,
		})
		if err != nil {
			t.Fatalf("start: %v", err)
		}
		if resp.ID != "" && resp.ID != before.ID {
			t.Errorf("start returned ID %q, want %q", resp.ID, before.ID)
		}
		if got := workload(t, lineage); !got.Running || got.ID != before.ID {
			t.Errorf("after start: %+v, want %q running", got, before.ID)
		}
	})

	t.Run("Snapshots", func(t *testing.T) {
		if !caps.Snapshots.Take {
			t.Skipf("the %s driver declares no snapshots", d.Name())
		}
		checkSnapshots(t, d, h, caps.Snapshots, lineage, agent)
	})

	t.Run("LineageIsolation", func(t *testing.T) {
		other := uuid.NewString()
		t.Cleanup(func() { deleteLineage(t, d, other, planned) })
		for _, o := range planned {
			if _, err := d.Apply(t.Context(), drivers.ApplyRequest{Op: drivers.OpCreate, Lineage: other, Object: o, Hash: testHash(other, o.Addr)}); err != nil {
				t.Fatalf("create %s in a second lineage: %v", o.Addr, err)
			}
		}
		first, second := addrIDs(t, d, lineage), addrIDs(t, d, other)
		if len(second) != len(planned) {
			t.Errorf("the second lineage reads %v, want its %d objects", second, len(planned))
		}
		for addr, id := range second {
			if first[addr] == id {
				t.Errorf("%s: both lineages report the same object %s", addr, id)
			}
		}
		deleteLineage(t, d, other, planned)
		if left := addrIDs(t, d, other); len(left) != 0 {
			t.Errorf("after deleting the second lineage it reads %v", left)
		}
		if got := addrIDs(t, d, lineage); len(got) != len(first) {
			t.Errorf("deleting the second lineage changed the first: %v, was %v", got, first)
		}
	})

	// What the driver promises about a bottle's walls, in bottles of
	// their own (boundary.go).
	t.Run("Boundary", func(t *testing.T) { checkBoundary(t, d, h, caps) })

	t.Run("ApplyDelete", func(t *testing.T) {
		for _, o := range slices.Backward(planned) {
			_, err := d.Apply(t.Context(), drivers.ApplyRequest{
				Op: drivers.OpDelete, Lineage: lineage, ID: ids[o.Addr],
				Object: drivers.Object{Addr: o.Addr, Kind: o.Kind},
			})
			if err != nil {
				t.Fatalf("delete %s: %v", o.Addr, err)
			}
		}
		read, err := d.Read(t.Context(), drivers.ReadRequest{Lineage: lineage})
		if err != nil {
			t.Fatalf("Read: %v", err)
		}
		if len(read.Objects) != 0 {
			t.Errorf("Read after deleting everything returned %v", read.Objects)
		}
		for _, o := range slices.Backward(planned) {
			_, err := d.Apply(t.Context(), drivers.ApplyRequest{
				Op: drivers.OpDelete, Lineage: lineage, ID: ids[o.Addr],
				Object: drivers.Object{Addr: o.Addr, Kind: o.Kind},
			})
			if err != nil {
				t.Errorf("deleting %s again (deletes are idempotent): %v", o.Addr, err)
			}
		}
	})
}

// conformanceAgent is the agent the suite plans: the image running
// "sleep 600", nothing else set.
func conformanceAgent(image string) drivers.AgentSpec {
	return drivers.AgentSpec{
		Addr: "agent.conformance",
		Name: "conformance",
		Workload: drivers.MustWorkload(map[string]cty.Value{
			"image":   cty.StringVal(image),
			"command": cty.ListVal([]cty.Value{cty.StringVal("sleep"), cty.StringVal("600")}),
		}),
	}
}

// addrIDs maps each object Read reports in the lineage to its ID.
func addrIDs(t *testing.T, d drivers.Driver, lineage string) map[string]string {
	t.Helper()
	read, err := d.Read(t.Context(), drivers.ReadRequest{Lineage: lineage})
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	out := map[string]string{}
	for _, o := range read.Objects {
		out[o.Addr] = o.ID
	}
	return out
}

// objectVertex puts a planned object in a dag.Graph.
type objectVertex struct{ obj drivers.Object }

func (v *objectVertex) Name() string { return v.obj.Addr }

// checkPlan checks the objects of one agent's plan, and returns them in
// dependency order when they can be applied.
func checkPlan(t *testing.T, agentAddr string, objs []drivers.Object) ([]drivers.Object, bool) {
	t.Helper()
	if len(objs) == 0 {
		t.Error("Plan returned no objects")
		return nil, false
	}
	ok := true
	fail := func(format string, args ...any) {
		t.Helper()
		t.Errorf(format, args...)
		ok = false
	}
	byAddr := map[string]*objectVertex{}
	for _, o := range objs {
		switch {
		case o.Addr == "":
			fail("an object has no address: %+v", o)
			continue
		case byAddr[o.Addr] != nil:
			fail("%s planned twice", o.Addr)
		case o.Addr != agentAddr && !strings.HasPrefix(o.Addr, agentAddr+"."):
			fail("%s is not below the agent's address %s", o.Addr, agentAddr)
		}
		if o.Kind == "" {
			fail("%s has no kind", o.Addr)
		}
		for name, v := range o.Attrs {
			if v == cty.NilVal {
				fail("%s: attribute %q is cty.NilVal; use a typed null", o.Addr, name)
			}
		}
		for _, name := range o.InPlace {
			if _, found := o.Attrs[name]; !found {
				fail("%s: InPlace names %q, which is not one of its attributes", o.Addr, name)
			}
		}
		byAddr[o.Addr] = &objectVertex{obj: o}
	}
	switch self := byAddr[agentAddr]; {
	case self == nil:
		fail("no object at the agent's address %s", agentAddr)
	case !self.obj.Workload:
		fail("%s is not a workload", agentAddr)
	}
	out, err := dependencyOrder(objs)
	if err != nil {
		fail("%v", err)
	}
	if !ok {
		return nil, false
	}
	return out, true
}

// dependencyOrder is objs in the order they can be created: each after
// what it depends on.
func dependencyOrder(objs []drivers.Object) ([]drivers.Object, error) {
	byAddr := map[string]*objectVertex{}
	for _, o := range objs {
		byAddr[o.Addr] = &objectVertex{obj: o}
	}
	g := &dag.Graph{}
	for _, v := range byAddr {
		g.Add(v)
		for _, dep := range v.obj.DependsOn {
			d := byAddr[dep]
			if d == nil {
				return nil, fmt.Errorf("%s depends on %s, which is not in the plan", v.obj.Addr, dep)
			}
			g.Connect(v, d)
		}
	}
	order, err := g.TopologicalOrder()
	if err != nil {
		return nil, fmt.Errorf("planned dependencies: %v", err)
	}
	out := make([]drivers.Object, len(order))
	for i, v := range order {
		out[i] = v.(*objectVertex).obj
	}
	return out, nil
}

// shape renders what must not change between two plans of the same agent:
// addresses, kinds, workloads and dependencies.
func shape(objs []drivers.Object) string {
	lines := make([]string, 0, len(objs))
	for _, o := range objs {
		deps := slices.Clone(o.DependsOn)
		slices.Sort(deps)
		workload := ""
		if o.Workload {
			workload = " workload"
		}
		lines = append(lines, o.Addr+" "+o.Kind+workload+" -> "+strings.Join(deps, ", "))
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// testHash is the config hash the suite labels an object with: distinct per
// object and per run, so a driver that mixes them up is caught.
func testHash(lineage, addr string) string {
	sum := sha256.Sum256([]byte(lineage + "\x00" + addr))
	return hex.EncodeToString(sum[:8])
}

// deleteLineage deletes whatever the suite left in its lineage: planned
// objects dependents first, then anything else, retrying while that makes
// progress. It runs as a cleanup, after t.Context is cancelled.
func deleteLineage(t *testing.T, d drivers.Driver, lineage string, planned []drivers.Object) {
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	read, err := d.Read(ctx, drivers.ReadRequest{Lineage: lineage})
	if err != nil {
		t.Errorf("cleanup: Read: %v", err)
		return
	}
	left := map[string]drivers.LiveObject{}
	for _, o := range read.Objects {
		left[o.Addr] = o
	}
	rank := map[string]int{}
	for i, o := range planned {
		rank[o.Addr] = i + 1 // later in dependency order: deleted earlier
	}
	var lastErr error
	for len(left) > 0 {
		todo := make([]drivers.LiveObject, 0, len(left))
		for _, o := range left {
			todo = append(todo, o)
		}
		slices.SortFunc(todo, func(a, b drivers.LiveObject) int {
			if ra, rb := rank[a.Addr], rank[b.Addr]; ra != rb {
				return rb - ra
			}
			return strings.Compare(b.Addr, a.Addr) // longer addresses, owned objects, first
		})
		progress := false
		for _, o := range todo {
			_, err := d.Apply(ctx, drivers.ApplyRequest{
				Op: drivers.OpDelete, Lineage: lineage, ID: o.ID,
				Object: drivers.Object{Addr: o.Addr, Kind: o.Kind},
			})
			if err != nil {
				lastErr = err
				continue
			}
			delete(left, o.Addr)
			progress = true
		}
		if !progress {
			break
		}
	}
	if len(left) > 0 {
		addrs := make([]string, 0, len(left))
		for a := range left {
			addrs = append(addrs, a)
		}
		slices.Sort(addrs)
		t.Errorf("cleanup: could not delete %s of lineage %s: %v", strings.Join(addrs, ", "), lineage, lastErr)
	}
}
