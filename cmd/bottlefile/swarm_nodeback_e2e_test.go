package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/swarm"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/docker/dockertest"
	"github.com/bottlefile/bottlefile/drivers/swarm/swarmtest"
)

// e2eSwarmNodeBackBeforePlan is issue 26's third swarm fault: the
// dockerd of the node running the agent is killed after a snapshot and
// more writes, and comes back before anyone plans. The plan does not call
// that a stop outside bottlefile: it says the task was replaced, that
// what was written since the last snapshot is lost, and resumes from the
// snapshot; after apply the snapshot's file is there.
func e2eSwarmNodeBackBeforePlan(t *testing.T) {
	f := swarmtest.Start(t)
	dir := t.TempDir()
	writeBottlefile(t, dir, `%s
agent "coder" {
  runtime = runtime.fleet
  image   = %q
  command = ["sleep", "600"]
  driver {
    placement = ["node.labels.pool==agents"]
  }
}
`, swarmRuntime(f, "fleet"), f.Busybox)
	mustRun(t, dir, "apply", "-auto-approve")
	lineage, _ := readState(t, dir)
	f.Cleanup(t, lineage)
	t.Cleanup(func() { bottlefile(t, dir, "destroy", "-auto-approve", "-include-snapshots") })
	svc := "bf-" + drivers.LineagePrefix(lineage) + "-coder"
	node, ctr, ok := runningTask(t, f, svc, -1)
	if !ok {
		t.Fatal("the agent's task does not run")
	}
	cli := f.Client(t, node)
	dockertest.Sh(t, cli, ctr, "echo kept > /root/kept")
	mustRun(t, dir, "snapshot", "take", "agent.coder")
	dockertest.Sh(t, cli, ctr, "echo lost > /root/lost")

	f.KillNode(t, node)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := f.RestartNode(ctx, node); err != nil {
		t.Fatal(err)
	}
	// Until the cluster has settled on a task again, a plan may see it
	// starting; either way it must not say "stopped outside bottlefile".
	var r result
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Second) {
		r = mustRun(t, dir, "plan")
		t.Logf("plan after %s came back:\n%s", f.Nodes[node].Name, r.stdout)
		if strings.Contains(r.stdout, "stopped outside bottlefile") {
			tasks, _ := f.Client(t, 0).TaskList(ctx, swarm.TaskListOptions{Filters: filters.NewArgs(filters.Arg("service", svc))})
			for _, task := range tasks {
				t.Logf("task %s node %s desired %s state %s (%s) created %s", task.ID, task.NodeID, task.DesiredState, task.Status.State, task.Status.Message, task.Meta.CreatedAt)
			}
			t.Fatalf("the plan calls the lost task a stop outside bottlefile:\n%s", r.stdout)
		}
		if strings.Contains(r.stdout, "is lost") || time.Now().After(deadline) {
			break
		}
	}
	wantAll(t, "plan", r.stdout, "agent.coder was restarted by the cluster", "after agent.coder.snapshot.1 was taken is lost", "-/+ agent.coder")
	mustRun(t, dir, "apply", "-auto-approve")
	if got := mustRun(t, dir, "exec", "-T", "agent.coder", "--", "cat", "/root/kept").stdout; got != "kept\n" {
		t.Errorf("after the resume /root/kept = %q", got)
	}
}
