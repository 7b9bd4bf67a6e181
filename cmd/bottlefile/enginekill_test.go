package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/events"
	"github.com/docker/docker/client"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/docker/dockertest"
)

// ownEngine is a dockerd of the test's own, in a network namespace of its
// own (a second dockerd in the host's namespace would take over docker0),
// with its own data root, exec root, socket and pid file, and its
// containers under a cgroup parent of its own. Killing it with -9 touches
// nothing else on the machine.
type ownEngine struct {
	t      *testing.T
	dir    string // short: unix socket paths are limited to 108 bytes
	ns     string // the network namespace, and the containers' cgroup parent
	sock   string
	cmd    *exec.Cmd
	exited chan struct{} // closed once the running dockerd has been reaped
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
// process of it is killed by pid, the namespace, cgroups and directory
// removed.
func startOwnEngine(t *testing.T) *ownEngine {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv(dockertest.RequireEnv) == "1" {
			t.Fatal("an engine of the test's own needs root")
		}
		t.Skip("an engine of the test's own needs root")
	}
	for _, tool := range []string{"ip", "dockerd"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv(dockertest.RequireEnv) == "1" {
				t.Fatalf("no %s: %v", tool, err)
			}
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
		os.RemoveAll(dir)
		t.Fatalf("ip netns add: %v: %s", err, out)
	}
	t.Cleanup(e.teardown)
	if out, err := exec.Command("ip", "-n", e.ns, "link", "set", "lo", "up").CombinedOutput(); err != nil {
		t.Fatalf("lo up: %v: %s", err, out)
	}
	e.start()
	return e
}

