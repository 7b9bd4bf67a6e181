package swarmtest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/swarm"

	"github.com/bottlefile/bottlefile/internal/nsfixture"
)

// KillNode kills node i's dockerd with SIGKILL, as a machine that dies
// would leave the cluster: the node stops answering, and the manager
// (with the fixture's one-second heartbeat) marks it down within seconds
// and places its tasks elsewhere. Its containerd and containers keep
// running, unreachable. The node comes back with RestartNode, which a
// cleanup of the test calls if the test did not.
func (f *Fixture) KillNode(t testing.TB, i int) {
	t.Helper()
	n := f.Nodes[i]
	if n.Manager {
		t.Fatalf("KillNode: %s is the manager; the fixture's swarm has one", n.Name)
	}
	dir := filepath.Join(f.Dir, n.Name)
	pid, err := f.dockerdPID(n.Name)
	if err != nil {
		t.Fatalf("KillNode %s: %v", n.Name, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "killed"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("KillNode %s: kill -9 %d: %v", n.Name, pid, err)
	}
	t.Cleanup(func() {
		if _, err := os.Stat(filepath.Join(dir, "killed")); err != nil {
			return // restarted
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := f.RestartNode(ctx, i); err != nil {
			t.Errorf("restarting %s after the test: %v", n.Name, err)
		}
	})
}

// RestartNode starts node i's dockerd again after KillNode and waits until
// the node is ready in the swarm again.
func (f *Fixture) RestartNode(ctx context.Context, i int) error {
	n := f.Nodes[i]
	dir := filepath.Join(f.Dir, n.Name)
	if err := os.WriteFile(filepath.Join(dir, "restart"), nil, 0o644); err != nil {
		return err
	}
	cli, err := newClient(n.Host)
	if err != nil {
		return err
	}
	defer cli.Close()
	if err := waitFor(ctx, func() error { _, err := cli.Ping(ctx); return err }, f.alive); err != nil {
		return fmt.Errorf("%s's dockerd did not answer again: %w", n.Name, err)
	}
	mgr, err := newClient(f.Manager().Host)
	if err != nil {
		return err
	}
	defer mgr.Close()
	return waitFor(ctx, func() error {
		node, _, err := mgr.NodeInspectWithRaw(ctx, n.ID)
		if err != nil {
			return err
		}
		if node.Status.State != swarm.NodeStateReady {
			return fmt.Errorf("%s is %s", n.Name, node.Status.State)
		}
		return nil
	}, f.alive)
}

// dockerdPID is the pid of a node's dockerd: the process named dockerd in
// the node's own cgroup.
func (f *Fixture) dockerdPID(node string) (int, error) {
	procs := filepath.Join(nsfixture.CgroupRoot, "pids", kind.CgroupName(f.id), node, "cgroup.procs")
	data, err := os.ReadFile(procs)
	if err != nil {
		return 0, err
	}
	for _, field := range strings.Fields(string(data)) {
		pid, err := strconv.Atoi(field)
		if err != nil {
			continue
		}
		comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		if strings.TrimSpace(string(comm)) == "dockerd" {
			return pid, nil
		}
	}
	return 0, fmt.Errorf("no dockerd among the processes of %s", procs)
}
