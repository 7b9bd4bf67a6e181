package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/client"

	"github.com/bottlefile/bottlefile/drivers/docker/dockertest"
)

// ownEngine is a dockerd of the test's own, in a network namespace of its
// own (a second dockerd in the host's namespace would take over docker0),
// with its own data root, exec root, socket and pid file. Killing it with
// -9 touches nothing else on the machine.
type ownEngine struct {
	t    *testing.T
	dir  string // short: unix socket paths are limited to 108 bytes
	ns   string // the network namespace
	sock string
	cmd  *exec.Cmd
}

// nswrap remounts the host's cgroup hierarchies inside the mount namespace
// `ip netns exec` makes (it remounts /sys, which hides them, and dockerd
// then fails "Devices cgroup isn't mounted"), then runs its arguments.
const nswrap = `#!/bin/sh
set -e
mount -t tmpfs -o mode=755 tmpfs /sys/fs/cgroup
grep -E '^cgroup2? /sys/fs/cgroup/' /proc/1/mounts | while read -r src mnt fstype opts rest; do
  mkdir -p "$mnt"
  o=$(echo "$opts" | tr , '\n' | grep -vE '^(rw|relatime)$' | paste -sd, -)
  if [ "$fstype" = cgroup2 ]; then mount -t cgroup2 cgroup2 "$mnt"; else mount -t cgroup -o "$o" cgroup "$mnt"; fi
done
exec "$@"
`

// startOwnEngine starts the engine and registers its teardown: every
// process in its namespace is killed, the namespace and directory removed.
func startOwnEngine(t *testing.T) *ownEngine {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("BOTTLEFILE_REQUIRE_DOCKER") != "" {
			t.Fatal("an engine of the test's own needs root")
		}
		t.Skip("an engine of the test's own needs root")
	}
	for _, tool := range []string{"ip", "dockerd"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s: %v", tool, err)
		}
	}
	dir, err := os.MkdirTemp("", "bfk")
	if err != nil {
		t.Fatal(err)
	}
	e := &ownEngine{t: t, dir: dir, ns: "bfk-" + randomHex(4), sock: filepath.Join(dir, "d.sock")}
	for _, f := range []struct{ name, data string }{{"nswrap.sh", nswrap}, {"daemon.json", "{}\n"}} {
		if err := os.WriteFile(filepath.Join(dir, f.name), []byte(f.data), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := exec.Command("ip", "netns", "add", e.ns).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v: %s", err, out)
	}
	t.Cleanup(e.teardown)
	if out, err := exec.Command("ip", "-n", e.ns, "link", "set", "lo", "up").CombinedOutput(); err != nil {
		t.Fatalf("lo up: %v: %s", err, out)
	}
	e.start()
	return e
}

