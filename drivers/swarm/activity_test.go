package swarm

import (
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/google/uuid"
	"github.com/zclconf/go-cty/cty"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/docker/dockertest"
	"github.com/bottlefile/bottlefile/drivers/swarm/swarmtest"
)

// TestActivityOnSwarm, on the test swarm: an agent on a worker, with
// its gateway wherever the cluster puts it, is read on the engines of
// their nodes. Nobody used it: last active in the past, not busy. A
// request through its gateway moves that forward, and so does the end of
// a bottlefile exec session in it; an exec session left open in it makes
// it busy; with its node's engine unreachable it is
// reported with a zero LastActive (never idle) and the look does not
// fail; stopped, it was last used when it was scaled to none.
func TestActivityOnSwarm(t *testing.T) {
	f := swarmtest.Start(t)
	d := fixtureDriver(t, f, true, map[string]cty.Value{"gateway_binary": cty.StringVal(dockertest.GatewayBinary(t))})
	lineage := uuid.NewString()
	f.Cleanup(t, lineage)
	ctx := t.Context()

	agent := placedAgent("idler", f.Busybox, []string{"node.labels.zone==c"}, []string{swarmtest.Outside + ":80"})
	plan, err := d.Plan(ctx, drivers.PlanRequest{Agent: agent})
	if err != nil {
		t.Fatal(err)
	}
	ids := applyAll(t, d, lineage, plan.Objects)
	defer deleteAll(t, d, lineage)
	svc, err := serviceName(lineage, "agent.idler")
	if err != nil {
		t.Fatal(err)
	}
	node, ctr := taskContainer(t, f, svc)
	cli := f.Client(t, node)
	req := drivers.ActivityRequest{Lineage: lineage, Agents: []string{"agent.idler", "agent.never-applied"}}
	look := func(what string, d *Driver) drivers.Activity {
		t.Helper()
		start := time.Now()
		got, err := d.Activity(ctx, req)
		if err != nil {
			t.Fatalf("%s: Activity: %v", what, err)
		}
		t.Logf("%s: %v in %v", what, got, time.Since(start).Round(time.Millisecond))
		if _, ok := got["agent.never-applied"]; ok || len(got) != 1 {
			t.Fatalf("%s: reported %v, want agent.idler only", what, got)
		}
		return got["agent.idler"]
	}

	first := look("first look", d)
	if first.Busy || first.LastActive.IsZero() || !first.LastActive.Before(time.Now()) {
		t.Errorf("first look, nobody used it: %+v, want not busy, last active in the past", first)
	}

	// A request through its gateway (a service of its own, read on the
	// engine of whichever node runs it).
	before := time.Now().Truncate(time.Second)
	if out := dockertest.Sh(t, cli, ctr, "timeout 5 wget -q -O - http://"+swarmtest.Outside+"/ 2>&1; echo rc=$?"); !strings.Contains(out, "outside-ok") {
		t.Fatalf("through the gateway: %q, want the outside host's page", out)
	}
	if a := look("after a request", d); a.Busy || a.LastActive.Before(before) {
		t.Errorf("after a request through its gateway at %v: %+v, want last active then or later, not busy", before, a)
	}

	// A bottlefile exec session that ended (recorded by the node's
	// engine driver, moved to the node's memory by the next look).
	live := readLive(t, d, lineage, "agent.idler")
	before = time.Now()
	if code, err := d.Exec(ctx, lineage, live, drivers.ExecRequest{Command: []string{"true"}}); err != nil || code != 0 {
		t.Fatalf("exec true: %d, %v", code, err)
	}
	if a := look("after bottlefile exec", d); a.Busy || a.LastActive.Before(before) {
		t.Errorf("after a bottlefile exec session at %v: %+v, want last active at its end, not busy", before, a)
	}

	// An exec session left open in its task container.
	x, err := cli.ContainerExecCreate(ctx, ctr, container.ExecOptions{Cmd: []string{"sleep", "600"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := cli.ContainerExecStart(ctx, x.ID, container.ExecStartOptions{Detach: true}); err != nil {
		t.Fatal(err)
	}
	before = time.Now().Truncate(time.Second)
	if a := look("with an exec session open", d); !a.Busy || a.LastActive.Before(before) {
		t.Errorf("with an exec session open: %+v, want busy, last active now", a)
	}

	// Its node's engine unreachable: not idle, and no error.
	hosts := map[string]cty.Value{}
	for i, n := range f.Nodes {
		hosts[n.Name] = cty.StringVal(n.Host)
		if i == node {
			hosts[n.Name] = cty.StringVal("unix:///nonexistent/bottlefile-test.sock")
		}
	}
	cut := fixtureDriver(t, f, true, map[string]cty.Value{attrNodeHosts: cty.MapVal(hosts)})
	if a := look("its node unreachable", cut); !a.LastActive.IsZero() {
		t.Errorf("with the engine of its node unreachable: %+v, want a zero LastActive (never idle)", a)
	}

	// Stopped: last used when it was scaled to none.
	var obj drivers.Object
	for _, o := range plan.Objects {
		if o.Addr == "agent.idler" {
			obj = o
		}
	}
	before = time.Now().Truncate(time.Second)
	if err := d.StopWorkload(ctx, drivers.StopRequest{Lineage: lineage, Object: obj, ID: ids["agent.idler"]}); err != nil {
		t.Fatal(err)
	}
	if a := look("stopped", d); a.Busy || a.LastActive.Before(before) || a.LastActive.After(time.Now()) {
		t.Errorf("stopped at %v: %+v, want not busy, last active when it was stopped", before, a)
	}
}
