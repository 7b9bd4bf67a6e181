package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/swarm"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/docker/dockertest"
	"github.com/bottlefile/bottlefile/drivers/swarm/swarmtest"
)

// swarmRuntime is a runtime block named name for the fixture: its
// manager, its registry (and the registry's API as this process reaches
// it), and every node's engine.
func swarmRuntime(f *swarmtest.Fixture, name string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "runtime %q {\n  driver       = \"swarm\"\n  host         = %q\n  registry     = %q\n  registry_url = %q\n  node_hosts = {\n", name, f.Manager().Host, f.Registry, f.RegistryURL)
	for _, n := range f.Nodes {
		fmt.Fprintf(&b, "    %q = %q\n", n.Name, n.Host)
	}
	b.WriteString("  }\n}\n")
	return b.String()
}

// runningTask is the node index and container id of the running task of
// a service, as the manager lists it (a node that is down cannot be asked
// for its containers); ok is false while there is none, or while it runs
// on the node avoid.
func runningTask(t *testing.T, f *swarmtest.Fixture, service string, avoid int) (int, string, bool) {
	t.Helper()
	mgr := f.Client(t, 0)
	tasks, err := mgr.TaskList(t.Context(), swarm.TaskListOptions{Filters: filters.NewArgs(filters.Arg("service", service), filters.Arg("desired-state", "running"))})
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range tasks {
		if task.Status.State != swarm.TaskStateRunning || task.Status.ContainerStatus == nil {
			continue
		}
		for i, n := range f.Nodes {
			if n.ID == task.NodeID && i != avoid {
				return i, task.Status.ContainerStatus.ContainerID, true
			}
		}
	}
	return 0, "", false
}

// registryTags lists the tags of the lineage's repositories in the
// fixture's registry, as repo:tag.
func registryTags(t *testing.T, f *swarmtest.Fixture, lineage string) []string {
	t.Helper()
	get := func(path string, out any) {
		resp, err := http.Get(f.RegistryURL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode == http.StatusNotFound {
			return
		}
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %s %s", path, resp.Status, body)
		}
		if err := json.Unmarshal(body, out); err != nil {
			t.Fatal(err)
		}
	}
	var catalog struct{ Repositories []string }
	get("/v2/_catalog?n=1000", &catalog)
	var out []string
	for _, repo := range catalog.Repositories {
		if !strings.HasPrefix(repo, "bf-"+drivers.LineagePrefix(lineage)+"-") {
			continue
		}
		var tags struct{ Tags []string }
		get("/v2/"+repo+"/tags/list", &tags)
		for _, tag := range tags.Tags {
			out = append(out, repo+":"+tag)
		}
	}
	return out
}

// TestE2ESwarmNodeLoss is issue 16's first promise on the three-node
// fixture (one-second heartbeat): an agent writes a file, snapshot take
// takes a snapshot, and the dockerd of the node running it is killed with
// SIGKILL. Within a minute the cluster runs the agent elsewhere; plan says
// so in words and resumes it from the registry snapshot; after apply the
// file is there. Then destroy -include-snapshots leaves no tag of the
// lineage in the registry and nothing of it on any node.
func TestE2ESwarmNodeLoss(t *testing.T) {
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
	svc := "bf-" + drivers.LineagePrefix(lineage) + "-coder"
	node, ctr, ok := runningTask(t, f, svc, -1)
	if !ok {
		t.Fatal("the agent's task does not run")
	}
	lostIdx, lost := node, f.Nodes[node].Name
	dockertest.Sh(t, f.Client(t, node), ctr, "echo work > /root/notes")
	if r := mustRun(t, dir, "snapshot", "take", "agent.coder"); !strings.Contains(r.stdout, "agent.coder.snapshot.1") {
		t.Fatalf("snapshot take:\n%s", r)
	}

	killed := time.Now()
	f.KillNode(t, node)
	var moved int
	for {
		var ok bool
		if moved, _, ok = runningTask(t, f, svc, node); ok {
			break
		}
		if time.Since(killed) > time.Minute {
			t.Fatalf("a minute after %s's dockerd was killed, the agent runs nowhere else", lost)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("the cluster ran the agent on %s %.1fs after %s's dockerd was killed", f.Nodes[moved].Name, time.Since(killed).Seconds(), lost)

	r := mustRun(t, dir, "plan")
	want := regexp.MustCompile(regexp.QuoteMeta(fmt.Sprintf("agent.coder was restarted by the cluster on %s from its image (node %s is down); it will be resumed from agent.coder.snapshot.1, taken ", f.Nodes[moved].Name, lost)) + `[0-9]{2}:[0-9]{2} UTC`)
	if !want.MatchString(r.stdout) || !strings.Contains(r.stdout, "-/+ agent.coder") {
		t.Fatalf("the plan does not explain the node loss and resume:\n%s", r.stdout)
	}
	t.Logf("plan:\n%s", r.stdout)

	mustRun(t, dir, "apply", "-auto-approve")
	node, ctr, ok = runningTask(t, f, svc, node)
	if !ok {
		t.Fatal("after apply the agent does not run")
	}
	if out := dockertest.Sh(t, f.Client(t, node), ctr, "cat /root/notes"); out != "work\n" {
		t.Errorf("the resumed agent's /root/notes = %q, want the file written before the node was lost", out)
	}
	if r := mustRun(t, dir, "plan"); !strings.Contains(r.stdout, "No changes.") {
		t.Errorf("the plan after the resume:\n%s", r.stdout)
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := f.RestartNode(ctx, lostIdx); err != nil {
		t.Fatal(err)
	}
	if tags := registryTags(t, f, lineage); len(tags) != 1 || !strings.HasSuffix(tags[0], "-coder-snap:1") {
		t.Errorf("before destroy the registry holds %v, want the snapshot's tag", tags)
	}
	mustRun(t, dir, "destroy", "-auto-approve", "-include-snapshots")
	if left := registryTags(t, f, lineage); len(left) > 0 {
		t.Errorf("after destroy -include-snapshots the registry holds %v", left)
	}
	var left []string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		var err error
		if left, err = f.LineageObjects(ctx, lineage); err != nil {
			t.Fatal(err)
		}
		if len(left) == 0 || time.Now().After(deadline) {
			break
		}
	}
	if len(left) > 0 {
		t.Errorf("left on the swarm after destroy:\n  %s", strings.Join(left, "\n  "))
	}
}
