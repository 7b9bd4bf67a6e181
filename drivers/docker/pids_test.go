package docker

import (
	"slices"
	"testing"

	"github.com/zclconf/go-cty/cty"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/docker/dockertest"
)

// TestIntegrationPids: pids is the container's pids limit on the real
// engine, and a change updates the same container in place (as the
// declaration says), a removed limit lifted. A workload without pids
// records no pids attribute, so its config hash is what it was before
// pids existed.
func TestIntegrationPids(t *testing.T) {
	t.Parallel()
	e := newEngineTest(t)
	img := dockertest.BusyboxImage(t, e.cli)
	ctx := t.Context()

	plain := drivers.AgentSpec{Addr: "agent.plain", Name: "plain", Workload: drivers.MustWorkload(map[string]cty.Value{
		"image": cty.StringVal(img), "command": strList("sleep", "600"),
	})}
	if o := e.plan(plain)["agent.plain"]; o.Attrs["pids"] != cty.NilVal || slices.Contains(o.InPlace, "pids") {
		t.Errorf("a workload without pids records %v, in place %v: want no pids attribute", o.Attrs["pids"], o.InPlace)
	}

	agent := drivers.AgentSpec{Addr: "agent.coder", Name: "coder", Workload: drivers.MustWorkload(map[string]cty.Value{
		"image": cty.StringVal(img), "command": strList("sleep", "600"), "pids": cty.NumberIntVal(64),
	})}
	objs := e.plan(agent)
	if o := objs["agent.coder"]; !slices.Contains(o.InPlace, "pids") {
		t.Errorf("pids does not change in place: InPlace = %v", o.InPlace)
	}
	ids := e.createAll(objs)
	id := ids["agent.coder"].ID
	pidsLimit := func() int64 {
		t.Helper()
		info, err := e.cli.ContainerInspect(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if !info.State.Running {
			t.Error("container is not running")
		}
		if info.HostConfig.PidsLimit == nil {
			return 0
		}
		return *info.HostConfig.PidsLimit
	}
	if got := pidsLimit(); got != 64 {
		t.Errorf("created with pids limit %d, want 64", got)
	}

	upd := objs["agent.coder"]
	upd.Attrs = maps2(upd.Attrs)
	upd.Attrs["pids"] = cty.NumberIntVal(128)
	if got := e.apply(drivers.OpUpdate, upd, id); got.ID != id {
		t.Errorf("update replaced the container: %s -> %s", id, got.ID)
	}
	if got := pidsLimit(); got != 128 {
		t.Errorf("after update, pids limit %d, want 128", got)
	}
	upd.Attrs["pids"] = cty.NullVal(cty.Number)
	e.apply(drivers.OpUpdate, upd, id)
	if got := pidsLimit(); got > 0 {
		t.Errorf("after removing pids, the limit is %d, want none", got)
	}

	e.deleteAll(objs, ids)
	e.assertGone()
}