// start starts dockerd and waits until it answers; it fails at once, with
// the end of dockerd's log, if dockerd exits instead.
func (e *ownEngine) start() {
	t := e.t
	t.Helper()
	logPath := filepath.Join(e.dir, "dockerd.log")
	log, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	fmt.Fprintf(log, "---- the test starts dockerd at %s\n", time.Now().UTC().Format(time.RFC3339Nano))
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
	exited := make(chan struct{})
	e.exited = exited
	go func(cmd *exec.Cmd) { cmd.Wait(); close(exited) }(e.cmd)
	cli := e.client()
	defer cli.Close()
	started := time.Now()
	deadline := started.Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := cli.Ping(ctx)
		cancel()
		if err == nil {
			t.Logf("the test's own dockerd answers after %v", time.Since(started).Round(10*time.Millisecond))
			return
		}
		select {
		case <-exited:
			t.Fatalf("the test's own dockerd exited while starting (%v):\n%s", e.cmd.ProcessState, e.logTail(30))
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the test's own dockerd did not answer within 60 s: %v\n%s", err, e.logTail(30))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// logTail is the end of dockerd's log, without gRPC's connection chatter.
func (e *ownEngine) logTail(n int) string {
	data, _ := os.ReadFile(filepath.Join(e.dir, "dockerd.log"))
	var keep []string
	for _, l := range strings.Split(string(data), "\n") {
		if !strings.Contains(l, "module=grpc") && !strings.Contains(l, "loading plugin") {
			keep = append(keep, l)
		}
	}
	return tail(strings.Join(keep, "\n"), n)
}

// kill kills dockerd with SIGKILL, as a crash would, and waits until it
// and its containerd are gone; the containers' shims live on, as they do
// when a real engine dies.
//
// containerd dies with dockerd (dockerd starts it with a parent-death
// signal), but not at the same instant: on a loaded machine it can still
// be exiting when dockerd has been reaped. A dockerd started then reads
// containerd's pid file, finds the process alive, connects to its socket
// instead of starting a containerd of its own, and gives up after 15 s
// ("timeout waiting for containerd to start"): that is why the restarted
// engine did not answer before. So kill waits until containerd is dead (a
// zombie counts: on a machine whose init does not reap, it stays one),
// and removes the pid files a crash leaves, whose pids another process
// may have taken by the time the engine is started again.
func (e *ownEngine) kill() {
	t := e.t
	t.Helper()
	containerd := e.pidFrom(filepath.Join(e.dir, "exec", "containerd", "containerd.pid"))
	if err := syscall.Kill(e.cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatalf("killing dockerd: %v", err)
	}
	select {
	case <-e.exited:
	case <-time.After(30 * time.Second):
		t.Fatal("dockerd did not die within 30 s of SIGKILL")
	}
	if containerd > 0 {
		deadline := time.Now().Add(30 * time.Second)
		for alive(containerd) {
			if time.Now().After(deadline) {
				t.Fatalf("containerd (pid %d) outlived its dockerd by 30 s", containerd)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	for _, f := range []string{filepath.Join(e.dir, "dockerd.pid"), filepath.Join(e.dir, "exec", "containerd", "containerd.pid")} {
		if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
	}
}

// pidFrom reads a pid file, and returns the pid only while it is a
// process of this engine (its command line names the engine's directory).
func (e *ownEngine) pidFrom(path string) int {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || pid <= 1 || !e.owns(pid) {
		return 0
	}
	return pid
}

// owns reports whether pid is a process of this engine: its command line
// names the engine's directory (dockerd, containerd, the shims).
func (e *ownEngine) owns(pid int) bool {
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return err == nil && bytes.Contains(cmdline, []byte(e.dir+"/"))
}

// alive reports whether pid is a process that has not exited: gone and
// zombie processes are not.
func alive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// pid (comm) S ...: the state follows the last ')'.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 || i+2 >= len(stat) {
		return false
	}
	st := stat[i+2]
	return st != 'Z' && st != 'X'
}

func (e *ownEngine) client() *client.Client {
	e.t.Helper()
	cli, err := client.NewClientWithOpts(client.WithHost("unix://"+e.sock), client.WithAPIVersionNegotiation())
	if err != nil {
		e.t.Fatal(err)
	}
	return cli
}

// pids lists the live processes of this engine, by pid: dockerd,
// containerd and the shims (their command lines name the engine's
// directory), whatever runs in its network namespace, and the containers'
// processes (in their own network namespaces, but in cgroups under the
// engine's cgroup parent).
func (e *ownEngine) pids() []int {
	seen := map[int]bool{}
	var out []int
	add := func(pid int) {
		if pid > 1 && pid != os.Getpid() && !seen[pid] && alive(pid) {
			seen[pid] = true
			out = append(out, pid)
		}
	}
	if e.cmd != nil && e.cmd.Process != nil {
		select {
		case <-e.exited:
		default:
			add(e.cmd.Process.Pid)
		}
	}
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		if pid, err := strconv.Atoi(p.Name()); err == nil && e.owns(pid) {
			add(pid)
		}
	}
	if nsPids, err := exec.Command("ip", "netns", "pids", e.ns).Output(); err == nil {
		for _, f := range strings.Fields(string(nsPids)) {
			if pid, err := strconv.Atoi(f); err == nil {
				add(pid)
			}
		}
	}
	for _, d := range e.cgroups() {
		data, _ := os.ReadFile(filepath.Join(d, "cgroup.procs"))
		for _, f := range strings.Fields(string(data)) {
			if pid, err := strconv.Atoi(f); err == nil {
				add(pid)
			}
		}
	}
	return out
}

// cgroups lists the engine's cgroup parent in every hierarchy and the
// cgroups under it, deepest first.
func (e *ownEngine) cgroups() []string {
	var dirs []string
	tops, _ := filepath.Glob("/sys/fs/cgroup/*/" + e.ns)
	for _, top := range tops {
		var sub []string
		filepath.WalkDir(top, func(path string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				sub = append(sub, path)
			}
			return nil
		})
		for i := len(sub) - 1; i >= 0; i-- {
			dirs = append(dirs, sub[i])
		}
	}
	return dirs
}

// teardown kills every process of the engine by pid (dockerd, its
// containerd, the shims, the containers: only this test's), then removes
// the cgroups, the namespace and the directory, and says what it could
// not remove.
func (e *ownEngine) teardown() {
	var left []int
	for round := 0; round < 50; round++ {
		left = e.pids()
		if len(left) == 0 {
			break
		}
		for _, pid := range left {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if len(left) > 0 {
		e.t.Errorf("processes of the test's own engine still alive after teardown: %v", left)
	}
	for _, d := range e.cgroups() {
		if err := os.Remove(d); err != nil && !errors.Is(err, os.ErrNotExist) {
			e.t.Errorf("removing the cgroup %s: %v", d, err)
		}
	}
	if out, err := exec.Command("ip", "netns", "del", e.ns).CombinedOutput(); err != nil {
		e.t.Errorf("ip netns del %s: %v: %s", e.ns, err, out)
	}
	if err := os.RemoveAll(e.dir); err != nil {
		e.t.Errorf("removing %s: %v", e.dir, err)
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

// engineKillAgents are the agents of the engine-kill test.
var engineKillAgents = []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"}

// applyProgress is what an apply has done on the engine so far, as the
// engine's events tell it.
type applyProgress struct {
	networks, created int
	started           map[string]bool // agent addresses whose container started
}

// engineKillPoint is a point of an apply at which the engine is killed: as
// soon as the engine's events report the progress it names.
type engineKillPoint struct {
	what    string
	reached func(applyProgress) bool
}

var engineKillPoints = []engineKillPoint{
	{"the first network was created", func(p applyProgress) bool { return p.networks >= 1 }},
	{"3 containers were created", func(p applyProgress) bool { return p.created >= 3 }},
	{"8 containers were created", func(p applyProgress) bool { return p.created >= 8 }},
	{"2 agents' containers were started", func(p applyProgress) bool { return len(p.started) >= 2 }},
	{"every agent's container was started", func(p applyProgress) bool { return len(p.started) == len(engineKillAgents) }},
}

// TestE2EEngineKill is issue 14's engine crash: an apply of 10 agents on an
// engine that is killed with -9 mid-way and restarted. At each of 5 points
// of a fresh apply, told by the engine's own events (the first network
// created; 3 and 8 containers created; 2 and then all 10 agents'
// containers started, while the apply watches them settle), the engine is
// killed, the apply (still under way) fails, the engine is started again.
// Then, as in TestE2ECrash, plan explains every change it shows and
// accounts for every object carrying the lineage, one apply converges, the
// plan after it is empty, and the engine holds exactly what the state
// records, every agent running. Destroy then leaves nothing, and the
// engine's teardown no process, cgroup, namespace or file.
//
// A dockerd that restarts without live-restore stops the containers that
// were running (SIGTERM through their init: code 143, or 137 after the
// grace period); the plan starts them again, saying they were stopped
// outside bottlefile, which they were.
//
// It runs its own dockerd (see ownEngine, so it needs root).
func TestE2EEngineKill(t *testing.T) {
	t.Parallel() // the long lane (e2e_test.go): not parallel(t)
	main := dockertest.Client(t)
	img := dockertest.BusyboxImage(t, main)
	eng := startOwnEngine(t)
	cli := eng.client()
	t.Cleanup(func() { cli.Close() })
	loadImage(t, main, cli, img)

	c := &crashRig{t: t, cli: cli, dir: t.TempDir(), image: img, agents: engineKillAgents, engineRestarts: true}
	var b strings.Builder
	fmt.Fprintf(&b, "runtime \"own\" {\n  driver = \"docker\"\n  host   = %q\n}\n\n", "unix://"+eng.sock)
	for _, name := range engineKillAgents {
		fmt.Fprintf(&b, "agent %q {\n  runtime = runtime.own\n  image   = %q\n  command = [\"sleep\", \"3600\"]\n}\n\n", name, img)
	}
	writeBottlefile(t, c.dir, "%s", b.String())

	for i, point := range engineKillPoints {
		what := fmt.Sprintf("engine killed once %s", point.what)
		started := time.Now()
		c.killEngineAt(eng, point)
		eng.start()
		c.recover(what, false)
		if i < len(engineKillPoints)-1 {
			c.destroyAll()
		}
		t.Logf("%s: kill, restart and recovery took %v", what, time.Since(started).Round(100*time.Millisecond))
	}
	c.destroyAll()
}

// killEngineAt starts an apply, kills the engine once the engine's events
// show the point reached, and requires that the apply was still under way
// and fails.
func (c *crashRig) killEngineAt(eng *ownEngine, point engineKillPoint) {
	t := c.t
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Since: every event of the apply, though the stream may be set up
	// after the first of them (the engine replays them).
	now := time.Now()
	since := fmt.Sprintf("%d.%09d", now.Unix(), now.Nanosecond())
	msgs, errs := c.cli.Events(ctx, events.ListOptions{Since: since})
	// -wait=30s: the apply watches the containers it started for 30 s
	// (3 by default) before it ends, so that the last point, every agent
	// started, is before its end on a machine however loaded.
	cmd, out, errb := c.start(nil, "apply", "-auto-approve", "-wait=30s")
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()

	p := applyProgress{started: map[string]bool{}}
	agents := map[string]bool{}
	for _, name := range c.agents {
		agents["agent."+name] = true
	}
	timeout := time.After(3 * time.Minute)
	for !point.reached(p) {
		select {
		case m := <-msgs:
			switch {
			case m.Type == events.NetworkEventType && m.Action == events.ActionCreate:
				p.networks++
			case m.Type == events.ContainerEventType && m.Action == events.ActionCreate:
				p.created++
			case m.Type == events.ContainerEventType && m.Action == events.ActionStart && agents[m.Actor.Attributes[drivers.LabelAddress]]:
				p.started[m.Actor.Attributes[drivers.LabelAddress]] = true
			}
		case err := <-errs:
			cmd.Process.Kill()
			t.Fatalf("reading the engine's events before %s: %v", point.what, err)
		case err := <-done:
			t.Fatalf("the apply ended (%v) before %s (progress: %+v): the kill would not interrupt it\n--- stdout\n%s--- stderr\n%s", err, point.what, p, out, errb)
		case <-timeout:
			cmd.Process.Kill()
			t.Fatalf("the apply did not reach the point where %s within 3 minutes (progress: %+v)\n--- stdout\n%s--- stderr\n%s", point.what, p, out, errb)
		}
	}
	eng.kill()
	t.Logf("engine killed once %s: %d networks and %d containers created, %d agents started", point.what, p.networks, p.created, len(p.started))
	select {
	case err := <-done:
		if err == nil || strings.Contains(out.String(), "Apply complete!") {
			t.Fatalf("the apply did not fail when the engine was killed once %s (%v)\n--- stdout\n%s--- stderr\n%s", point.what, err, out, errb)
		}
	case <-time.After(2 * time.Minute):
		cmd.Process.Kill()
		t.Fatalf("the apply did not end within 2 minutes of the engine's death\n--- stdout\n%s--- stderr\n%s", out, errb)
	}
}
