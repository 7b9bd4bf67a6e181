package main

import (
	"context"
	"strings"
	"testing"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/docker/dockertest"
)

// TestE2ENeverStarted: an apply cut off between creating a container and
// starting it. The agent's container, made from this configuration, is
// started and recorded, not replaced, whether or not the state still
// records the one it replaced; a gateway, which gets its rules and its
// egress connection between create and start, is replaced.
func TestE2ENeverStarted(t *testing.T) {
	parallel(t)
	cli := dockertest.Client(t)
	image := dockertest.BusyboxImage(t, cli)
	dir := t.TempDir()
	// An egress block, so the bottle has a gateway.
	writeBottlefile(t, dir, strings.Replace(agentConfig, `workdir = "/tmp"`, "workdir = \"/tmp\"\n  egress {\n    allow = []\n  }", 1), image, `["sleep", "600"]`)
	mustRun(t, dir, "apply", "-auto-approve")
	lineage := lineageOf(t, cli, dir)
	one := func(addr string) container.Summary {
		t.Helper()
		list := containersWith(t, cli, drivers.LabelAddress+"="+addr, drivers.LabelLineage+"="+lineage)
		if len(list) != 1 {
			t.Fatalf("want one container for %s, got %+v", addr, list)
		}
		return list[0]
	}

	// The agent: the state records the old container; the new one is
	// created from the same configuration and never started.
	agentID := remakeUnstarted(t, cli, one("agent.coder").ID)
	// The gateway: not recorded at all, and made but never started.
	mustRun(t, dir, "state", "rm", "agent.coder.gateway")
	gatewayID := remakeUnstarted(t, cli, one("agent.coder.gateway").ID)

	r := mustRun(t, dir, "plan")
	for _, want := range []string{
		"# agent.coder will be started",
		"it was never started: it will be started and recorded, not replaced",
		"# agent.coder.gateway must be replaced",
		"the apply that made it was cut off before it was ready",
		"Plan: 1 to add, 0 to change, 1 to destroy, 1 to start.",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("plan lacks %q:\n%s", want, r)
		}
	}
	mustRun(t, dir, "apply", "-auto-approve")
	if c := one("agent.coder"); c.ID != agentID || c.State != "running" {
		t.Errorf("agent container: %s %s, want %s started", short(c.ID), c.State, short(agentID))
	}
	if c := one("agent.coder.gateway"); c.ID == gatewayID || c.State != "running" {
		t.Errorf("gateway container: %s %s, want a new one running", short(c.ID), c.State)
	}
	if r := mustRun(t, dir, "plan"); !strings.Contains(r.stdout, "No changes.") {
		t.Errorf("plan after apply is not empty:\n%s", r)
	}
	mustRun(t, dir, "destroy", "-auto-approve")
}

// remakeUnstarted replaces a container with one made from its config,
// labels, name and first network, and never started: what an apply killed
// between create and start leaves. It returns the new container's id.
func remakeUnstarted(t *testing.T, cli *client.Client, id string) string {
	t.Helper()
	ctx := context.Background()
	info, err := cli.ContainerInspect(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	netName := string(info.HostConfig.NetworkMode)
	ep := info.NetworkSettings.Networks[netName]
	if ep == nil {
		t.Fatalf("container %s is not on its network %s", short(id), netName)
	}
	// Made under another name before the old one goes, then renamed: the
	// image is never without a container, so another process's sweep of
	// unused gateway images cannot take it in between (CI saw "No such
	// image").
	name := strings.TrimPrefix(info.Name, "/")
	created, err := cli.ContainerCreate(ctx, info.Config, info.HostConfig, &network.NetworkingConfig{
		EndpointsConfig: map[string]*network.EndpointSettings{netName: {IPAMConfig: ep.IPAMConfig, Aliases: ep.Aliases}},
	}, nil, name+"-remade")
	if err != nil {
		t.Fatal(err)
	}
	if err := cli.ContainerRemove(ctx, id, container.RemoveOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	if err := cli.ContainerRename(ctx, created.ID, name); err != nil {
		t.Fatal(err)
	}
	return created.ID
}
