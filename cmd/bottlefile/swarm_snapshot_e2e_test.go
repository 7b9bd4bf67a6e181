package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
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
	if cerrdefs.IsNotFound(err) {
		return 0, "", false
	}
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

// e2eSwarmNodeLoss is issue 16's first promise on the three-node
// fixture (one-second heartbeat): an agent writes a file, snapshot take
// takes a snapshot (twice: keep_last = 1 prunes the first from the
// registry), and the dockerd of the node running it is killed with
// SIGKILL. Within a minute the cluster runs the agent elsewhere; plan says
// so in words and resumes it from the registry snapshot; after apply the
// file is there, and exec, logs and status reach it on its new node. Then
// destroy -include-snapshots leaves no tag of the lineage in the registry
// and nothing of it on any node.
func e2eSwarmNodeLoss(t *testing.T) {
	f := swarmtest.Start(t)
	dir := t.TempDir()
	writeBottlefile(t, dir, `%s
agent "coder" {
  runtime = runtime.fleet
  image   = %q
  command = ["sh", "-c", "echo coder up; exec sleep 600"]
  driver {
    placement = ["node.labels.pool==agents"]
  }
  snapshot_policy {
    keep_last = 1
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
	// keep_last = 1: the second take prunes the first, in the registry too.
	if r := mustRun(t, dir, "snapshot", "take", "agent.coder"); !strings.Contains(r.stdout, "agent.coder.snapshot.2") {
		t.Fatalf("snapshot take:\n%s", r)
	}
	if tags := registryTags(t, f, lineage); len(tags) != 1 || !strings.HasSuffix(tags[0], "-coder-snap:2") {
		t.Errorf("after keep_last = 1 pruned snapshot.1 the registry holds %v, want only snapshot.2's tag", tags)
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
	want := regexp.MustCompile(regexp.QuoteMeta(fmt.Sprintf("agent.coder was restarted by the cluster on %s from its image (node %s is down); it will be resumed from agent.coder.snapshot.2, taken ", f.Nodes[moved].Name, lost)) + `[0-9]{2}:[0-9]{2} UTC`)
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
	// exec, logs and status reach it on the node it now runs on.
	if r := mustRun(t, dir, "exec", "-T", "agent.coder", "--", "cat", "/root/notes"); r.stdout != "work\n" {
		t.Errorf("bottlefile exec on %s: %s", f.Nodes[node].Name, r)
	}
	if r := mustRun(t, dir, "logs", "agent.coder"); !strings.Contains(r.stdout, "coder up") {
		t.Errorf("bottlefile logs on %s:\n%s", f.Nodes[node].Name, r)
	}
	if r := mustRun(t, dir, "status"); !strings.Contains(r.stdout, "running on "+f.Nodes[node].Name) {
		t.Errorf("bottlefile status:\n%s", r)
	}
	if r := mustRun(t, dir, "plan"); !strings.Contains(r.stdout, "No changes.") {
		t.Errorf("the plan after the resume:\n%s", r.stdout)
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := f.RestartNode(ctx, lostIdx); err != nil {
		t.Fatal(err)
	}
	if tags := registryTags(t, f, lineage); len(tags) != 1 || !strings.HasSuffix(tags[0], "-coder-snap:2") {
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

// migrateSwarmConfig is one agent on runtime %[3]s, with a docker runtime
// "local" (the test's engine) and the swarm runtime "fleet" (%[1]s). Its
// image (%[2]s) is on the local engine only: on the swarm it boots from
// the snapshot a migration moves there.
const migrateSwarmConfig = `%[1]s
runtime "local" {
  driver = "docker"
}

agent "coder" {
  runtime = runtime.%[3]s
  image   = %[2]q
  command = ["sleep", "600"]
}
`

// e2eSwarmMigrate is issue 16's second promise: a bottle moved from a
// docker runtime to a swarm runtime and back, each time one reviewed plan
// (=> migrate with its snapshot), keeps a file written before the first
// move. Then snapshot export of the snapshot the first move left on the
// swarm, and snapshot import of it into another state whose agent is on
// the swarm, which that state's apply resumes from.
func e2eSwarmMigrate(t *testing.T) {
	cli := dockertest.Client(t)
	image := dockertest.BusyboxImage(t, cli)
	f := swarmtest.Start(t)
	dir := t.TempDir()
	runtime := swarmRuntime(f, "fleet")
	writeBottlefile(t, dir, migrateSwarmConfig, runtime, image, "local")
	mustRun(t, dir, "apply", "-auto-approve")
	lineage := lineageOf(t, cli, dir)
	f.Cleanup(t, lineage)
	t.Cleanup(func() { bottlefile(t, dir, "destroy", "-auto-approve", "-include-snapshots") })
	local := func() []string {
		var ids []string
		for _, c := range containersWith(t, cli, drivers.LabelLineage+"="+lineage, drivers.LabelAddress+"=agent.coder") {
			if c.State == "running" {
				ids = append(ids, c.ID)
			}
		}
		return ids
	}
	ids := local()
	if len(ids) != 1 {
		t.Fatalf("want the agent running on docker, got %v", ids)
	}
	dockertest.Sh(t, cli, ids[0], "echo moved > /root/notes")

	// docker -> swarm
	writeBottlefile(t, dir, migrateSwarmConfig, runtime, image, "fleet")
	r := mustRun(t, dir, "plan")
	wantAll(t, "the plan to the swarm", r.stdout,
		`# agent.coder will be migrated from runtime "local" to "fleet"`,
		"=> agent.coder (service)",
		"@ agent.coder.snapshot.1 (snapshot)",
		`agent.coder's filesystem is committed on runtime "local" and moved to "fleet" (migration)`,
	)
	mustRun(t, dir, "apply", "-auto-approve")
	svc := "bf-" + drivers.LineagePrefix(lineage) + "-coder"
	node, ctr, ok := runningTask(t, f, svc, -1)
	if !ok {
		t.Fatal("after the move to the swarm the agent runs nowhere")
	}
	if out := dockertest.Sh(t, f.Client(t, node), ctr, "cat /root/notes"); out != "moved\n" {
		t.Errorf("on the swarm /root/notes = %q", out)
	}
	if ids := local(); len(ids) != 0 {
		t.Errorf("the docker container still runs after the move: %v", ids)
	}
	if r := mustRun(t, dir, "plan"); !strings.Contains(r.stdout, "No changes.") {
		t.Errorf("the plan after the move to the swarm:\n%s", r.stdout)
	}

	// swarm -> docker
	dockertest.Sh(t, f.Client(t, node), ctr, "echo back >> /root/notes")
	writeBottlefile(t, dir, migrateSwarmConfig, runtime, image, "local")
	r = mustRun(t, dir, "plan")
	wantAll(t, "the plan back to docker", r.stdout,
		`will be migrated from runtime "fleet" to "local"`,
		"=> agent.coder (container)",
		"@ agent.coder.snapshot.2 (snapshot)",
	)
	mustRun(t, dir, "apply", "-auto-approve")
	ids = local()
	if len(ids) != 1 {
		t.Fatalf("after the move back the agent is not running on docker: %v", ids)
	}
	if out := dockertest.Sh(t, cli, ids[0], "cat /root/notes"); out != "moved\nback\n" {
		t.Errorf("back on docker /root/notes = %q", out)
	}
	if _, _, ok := runningTask(t, f, svc, -1); ok {
		t.Error("the service still runs on the swarm after the move back")
	}

	// snapshot.1 stayed on the swarm: export it, and import it into
	// another state whose agent runs there.
	tar := filepath.Join(t.TempDir(), "coder.tar")
	r = mustRun(t, dir, "snapshot", "export", "agent.coder.snapshot.1", "-o", tar)
	data, err := os.ReadFile(tar)
	if err != nil || !strings.Contains(string(data), "moved\n") {
		t.Fatalf("the export (%d bytes, %v) lacks the agent's file:\n%s", len(data), err, r)
	}
	other := t.TempDir()
	writeBottlefile(t, other, migrateSwarmConfig, runtime, image, "fleet")
	r = mustRun(t, other, "snapshot", "import", tar)
	wantAll(t, "the import", r.stdout, "agent.coder.snapshot.1")
	otherLineage, _ := readState(t, other)
	f.Cleanup(t, otherLineage)
	t.Cleanup(func() { bottlefile(t, other, "destroy", "-auto-approve", "-include-snapshots") })
	r = mustRun(t, other, "apply", "-auto-approve")
	node, ctr, ok = runningTask(t, f, "bf-"+drivers.LineagePrefix(otherLineage)+"-coder", -1)
	if !ok {
		t.Fatalf("the other state's agent runs nowhere:\n%s", r)
	}
	if out := dockertest.Sh(t, f.Client(t, node), ctr, "cat /root/notes"); out != "moved\n" {
		t.Errorf("resumed from the imported snapshot, /root/notes = %q", out)
	}
	for _, d := range []string{other, dir} {
		mustRun(t, d, "destroy", "-auto-approve", "-include-snapshots")
	}
	for _, l := range []string{lineage, otherLineage} {
		if left := registryTags(t, f, l); len(left) > 0 {
			t.Errorf("after destroy -include-snapshots the registry holds %v", left)
		}
	}
}
