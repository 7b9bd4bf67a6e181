package main

import (
	"context"
	"strings"
	"testing"

	"github.com/docker/docker/api/types/container"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/docker/dockertest"
)

const stoppedUpdateConfig = `
agent "coder" {
  image   = %q
  command = ["sleep", "600"]
  memory  = %q
}
`

// TestE2EStoppedAgentUpdatedAndStarted: an agent stopped by hand (docker
// stop) that also gets an in-place change (its memory) is updated and
// started by one apply, as its plan says; the next plan says No changes.
// Before, the apply updated it, said "Apply complete!" and left it
// stopped for a second apply to start.
func TestE2EStoppedAgentUpdatedAndStarted(t *testing.T) {
	parallel(t)
	cli := dockertest.Client(t)
	image := dockertest.BusyboxImage(t, cli)
	dir := t.TempDir()
	writeBottlefile(t, dir, stoppedUpdateConfig, image, "64MiB")
	mustRun(t, dir, "apply", "-auto-approve")
	lineage := lineageOf(t, cli, dir)
	ctrs := containersWith(t, cli, drivers.LabelAddress+"=agent.coder", drivers.LabelLineage+"="+lineage)
	if len(ctrs) != 1 || ctrs[0].State != "running" {
		t.Fatalf("want one running agent container, got %+v", ctrs)
	}
	id := ctrs[0].ID

	timeout := 1
	if err := cli.ContainerStop(context.Background(), id, container.StopOptions{Timeout: &timeout}); err != nil {
		t.Fatal(err)
	}
	writeBottlefile(t, dir, stoppedUpdateConfig, image, "128MiB")
	r := mustRun(t, dir, "plan")
	for _, want := range []string{"# agent.coder will be updated in place", "stopped outside bottlefile", "it will be started once updated in place", "Plan: 0 to add, 1 to change, 0 to destroy."} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("the plan for a stopped agent with a new memory lacks %q:\n%s", want, r)
		}
	}
	r = mustRun(t, dir, "apply", "-auto-approve")
	if !strings.Contains(r.stdout, "Apply complete!") {
		t.Errorf("apply: %s", r)
	}
	info, err := cli.ContainerInspect(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if !info.State.Running {
		t.Errorf("after one apply the agent is %s, not running:\n%s", info.State.Status, r)
	}
	if info.HostConfig.Memory != 128<<20 {
		t.Errorf("the agent's memory is %d, want 128 MiB: it was not updated in place", info.HostConfig.Memory)
	}
	wantNoChanges(t, dir, "after one apply updated and started the stopped agent")
	mustRun(t, dir, "destroy", "-auto-approve")
}
