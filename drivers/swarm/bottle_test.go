package swarm

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	dockerswarm "github.com/docker/docker/api/types/swarm"
	"github.com/google/uuid"
	"github.com/zclconf/go-cty/cty"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/docker/dockertest"
	"github.com/bottlefile/bottlefile/drivers/swarm/swarmtest"
)

// applied is what applyAll made: each object's id by address.
type applied map[string]string

// applyAll creates the planned objects in dependency order and returns
// their ids.
func applyAll(t *testing.T, d drivers.Driver, lineage string, objs []drivers.Object) applied {
	t.Helper()
	ids := applied{}
	done := map[string]bool{}
	for len(done) < len(objs) {
		progress := false
		for _, o := range objs {
			if done[o.Addr] || slices.ContainsFunc(o.DependsOn, func(a string) bool { return !done[a] }) {
				continue
			}
			resp, err := d.Apply(t.Context(), drivers.ApplyRequest{Op: drivers.OpCreate, Lineage: lineage, Object: o, Hash: "h-" + o.Addr})
			if err != nil {
				t.Fatalf("create %s: %v", o.Addr, err)
			}
			ids[o.Addr] = resp.ID
			done[o.Addr] = true
			progress = true
		}
		if !progress {
			t.Fatalf("the plan's dependencies cannot be met: %v", objs)
		}
	}
	return ids
}

// deleteAll deletes what Read reports of the lineage: workloads first.
func deleteAll(t *testing.T, d drivers.Driver, lineage string) {
	t.Helper()
	read, err := d.Read(t.Context(), drivers.ReadRequest{Lineage: lineage})
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(read.Objects, func(a, b drivers.LiveObject) int {
		rank := func(o drivers.LiveObject) int {
			switch o.Kind {
			case kindService, kindGateway:
				return 0
			case kindImage:
				return 1
			}
			if isEgressNetworkAddr(o.Addr) {
				return 3
			}
			return 2
		}
		return rank(a) - rank(b)
	})
	for _, o := range read.Objects {
		if _, err := d.Apply(t.Context(), drivers.ApplyRequest{Op: drivers.OpDelete, Lineage: lineage, ID: o.ID, Object: drivers.Object{Addr: o.Addr, Kind: o.Kind}}); err != nil {
			t.Errorf("delete %s: %v", o.Addr, err)
		}
	}
}

func placedAgent(name, image string, placement []string, egress []string) drivers.AgentSpec {
	w := map[string]cty.Value{
		"image":   cty.StringVal(image),
		"command": cty.ListVal([]cty.Value{cty.StringVal("sleep"), cty.StringVal("600")}),
	}
	if egress != nil {
		w["egress"] = drivers.StringsValue(egress)
	}
	a := drivers.AgentSpec{Addr: "agent." + name, Name: name, Workload: drivers.MustWorkload(w)}
	a.Driver = cty.ObjectVal(map[string]cty.Value{"placement": drivers.StringsValue(placement)})
	return a
}

