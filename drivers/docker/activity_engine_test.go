package docker

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/zclconf/go-cty/cty"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/docker/dockertest"
	"github.com/bottlefile/bottlefile/drivers/engine"
	"github.com/bottlefile/bottlefile/drivers/gateway"
)

// TestIntegrationActivity, on the real engine: an agent nobody uses was
// last active in the past (when it started); a request through its
// gateway moves that forward; a bottlefile exec session moves it to the
// session's end; an open exec session makes its agent busy, and so does
// an agent burning CPU. It quotes the engine calls of each look.
func TestIntegrationActivity(t *testing.T) {
	t.Parallel()
	e := newEngineTest(t)
	img := dockertest.BusyboxImage(t, e.cli)
	ctx := t.Context()
	spec := func(name string, attrs map[string]cty.Value) drivers.AgentSpec {
		attrs["image"] = cty.StringVal(img)
		return drivers.AgentSpec{Addr: "agent." + name, Name: name, Workload: drivers.MustWorkload(attrs)}
	}
	objs := e.plan(spec("quiet", map[string]cty.Value{"command": strList("sleep", "600"), "egress": cty.ListValEmpty(cty.String)}))
	for k, v := range e.plan(spec("shell", map[string]cty.Value{"command": strList("sleep", "600")})) {
		objs[k] = v
	}
	// A fifth of a core: busy by any threshold, gentle on a shared engine.
	for k, v := range e.plan(spec("burner", map[string]cty.Value{"command": strList("sh", "-c", "while :; do :; done"), "cpus": cty.NumberFloatVal(0.2)})) {
		objs[k] = v
	}
	ids := e.createAll(objs)
	all := []string{"agent.quiet", "agent.shell", "agent.burner", "agent.never-applied"}
	look := func(what string) map[string]drivers.Activity {
		t.Helper()
		e.api.take()
		start := time.Now()
		got, err := e.d.Activity(ctx, drivers.ActivityRequest{Lineage: e.lineage, Agents: all})
		if err != nil {
			t.Fatalf("%s: Activity: %v", what, err)
		}
		calls := e.api.take()
		t.Logf("%s: %v, engine calls %v", what, time.Since(start).Round(time.Millisecond), calls)
		// One list; per running workload an inspect and at most a stats
		// call; per gateway a stat; an exec inspect per open exec.
		total := 0
		for _, n := range calls {
			total += n
		}
		if total > 1+2*3+1+calls["ContainerExecInspect"] || calls["ContainerList"] != 1 {
			t.Errorf("%s: %d engine calls (%v), want at most one list, two per workload (3) and one per gateway (1)", what, total, calls)
		}
		if _, ok := got["agent.never-applied"]; ok || len(got) != 3 {
			t.Errorf("%s: reported %v, want the three agents the engine runs", what, got)
		}
		for addr, a := range got {
			if a.Wrote != nil {
				t.Errorf("%s: %s: Wrote %v, want nil (the engine cannot tell cheaply)", what, addr, *a.Wrote)
			}
		}
		return got
	}

	first := look("first look")
	for _, addr := range []string{"agent.quiet", "agent.shell"} {
		a := first[addr]
		if a.Busy || a.LastActive.IsZero() || !a.LastActive.Before(time.Now()) {
			t.Errorf("first look: %s, never used: %+v, want not busy, last active in the past", addr, a)
		}
	}
	if a := first["agent.burner"]; !a.Busy {
		t.Errorf("first look: the agent burning a fifth of a core: %+v, want busy", a)
	}

	// One request through the quiet agent's gateway (refused: the
	// allowlist is empty; asking is using).
	before := time.Now()
	subnet, err := netip.ParsePrefix(ids["agent.quiet.network"].Computed["subnet"])
	if err != nil {
		t.Fatal(err)
	}
	gw, _ := lastAddr(subnet)
	out := dockertest.Sh(t, e.cli, ids["agent.quiet"].ID, fmt.Sprintf(
		`printf 'CONNECT example.invalid:443 HTTP/1.1\r\nHost: example.invalid:443\r\n\r\n' | nc -w 5 %s %d 2>&1`, gw, gateway.Port))
	if !strings.Contains(out, "403") {
		t.Errorf("wget through the gateway: %q, want its refusal (403)", out)
	}
	second := look("after a request")
	if a := second["agent.quiet"]; a.Busy || a.LastActive.Before(before) {
		t.Errorf("after a request through its gateway at %v: %+v, want last active then or later, not busy", before, a)
	}
	if a := second["agent.shell"]; !a.LastActive.Equal(first["agent.shell"].LastActive) {
		t.Errorf("an agent nobody used moved from %v to %v", first["agent.shell"].LastActive, a.LastActive)
	}
	if a := second["agent.burner"]; !a.Busy {
		t.Errorf("second look (one-shot, since the first): the burning agent: %+v, want busy", a)
	}

	// Asked only whether they were unused for the last hour, which each
	// was used in (each started in it): no CPU is read.
	hour := time.Now().Add(-time.Hour)
	e.api.take()
	got, err := e.d.Activity(ctx, drivers.ActivityRequest{Lineage: e.lineage, Agents: all,
		IdleSince: map[string]time.Time{"agent.quiet": hour, "agent.shell": hour, "agent.burner": hour}})
	if err != nil {
		t.Fatal(err)
	}
	calls := e.api.take()
	t.Logf("with IdleSince an hour ago: engine calls %v", calls)
	if n := calls["ContainerStats"] + calls["ContainerStatsOneShot"]; n != 0 || len(got) != 3 {
		t.Errorf("with IdleSince an hour ago: %d stats calls (%v), reported %v; want none, the three agents", n, calls, got)
	}
	for addr, a := range got {
		if !a.LastActive.After(hour) {
			t.Errorf("with IdleSince an hour ago: %s: %+v, want last active after it", addr, a)
		}
	}

	// A bottlefile exec session that ended.
	resp, err := e.d.Read(ctx, drivers.ReadRequest{Lineage: e.lineage, NoConfig: true})
	if err != nil {
		t.Fatal(err)
	}
	live := map[string]drivers.LiveObject{}
	for _, o := range resp.Objects {
		live[o.Addr] = o
	}
	before = time.Now()
	if code, err := e.d.Exec(ctx, e.lineage, live["agent.shell"], drivers.ExecRequest{Command: []string{"true"}}); err != nil || code != 0 {
		t.Fatalf("exec true: %d, %v", code, err)
	}
	if a := look("after bottlefile exec")["agent.shell"]; a.Busy || a.LastActive.Before(before) {
		t.Errorf("after a bottlefile exec session at %v: %+v, want last active at its end, not busy", before, a)
	}

	// An exec session left open.
	x, err := e.cli.ContainerExecCreate(ctx, ids["agent.shell"].ID, container.ExecOptions{Cmd: []string{"sleep", "600"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.cli.ContainerExecStart(ctx, x.ID, container.ExecStartOptions{Detach: true}); err != nil {
		t.Fatal(err)
	}
	before = time.Now()
	if a := look("with an exec session open")["agent.shell"]; !a.Busy || a.LastActive.Before(before) {
		t.Errorf("with an exec session open: %+v, want busy, last active now", a)
	}

	// Asked whether the burner was unused until now, under a memory with
	// no reading of it: one one-shot stats call, its CPU since its start.
	// (Last: a look under another memory takes the driver's own memory
	// of the burner, as it takes an exec session's end.)
	e.api.take()
	uses, err := e.d.ContainerActivity(ctx, "fresh", []engine.Watched{{Agent: "agent.burner", ID: ids["agent.burner"].ID, IdleSince: time.Now()}})
	if err != nil {
		t.Fatal(err)
	}
	if calls := e.api.take(); calls["ContainerStatsOneShot"] != 1 || calls["ContainerStats"] != 0 || len(uses) != 1 || !uses[0].Busy {
		t.Errorf("the burner, no reading remembered, IdleSince now: %+v, calls %v; want busy from one one-shot stats call", uses, calls)
	}

	// A stopped agent was last used when it stopped.
	if err := e.d.StopWorkload(ctx, drivers.StopRequest{Lineage: e.lineage, Object: objs["agent.burner"], ID: ids["agent.burner"].ID}); err != nil {
		t.Fatal(err)
	}
	if a := look("after stopping the burner")["agent.burner"]; a.Busy || a.LastActive.IsZero() || a.LastActive.After(time.Now()) {
		t.Errorf("a stopped agent: %+v, want not busy, last active when it stopped", a)
	}
}

// The calls activity makes beyond dockerAPI, counted.

func (c *countingAPI) ContainerStats(ctx context.Context, id string, stream bool) (container.StatsResponseReader, error) {
	c.count("ContainerStats")
	return c.api.(statsAPI).ContainerStats(ctx, id, stream)
}

func (c *countingAPI) ContainerStatsOneShot(ctx context.Context, id string) (container.StatsResponseReader, error) {
	c.count("ContainerStatsOneShot")
	return c.api.(statsAPI).ContainerStatsOneShot(ctx, id)
}

func (c *countingAPI) ContainerExecCreate(ctx context.Context, id string, o container.ExecOptions) (container.ExecCreateResponse, error) {
	c.count("ContainerExecCreate")
	return c.api.(execAPI).ContainerExecCreate(ctx, id, o)
}

func (c *countingAPI) ContainerExecAttach(ctx context.Context, id string, o container.ExecAttachOptions) (types.HijackedResponse, error) {
	c.count("ContainerExecAttach")
	return c.api.(execAPI).ContainerExecAttach(ctx, id, o)
}

func (c *countingAPI) ContainerExecInspect(ctx context.Context, id string) (container.ExecInspect, error) {
	c.count("ContainerExecInspect")
	return c.api.(execAPI).ContainerExecInspect(ctx, id)
}