// start starts dockerd and waits until it answers.
func (e *ownEngine) start() {
	t := e.t
	t.Helper()
	log, err := os.OpenFile(filepath.Join(e.dir, "dockerd.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	// ip netns exec and the wrapper exec, so the pid is dockerd's.
	e.cmd = exec.Command("ip", "netns", "exec", e.ns, filepath.Join(e.dir, "nswrap.sh"), "dockerd",
		"--config-file", filepath.Join(e.dir, "daemon.json"),
		"--data-root", filepath.Join(e.dir, "data"),
		"--exec-root", filepath.Join(e.dir, "exec"),
		"--pidfile", filepath.Join(e.dir, "dockerd.pid"),
		"-H", "unix://"+e.sock,
		"--cgroup-parent", e.ns,
		"--shutdown-timeout", "2")
	e.cmd.Stdout, e.cmd.Stderr = log, log
	e.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := e.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go e.cmd.Wait()
	cli := e.client()
	defer cli.Close()
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := cli.Ping(ctx)
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			data, _ := os.ReadFile(filepath.Join(e.dir, "dockerd.log"))
			t.Fatalf("the test's own dockerd did not answer within 60 s: %v\n%s", err, tail(string(data), 20))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// kill kills dockerd with SIGKILL, as a crash would, and waits until it is
// gone. Its containerd and the containers' shims live on, as they do when
// a real engine dies.
func (e *ownEngine) kill() {
	e.t.Helper()
	if err := syscall.Kill(e.cmd.Process.Pid, syscall.SIGKILL); err != nil {
		e.t.Fatalf("killing dockerd: %v", err)
	}
	for i := 0; i < 100; i++ {
		if syscall.Kill(e.cmd.Process.Pid, 0) != nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	e.t.Fatal("dockerd did not die")
}

func (e *ownEngine) client() *client.Client {
	e.t.Helper()
	cli, err := client.NewClientWithOpts(client.WithHost("unix://"+e.sock), client.WithAPIVersionNegotiation())
	if err != nil {
		e.t.Fatal(err)
	}
	return cli
}

// teardown kills every process in the engine's namespace (dockerd, its
// containerd, the shims, the containers: only this test's), then removes
// the namespace and the directory.
func (e *ownEngine) teardown() {
	for round := 0; round < 20; round++ {
		out, _ := exec.Command("ip", "netns", "pids", e.ns).Output()
		pids := strings.Fields(string(out))
		if len(pids) == 0 {
			break
		}
		for _, p := range pids {
			var pid int
			if _, err := fmt.Sscan(p, &pid); err == nil && pid > 1 {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	if out, err := exec.Command("ip", "netns", "del", e.ns).CombinedOutput(); err != nil {
		e.t.Errorf("ip netns del %s: %v: %s", e.ns, err, out)
	}
	// The container cgroups dockerd made under its cgroup parent.
	if dirs, _ := filepath.Glob("/sys/fs/cgroup/*/" + e.ns); len(dirs) > 0 {
		for _, d := range dirs {
			exec.Command("find", d, "-depth", "-type", "d", "-exec", "rmdir", "{}", ";").Run()
		}
	}
	if err := os.RemoveAll(e.dir); err != nil {
		e.t.Logf("removing %s: %v", e.dir, err)
	}
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// loadImage copies an image from the machine's engine into another.
func loadImage(t *testing.T, from, to *client.Client, ref string) {
	t.Helper()
	ctx := context.Background()
	snapCopyImage(t, from, to, ref)
	if _, err := to.ImageInspect(ctx, ref); err != nil {
		t.Fatalf("%s after loading it: %v", ref, err)
	}
}

// engineKillAgents are the agents of the engine-kill test (crashAgentNames
// among them, which checkConverged requires running).
var engineKillAgents = []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"}

// TestE2EEngineKill is issue 14's engine crash: an apply of 10 agents on an
// engine that is killed with -9 mid-way and restarted. At each of 5 points
// of the apply (fractions of a clean apply's duration), the engine is
// killed, the apply fails, the engine is started again; then plan explains
// every change it shows and accounts for every object carrying the
// lineage, one apply converges, the plan after it is empty, and the engine
// holds exactly what the state records, every agent running. Destroy then
// leaves nothing.
//
// Slow: it runs its own dockerd (see ownEngine, so it needs root), killed
// and restarted 5 times in one test; about 2 minutes on a quiet machine
// (10 minutes at load average 30). It runs in parallel with the others.
func TestE2EEngineKill(t *testing.T) {
	// Opt-in until it is reliable: in a full CI run on a loaded machine
	// (1459cf1) the apply finished before the 50% kill, so the engine kill
	// stopped running containers (code 143, which the plan rightly calls
	// "stopped outside bottlefile" but this test did not expect), and the
	// test's own dockerd then did not answer within 60 s at 70%.
	if os.Getenv("BOTTLEFILE_ENGINE_KILL") == "" {
		t.Skip("set BOTTLEFILE_ENGINE_KILL=1 to kill and restart a private dockerd during applies")
	}
	t.Parallel()
	main := dockertest.Client(t)
	img := dockertest.BusyboxImage(t, main)
	eng := startOwnEngine(t)
	cli := eng.client()
	t.Cleanup(func() { cli.Close() })
	loadImage(t, main, cli, img)

	c := &crashRig{t: t, cli: cli, dir: t.TempDir(), image: img}
	var b strings.Builder
	fmt.Fprintf(&b, "runtime \"own\" {\n  driver = \"docker\"\n  host   = %q\n}\n\n", "unix://"+eng.sock)
	for _, name := range engineKillAgents {
		fmt.Fprintf(&b, "agent %q {\n  runtime = runtime.own\n  image   = %q\n  command = [\"sleep\", \"3600\"]\n}\n\n", name, img)
	}
	writeBottlefile(t, c.dir, "%s", b.String())

	start := time.Now()
	mustRun(t, c.dir, "apply", "-auto-approve")
	clean := time.Since(start)
	c.checkConverged("clean apply", false)
	c.destroyAll()
	t.Logf("a clean apply of %d agents takes %v", len(engineKillAgents), clean.Round(time.Millisecond))

	for i, frac := range []float64{0.1, 0.3, 0.5, 0.7, 0.9} {
		what := fmt.Sprintf("engine killed at %.0f%% of an apply", frac*100)
		cmd, out, errb := c.start(nil, "apply", "-auto-approve")
		time.Sleep(time.Duration(frac * float64(clean)))
		eng.kill()
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			t.Logf("%s: the apply ended: %v", what, err)
		case <-time.After(2 * time.Minute):
			cmd.Process.Kill()
			t.Fatalf("%s: the apply did not end after the engine died\n%s%s", what, out, errb)
		}
		eng.start()
		c.recover(what, false)
		if i < 4 {
			c.destroyAll()
		}
	}
	c.destroyAll()
}