// TestGatewayOnSwarm: a bottle with an egress block on node3 reaches the
// outside host through its gateway service and not directly; a new
// allowlist replaces the gateway's task and not the agent's, and the
// request is then refused; deleting it all leaves nothing of the lineage
// on any node.
func TestGatewayOnSwarm(t *testing.T) {
	f := swarmtest.Start(t)
	d := fixtureDriver(t, f, true, map[string]cty.Value{"gateway_binary": cty.StringVal(dockertest.GatewayBinary(t))})
	lineage := uuid.NewString()
	f.Cleanup(t, lineage)
	ctx := t.Context()

	// The node's block, on the swarm's port and the registry's: the
	// gateway refuses the nodes and the registry all the same.
	nodes := swarmtest.Underlay + ".0/24"
	agent := placedAgent("egress", f.Busybox, []string{"node.labels.zone==c"}, []string{swarmtest.Outside + ":80", nodes + ":2377", nodes + ":5000"})
	// The effective ceiling (issue 25) goes into the service's arguments.
	agent.EgressCeiling = []string{swarmtest.Outside + ":80", nodes + ":2377", nodes + ":5000", "example.com"}
	plan, err := d.Plan(ctx, drivers.PlanRequest{Agent: agent})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	ids := applyAll(t, d, lineage, plan.Objects)
	t.Logf("created the bottle and its gateway in %.1fs", time.Since(start).Seconds())

	svc, err := serviceName(lineage, "agent.egress")
	if err != nil {
		t.Fatal(err)
	}
	gwSvc, err := serviceName(lineage, "agent.egress.gateway")
	if err != nil {
		t.Fatal(err)
	}
	if info, _, err := f.Client(t, 0).ServiceInspectWithRaw(ctx, gwSvc, dockerswarm.ServiceInspectOptions{}); err != nil {
		t.Error(err)
	} else if args := strings.Join(info.Spec.TaskTemplate.ContainerSpec.Args, " "); !strings.Contains(args, "-ceiling "+strings.Join(agent.EgressCeiling, ",")) {
		t.Errorf("the gateway service's arguments lack the ceiling: %s", args)
	}
	node, ctr := taskContainer(t, f, svc)
	if node != 2 {
		t.Errorf("the agent runs on node%d, want node3 (zone c)", node+1)
	}
	cli := f.Client(t, node)
	fetch := "timeout 5 wget -q -O - http://" + swarmtest.Outside + "/ 2>&1; echo rc=$?"
	if out := dockertest.Sh(t, cli, ctr, fetch); !strings.Contains(out, "outside-ok") {
		t.Errorf("through the gateway: %q, want the outside host's page", out)
	}
	if out := dockertest.Sh(t, cli, ctr, "unset http_proxy HTTP_PROXY; "+fetch); strings.Contains(out, "outside-ok") {
		t.Errorf("straight out of the internal overlay: %q, want no answer", out)
	}
	for _, url := range []string{
		"http://" + f.Nodes[0].Addr + ":2377/", // the manager's cluster port
		"http://" + f.Nodes[2].Addr + ":2377/", // its own node
		"http://" + f.Registry + "/v2/",        // the registry, not named by a rule
	} {
		if out := dockertest.Sh(t, cli, ctr, "timeout 5 wget -q -O - "+url+" 2>&1; echo rc=$?"); !strings.Contains(out, "403") {
			t.Errorf("through the gateway to %s, which a rule's block holds: %q, want a 403", url, out)
		}
	}

	// A new allowlist: the gateway's task is replaced, the agent's is not.
	changed := placedAgent("egress", f.Busybox, []string{"node.labels.zone==c"}, []string{"example.com"})
	changed.EgressCeiling = agent.EgressCeiling
	plan2, err := d.Plan(ctx, drivers.PlanRequest{Agent: changed})
	if err != nil {
		t.Fatal(err)
	}
	gw := plan2.Objects[slices.IndexFunc(plan2.Objects, func(o drivers.Object) bool { return o.Kind == kindGateway })]
	before, _, err := f.Client(t, 0).ServiceInspectWithRaw(ctx, svc, dockerswarm.ServiceInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	if _, err := d.Apply(ctx, drivers.ApplyRequest{Op: drivers.OpUpdate, Lineage: lineage, Object: gw, ID: ids[gw.Addr], Hash: "h2"}); err != nil {
		t.Fatalf("updating the allowlist: %v", err)
	}
	t.Logf("updated the allowlist in %.1fs", time.Since(start).Seconds())
	// The agent's service spec, not its task: a loaded swarm may
	// reschedule a task on its own, which is not the driver's doing.
	if after, _, err := f.Client(t, 0).ServiceInspectWithRaw(ctx, svc, dockerswarm.ServiceInspectOptions{}); err != nil {
		t.Error(err)
	} else if after.Version.Index != before.Version.Index {
		t.Errorf("the agent's service was updated (version %d to %d) with the allowlist", before.Version.Index, after.Version.Index)
	}
	node, ctr = taskContainer(t, f, svc)
	cli = f.Client(t, node)
	if out := dockertest.Sh(t, cli, ctr, fetch); strings.Contains(out, "outside-ok") || !strings.Contains(out, "403") {
		t.Errorf("after the allowlist dropped the host: %q, want a 403 from the gateway", out)
	}

	start = time.Now()
	deleteAll(t, d, lineage)
	assertNothingLeft(t, f, lineage)
	t.Logf("deleted it all in %.1fs", time.Since(start).Seconds())
}

// A rule names the registry by its host or its one address; a block that
// holds it does not.
func TestNamesRegistry(t *testing.T) {
	for _, tc := range []struct {
		allow    []string
		registry string
		want     bool
	}{
		{[]string{"10.250.0.254:5000"}, "10.250.0.254:5000", true},
		{[]string{"10.250.0.254"}, "10.250.0.254:5000/team", true},
		{[]string{"registry.internal:443"}, "registry.internal", true},
		{[]string{"10.250.0.0/24:5000"}, "10.250.0.254:5000", false},
		{[]string{"*.internal"}, "registry.internal:5000", false},
		{[]string{"github.com:443"}, "registry.internal:5000", false},
	} {
		if got := namesRegistry(tc.allow, tc.registry); got != tc.want {
			t.Errorf("namesRegistry(%q, %q) = %v, want %v", tc.allow, tc.registry, got, tc.want)
		}
	}
}

// taskContainer is the node index and container id of a service's task.
func taskContainer(t *testing.T, f *swarmtest.Fixture, service string) (int, string) {
	t.Helper()
	node, id, err := f.TaskContainer(t.Context(), service)
	if err != nil {
		t.Fatal(err)
	}
	return node, id
}

// assertNothingLeft fails unless no service, network, container or image
// of the lineage is on any node; containers of removed tasks go within
// seconds, so it waits for them a little.
func assertNothingLeft(t *testing.T, f *swarmtest.Fixture, lineage string) {
	t.Helper()
	var left []string
	deadline := time.Now().Add(20 * time.Second)
	for {
		var err error
		left, err = f.LineageObjects(context.Background(), lineage)
		if err != nil {
			t.Fatal(err)
		}
		if len(left) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if len(left) > 0 {
		t.Errorf("left of lineage %s:\n  %s", lineage, strings.Join(left, "\n  "))
	}
}

// TestUnplaceable: a task no node fits, and a task whose image no node
// can get, fail the create naming the constraint and the image, and leave
// no service behind.
func TestUnplaceable(t *testing.T) {
	f := swarmtest.Start(t)
	d := fixtureDriver(t, f, true, nil)
	lineage := uuid.NewString()
	f.Cleanup(t, lineage)
	for _, tc := range []struct {
		name, image string
		placement   []string
		want        []string
	}{
		{"nowhere", f.Busybox, []string{"node.labels.zone==nowhere"}, []string{"no node can run its task", "no suitable node", `"node.labels.zone==nowhere"`}},
		{"noimage", swarmtest.Registry + "/bottlefile-test/missing:1", nil, []string{"its task could not run", "bottlefile-test/missing:1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan, err := d.Plan(t.Context(), drivers.PlanRequest{Agent: placedAgent(tc.name, tc.image, tc.placement, nil)})
			if err != nil {
				t.Fatal(err)
			}
			var netObj, svcObj drivers.Object
			for _, o := range plan.Objects {
				switch o.Kind {
				case kindNetwork:
					netObj = o
				case kindService:
					svcObj = o
				}
			}
			if _, err := d.Apply(t.Context(), drivers.ApplyRequest{Op: drivers.OpCreate, Lineage: lineage, Object: netObj, Hash: "h"}); err != nil {
				t.Fatal(err)
			}
			_, err = d.Apply(t.Context(), drivers.ApplyRequest{Op: drivers.OpCreate, Lineage: lineage, Object: svcObj, Hash: "h"})
			if err == nil {
				t.Fatal("the create of a task that cannot run succeeded")
			}
			t.Logf("create failed: %v", err)
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("the error lacks %q: %v", w, err)
				}
			}
			read, rerr := d.Read(t.Context(), drivers.ReadRequest{Lineage: lineage})
			if rerr != nil {
				t.Fatal(rerr)
			}
			for _, o := range read.Objects {
				if o.Addr == svcObj.Addr {
					t.Errorf("the service of the failed create is left: %+v", o)
				}
			}
		})
	}
	deleteAll(t, d, lineage)
}

