package swarmtest

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/swarm"

	"github.com/bottlefile/bottlefile/internal/nsfixture"
)

func TestMain(m *testing.M) { os.Exit(Main(m)) }

// TestFixture: three ready nodes with their labels, and a service of the
// registry's busybox placed by a node label runs on that node, pulled by
// a worker that did not have it.
func TestFixture(t *testing.T) {
	f := Start(t)
	mgr := f.Client(t, 0)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	nodes, err := mgr.NodeList(ctx, swarm.NodeListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) != 3 {
		t.Fatalf("the swarm has %d nodes, want 3", len(nodes))
	}
	for _, n := range nodes {
		i := int(n.Description.Hostname[len(n.Description.Hostname)-1] - '1')
		if n.Status.State != swarm.NodeStateReady || n.Spec.Labels["pool"] != NodeLabels[i]["pool"] {
			t.Errorf("node %s: state %s, labels %v; want ready with %v", n.Description.Hostname, n.Status.State, n.Spec.Labels, NodeLabels[i])
		}
	}

	lineage := "swarmtest-" + strings.ReplaceAll(t.Name(), "/", "-")
	f.Cleanup(t, lineage)
	grace := time.Second
	svc, err := mgr.ServiceCreate(ctx, swarm.ServiceSpec{
		Annotations: swarm.Annotations{Name: "swarmtest-fixture", Labels: map[string]string{"io.bottlefile.lineage": lineage}},
		TaskTemplate: swarm.TaskSpec{
			ContainerSpec: &swarm.ContainerSpec{Image: f.Busybox, Command: []string{"sleep", "600"}, StopGracePeriod: &grace,
				Labels: map[string]string{"io.bottlefile.lineage": lineage}},
			Placement: &swarm.Placement{Constraints: []string{"node.labels.zone==c"}},
		},
		EndpointSpec: &swarm.EndpointSpec{Mode: swarm.ResolutionModeDNSRR},
	}, swarm.ServiceCreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var state, node string
	for ctx.Err() == nil {
		tasks, err := mgr.TaskList(ctx, swarm.TaskListOptions{Filters: filters.NewArgs(filters.Arg("service", svc.ID))})
		if err != nil {
			t.Fatal(err)
		}
		if len(tasks) > 0 {
			if s := string(tasks[0].Status.State); s != state {
				t.Logf("task %s: %s %s", s, tasks[0].Status.Message, tasks[0].Status.Err)
			}
			state, node = string(tasks[0].Status.State), tasks[0].NodeID
			if tasks[0].Status.State == swarm.TaskStateRunning {
				break
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	if state != string(swarm.TaskStateRunning) || node != f.Nodes[2].ID {
		t.Fatalf("task is %s on node %s, want running on node3 (%s)", state, node, f.Nodes[2].ID)
	}
	left, err := f.LineageObjects(ctx, lineage)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 2 { // the service, and its task's container on node3
		t.Errorf("LineageObjects = %q, want the service and one container", left)
	}
}

// TestRemoveStale: a fixture directory and cgroup whose owner is gone
// are removed by the next start; those of a live owner are kept.
func TestRemoveStale(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for cgroups")
	}
	if _, err := os.Stat(filepath.Join(nsfixture.CgroupRoot, "pids", "cgroup.procs")); err != nil {
		t.Skip("no cgroup v1 pids hierarchy")
	}
	// A pid that is not running: one past the highest in use is unlikely
	// to be, and an owner file that cannot match settles it.
	dead := "999999999"
	dir := filepath.Join(kind.BaseDir(), dead)
	cg := filepath.Join(nsfixture.CgroupRoot, "pids", kind.CgroupName(dead), "node1")
	for _, d := range []string{filepath.Join(dir, "node1", "data"), cg} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "owner"), []byte("12345"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "node1.pid"), []byte("1"), 0o644); err != nil { // not ours: never killed
		t.Fatal(err)
	}
	liveID := "1" // pid 1 lives; an owner file naming its start time keeps the fixture
	liveDir := filepath.Join(kind.BaseDir(), liveID)
	st1, _ := nsfixture.StartTime(1)
	if err := os.MkdirAll(liveDir, 0o755); err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(liveDir)
	if err := os.WriteFile(filepath.Join(liveDir, "owner"), []byte(st1), 0o644); err != nil {
		t.Fatal(err)
	}

	removeStale()

	for _, p := range []string{dir, filepath.Dir(cg)} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s is still there after removeStale (err %v)", p, err)
		}
	}
	if _, err := os.Stat(liveDir); err != nil {
		t.Errorf("the fixture of a live owner was removed: %v", err)
	}
}

// TestKillNode: node3's dockerd killed with SIGKILL makes the manager mark
// node3 down within the fixture's heartbeat, while its containerd lives on;
// RestartNode brings it back ready.
func TestKillNode(t *testing.T) {
	f := Start(t)
	mgr := f.Client(t, 0)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	f.KillNode(t, 2)
	for {
		n, _, err := mgr.NodeInspectWithRaw(ctx, f.Nodes[2].ID)
		if err != nil {
			t.Fatal(err)
		}
		if n.Status.State == swarm.NodeStateDown {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("node3 is still %s a minute after its dockerd was killed", n.Status.State)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("node3 down %.1fs after its dockerd was killed", time.Since(start).Seconds())
	if _, err := f.dockerdPID("node3"); err == nil {
		t.Error("a dockerd still runs on node3")
	}
	if err := f.RestartNode(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Client(t, 2).Ping(ctx); err != nil {
		t.Errorf("node3's engine after RestartNode: %v", err)
	}
}
