package docker

import (
	"context"
	"strings"
	"testing"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/zclconf/go-cty/cty"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/docker/dockertest"
	"github.com/bottlefile/bottlefile/drivers/engine"
)

// lateCreate runs before once, just before the next container create
// reaches the engine: the create of a killed apply landing after this
// run looked for the name.
type lateCreate struct {
	dockerAPI
	before func(ctx context.Context, name string)
}

func (l *lateCreate) ContainerCreate(ctx context.Context, cfg *container.Config, h *container.HostConfig, n *network.NetworkingConfig, p *ocispec.Platform, name string) (container.CreateResponse, error) {
	if f := l.before; f != nil {
		l.before = nil
		f(ctx, name)
	}
	return l.dockerAPI.ContainerCreate(ctx, cfg, h, n, p, name)
}

// TestIntegrationNameConflictAdopted: on the real engine, a container with
// the lineage's labels under the name bottlefile gives the address, made
// before the apply looked or landing between its look and its create, is
// taken over: removed by id, and the address created again, with no error.
// One of another lineage under that name is refused, saying so, and left
// alone.
func TestIntegrationNameConflictAdopted(t *testing.T) {
	t.Parallel()
	e := newEngineTest(t)
	img := dockertest.BusyboxImage(t, e.cli)
	agent := drivers.AgentSpec{Addr: "agent.c", Name: "c", Workload: drivers.MustWorkload(map[string]cty.Value{
		"image": cty.StringVal(img), "command": strList("sleep", "600"),
	})}
	objs := e.plan(agent)
	netObj, ctrObj := objs["agent.c.network"], objs["agent.c"]
	e.apply(drivers.OpCreate, netObj, "")
	name, err := engine.ObjectName(e.lineage, "agent.c", kindContainer)
	if err != nil {
		t.Fatal(err)
	}
	// squat makes a container of that name with the given lineage label.
	squat := func(ctx context.Context, lineage string) string {
		t.Helper()
		labels := map[string]string{drivers.LabelLineage: lineage, drivers.LabelAddress: "agent.c", drivers.LabelConfigHash: "old"}
		c, err := e.cli.ContainerCreate(ctx, &container.Config{Image: img, Cmd: []string{"sleep", "600"}, Labels: labels}, &container.HostConfig{NetworkMode: "none"}, nil, nil, name)
		if err != nil {
			t.Fatalf("making the squatting container: %v", err)
		}
		return c.ID
	}
	wrap := func(lineage string) *string {
		id := new(string)
		e.api.mu.Lock()
		e.api.api = &lateCreate{dockerAPI: e.api.api, before: func(ctx context.Context, _ string) { *id = squat(ctx, lineage) }}
		e.api.mu.Unlock()
		return id
	}
	check := func(what, oldID string, resp drivers.ApplyResponse) {
		t.Helper()
		info, err := e.cli.ContainerInspect(t.Context(), name)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if info.ID == oldID || info.ID != resp.ID || info.Config.Labels[drivers.LabelConfigHash] != "hash-of-agent.c" || !info.State.Running {
			t.Errorf("%s: %s holds %s (hash %s, running %v); want the new container %s, not %s", what, name, shortID(info.ID), info.Config.Labels[drivers.LabelConfigHash], info.State.Running, shortID(resp.ID), shortID(oldID))
		}
	}

	// Made before the apply looked.
	old := squat(t.Context(), e.lineage)
	resp := e.apply(drivers.OpCreate, ctrObj, "")
	check("a container of the lineage under the name", old, resp)
	e.apply(drivers.OpDelete, ctrObj, resp.ID)

	// Landing between the look and the create (the race a killed apply's
	// request makes): the engine answers Conflict, and it is taken over.
	late := wrap(e.lineage)
	resp = e.apply(drivers.OpCreate, ctrObj, "")
	if *late == "" {
		t.Fatal("the late create was not made")
	}
	check("a container of the lineage landing late under the name", *late, resp)
	e.apply(drivers.OpDelete, ctrObj, resp.ID)

	// Another lineage's: refused, and left alone.
	other := wrap("another-lineage")
	_, err = e.try(drivers.OpCreate, ctrObj, "")
	if err == nil || !strings.Contains(err.Error(), "is not this state's agent.c") {
		t.Fatalf("a container of another lineage under the name: %v; want it refused, saying so", err)
	}
	info, ierr := e.cli.ContainerInspect(t.Context(), name)
	if ierr != nil || info.ID != *other {
		t.Errorf("the other lineage's container was touched: %v", ierr)
	}
	e.cli.ContainerRemove(context.Background(), *other, container.RemoveOptions{Force: true})
	e.apply(drivers.OpDelete, netObj, "")
}