// TestBuiltImageOnWorker: a build block is built on the manager, pushed to
// the registry, and run by a worker that pulls it; deleting it removes the
// worker's copy too (node_hosts).
func TestBuiltImageOnWorker(t *testing.T) {
	f := swarmtest.Start(t)
	d := fixtureDriver(t, f, true, nil) // with node_hosts: every node's engine
	lineage := uuid.NewString()
	f.Cleanup(t, lineage)
	ctxDir := t.TempDir()
	dockerfile := "FROM " + f.Busybox + "\nRUN echo built-here > /built\nCMD [\"sleep\", \"600\"]\n"
	if err := os.WriteFile(filepath.Join(ctxDir, "Dockerfile"), []byte(dockerfile), 0o644); err != nil {
		t.Fatal(err)
	}
	a := placedAgent("built", f.Busybox, []string{"node.labels.zone==c"}, nil)
	a.Workload = drivers.WithWorkloadAttr(a.Workload, "image", cty.NullVal(cty.String))
	a.Workload = drivers.WithWorkloadAttr(a.Workload, "command", cty.NullVal(cty.List(cty.String)))
	a.Workload = drivers.WithWorkloadAttr(a.Workload, "build", drivers.BuildValue(ctxDir, "Dockerfile"))
	plan, err := d.Plan(t.Context(), drivers.PlanRequest{Agent: a})
	if err != nil {
		t.Fatal(err)
	}
	applyAll(t, d, lineage, plan.Objects)
	svc, _ := serviceName(lineage, "agent.built")
	node, ctr := taskContainer(t, f, svc)
	if node != 2 {
		t.Errorf("the built agent runs on node%d, want node3", node+1)
	}
	if out := dockertest.Sh(t, f.Client(t, node), ctr, "cat /built"); !strings.Contains(out, "built-here") {
		t.Errorf("the task does not run the built image: /built is %q", out)
	}
	deleteAll(t, d, lineage)
	assertNothingLeft(t, f, lineage)
}
