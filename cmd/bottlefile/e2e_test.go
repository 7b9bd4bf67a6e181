// The end-to-end tests of this package run the bottlefile binary against
// the real Docker engine, and a real 3-node swarm in namespaces. They are
// most of CI's wall time and wait on engines far more than they compute,
// so they run side by side, e2eParallel at a time (TestMain lifts go
// test's own -parallel bound, GOMAXPROCS, unless the command line sets
// one).
//
// A new e2e test follows this pattern:
//
//   - parallel(t) first: t.Parallel, then a place among the e2eParallel.
//     Plain t.Parallel() is for a test that touches no engine (it costs
//     next to nothing), and for the few that are each a chain of minutes
//     (the long lane): they start at once, beside the others, so that the
//     package ends when its longest chain does.
//     Its subtests, when independent, call t.Parallel() (never
//     parallel(t): their parent holds its place until they end).
//   - Its own t.TempDir(), the lineage its state gives (lineageOf
//     registers the cleanup by label), names and labels that carry that
//     lineage or a random part: nothing another test could see, list or
//     remove. Networks of its own from dockertest.TestNetwork (explicit
//     subnets: the engine's default pools hold about 30 networks in all).
//   - Environment for the binary through setDirEnv(t, dir, "K=V"), which
//     mustRun and bottlefile pass to every run in dir; never t.Setenv,
//     which forbids t.Parallel (a test that must change this process's
//     environment stays serial, and short: the serial tests run first,
//     alone, before any parallel one starts).
//   - On the swarm: a case of TestE2ESwarm (swarm_e2e_test.go), not a
//     top-level test, marked fault if it breaks the swarm for a while (cuts
//     a node off, kills its engine, stops the registry): the faults run
//     alone, the others together after them, in one lane beside the
//     docker tests.
//   - Shared fixtures, never made per test: the binary (built once here),
//     dockertest.BusyboxImage (imported once per machine), swarmtest.Start
//     (one swarm per package).
//   - Wait on the condition (poll every 100-200 ms up to a deadline), never
//     a fixed sleep; a bound that always expires is a fixed sleep.

package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/docker/dockertest"
	"github.com/bottlefile/bottlefile/drivers/kubernetes/k8stest"
	"github.com/bottlefile/bottlefile/drivers/smolvm/smolvmtest"
	"github.com/bottlefile/bottlefile/drivers/swarm/swarmtest"
	"github.com/bottlefile/bottlefile/state"
)

// binary is the bottlefile built once for these tests: they run it as a
// user would, in its own process, with real exit codes.
var binary string

// e2eParallel is how many tests that call parallel run at once: go
// test's default, GOMAXPROCS, suits tests that compute, and these mostly
// wait on engines, containers and their own processes.
const e2eParallel = 4

// e2eSlots holds a token for each test parallel let run.
var e2eSlots = make(chan struct{}, e2eParallel)

// parallel marks t as a parallel test and waits for one of e2eParallel
// places, held until t and its cleanups end: what every e2e test on the
// Docker engine calls first. The wait is logged: a test's elapsed time
// counts it.
func parallel(t *testing.T) {
	t.Helper()
	t.Parallel()
	place(t)
}

// parallelOnCluster is parallel for a test on the kubernetes test
// cluster: it takes the cluster first, which may wait for build.sh or the
// cluster's start, so that wait holds no place the Docker tests need.
func parallelOnCluster(t *testing.T) *k8stest.Cluster {
	t.Helper()
	t.Parallel()
	c := k8stest.Start(t)
	place(t)
	return c
}

// place waits for one of e2eParallel places, held until t and its
// cleanups end.
func place(t *testing.T) {
	t.Helper()
	start := time.Now()
	e2eSlots <- struct{}{}
	t.Cleanup(func() { <-e2eSlots })
	if waited := time.Since(start); waited >= time.Second {
		t.Logf("waited %.1fs for a place", waited.Seconds())
	}
}

// The long lane: TestE2ESwarm, TestEscape and TestE2EEngineKill call
// t.Parallel() alone. Each is a chain of minutes, so each starts with the
// parallel phase, beside the e2eParallel, instead of whenever a place
// frees up (go test lets waiting tests in in no useful order), which
// would put its whole length after that moment.

// noParallelBound is -parallel unless the command line sets it: parallel
// and the long lane bound the tests, not go test.
const noParallelBound = 64

func TestMain(m *testing.M) {
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		if err := flag.Set("test.parallel", strconv.Itoa(noParallelBound)); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	dir, err := os.MkdirTemp("", "bottlefile-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// The gateway alone beside it, as make build puts it: the gateways
	// run that, as an operator's do.
	binary = filepath.Join(dir, "bottlefile")
	build := exec.Command("go", "build", "-o", dir+"/", ".", "../bottlefile-gateway")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	build.Env = append(os.Environ(), "CGO_ENABLED=0") // static, as make build: the gateway image is made from it
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building bottlefile:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	smolvmtest.Cleanup()
	swarmtest.Stop()
	k8stest.Stop()
	os.Exit(code)
}

// result is one run of the binary.
type result struct {
	stdout, stderr string
	code           int
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\n--- stdout\n%s--- stderr\n%s", r.code, r.stdout, r.stderr)
}

// bottlefile runs the binary in dir.
func bottlefile(t *testing.T, dir string, args ...string) result {
	t.Helper()
	return bottlefileWithin(t, 3*time.Minute, dir, args...)
}

// dirEnv is extra environment for every run of the binary in a
// directory (setDirEnv).
var dirEnv sync.Map // dir -> []string

// setDirEnv adds "KEY=VALUE" entries to the environment of every later
// run of the binary in dir through runBinary (bottlefile, mustRun,
// bottlefileWithin), until the test ends; a later entry for the same key
// wins. Unlike t.Setenv it leaves this process's environment
// alone, so the test may run in parallel.
func setDirEnv(t *testing.T, dir string, kv ...string) {
	t.Helper()
	old, _ := dirEnv.Load(dir)
	env, _ := old.([]string)
	dirEnv.Store(dir, append(append([]string(nil), env...), kv...))
	t.Cleanup(func() { dirEnv.Delete(dir) })
}

// envFor is the extra environment of runs in dir.
func envFor(dir string) []string {
	env, _ := dirEnv.Load(dir)
	e, _ := env.([]string)
	return e
}

// mustRun runs the binary and fails the test unless it exits 0.
func mustRun(t *testing.T, dir string, args ...string) result {
	t.Helper()
	r := bottlefile(t, dir, args...)
	if r.code != 0 {
		t.Fatalf("bottlefile %s: %s", strings.Join(args, " "), r)
	}
	return r
}

// wantNoChanges runs plan in dir and fails the test unless it says
// "No changes.": what converged stays converged.
func wantNoChanges(t *testing.T, dir, when string) {
	t.Helper()
	if r := mustRun(t, dir, "plan"); !strings.Contains(r.stdout, "No changes.") {
		t.Errorf("%s: the plan is not empty:\n%s", when, r)
	}
}

// writeBottlefile writes a Bottlefile into dir.
func writeBottlefile(t *testing.T, dir, format string, args ...any) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "Bottlefile"), []byte(fmt.Sprintf(format, args...)), 0o644); err != nil {
		t.Fatal(err)
	}
}

// readState reads the lineage and the records of the state in dir.
func readState(t *testing.T, dir string) (string, []state.Record) {
	t.Helper()
	s, err := state.Open(dir, state.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	recs, err := s.Records()
	if err != nil {
		t.Fatal(err)
	}
	return s.Lineage(), recs
}

// lineageOf reads the lineage of the state in dir and registers cleanup of
// everything carrying it.
func lineageOf(t *testing.T, cli *client.Client, dir string) string {
	t.Helper()
	lineage, _ := readState(t, dir)
	if lineage == "" {
		t.Fatal("state has no lineage after apply")
	}
	dockertest.Cleanup(t, cli, lineage)
	return lineage
}

func containersWith(t *testing.T, cli *client.Client, labels ...string) []container.Summary {
	t.Helper()
	f := filters.NewArgs()
	for _, l := range labels {
		f.Add("label", l)
	}
	list, err := cli.ContainerList(context.Background(), container.ListOptions{All: true, Filters: f})
	if err != nil {
		t.Fatal(err)
	}
	return list
}

func networksWith(t *testing.T, cli *client.Client, labels ...string) []network.Summary {
	t.Helper()
	f := filters.NewArgs()
	for _, l := range labels {
		f.Add("label", l)
	}
	list, err := cli.NetworkList(context.Background(), network.ListOptions{Filters: f})
	if err != nil {
		t.Fatal(err)
	}
	return list
}

const agentConfig = `
agent "coder" {
  image   = %q
  command = %s
  env     = { ROLE = "e2e" }
  workdir = "/tmp"
}
`

// TestE2ELifecycle walks the skeleton's promise end to end on the real
// engine: apply, a clean second plan, a forced replacement, an out-of-band
// deletion that plan explains and apply repairs, and a destroy that leaves
// nothing behind.
func TestE2ELifecycle(t *testing.T) {
	parallel(t)
	cli := dockertest.Client(t)
	image := dockertest.BusyboxImage(t, cli)
	dir := t.TempDir()
	writeBottlefile(t, dir, agentConfig, image, `["sleep", "600"]`)

	r := mustRun(t, dir, "apply", "-auto-approve")
	lineage := lineageOf(t, cli, dir)
	if !strings.Contains(r.stdout, "Apply complete!") {
		t.Fatalf("apply did not report completion:\n%s", r)
	}
	running := containersWith(t, cli, drivers.LabelAddress+"=agent.coder", drivers.LabelLineage+"="+lineage)
	if len(running) != 1 || running[0].State != "running" {
		t.Fatalf("want one running container labelled agent.coder, got %+v", running)
	}
	firstID := running[0].ID

	if r := mustRun(t, dir, "plan"); !strings.Contains(r.stdout, "No changes.") {
		t.Fatalf("second plan is not empty:\n%s", r)
	}

	writeBottlefile(t, dir, agentConfig, image, `["sleep", "700"]`)
	r = mustRun(t, dir, "plan")
	for _, want := range []string{"# agent.coder must be replaced", "-/+ agent.coder (container)", "# forces replacement", `["sleep", "600"] -> ["sleep", "700"]`, "Plan: 1 to add, 0 to change, 1 to destroy."} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("plan after a command change lacks %q:\n%s", want, r)
		}
	}
	forcing := ""
	for _, line := range strings.Split(r.stdout, "\n") {
		if strings.Contains(line, "# forces replacement") {
			forcing = line
		}
	}
	if !strings.Contains(forcing, "command") {
		t.Errorf("the forcing attribute is not command: %q", forcing)
	}
	mustRun(t, dir, "apply", "-auto-approve")
	replaced := containersWith(t, cli, drivers.LabelAddress+"=agent.coder", drivers.LabelLineage+"="+lineage)
	if len(replaced) != 1 || replaced[0].ID == firstID || replaced[0].Command != "sleep 700" {
		t.Fatalf("want the container replaced with the new command, got %+v", replaced)
	}

	// Deleted out of band: plan says it will be created again, and why.
	if err := cli.ContainerRemove(context.Background(), replaced[0].ID, container.RemoveOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	r = mustRun(t, dir, "plan")
	for _, want := range []string{"# agent.coder will be created", "deleted outside bottlefile", "Plan: 1 to add, 0 to change, 0 to destroy."} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("plan after an out-of-band removal lacks %q:\n%s", want, r)
		}
	}
	mustRun(t, dir, "apply", "-auto-approve")
	restored := containersWith(t, cli, drivers.LabelAddress+"=agent.coder", drivers.LabelLineage+"="+lineage)
	if len(restored) != 1 || restored[0].State != "running" {
		t.Fatalf("apply did not restore the container: %+v", restored)
	}

	// Stopped out of band: started, not replaced.
	stopTimeout := 1
	if err := cli.ContainerStop(context.Background(), restored[0].ID, container.StopOptions{Timeout: &stopTimeout}); err != nil {
		t.Fatal(err)
	}
	r = mustRun(t, dir, "plan")
	if !strings.Contains(r.stdout, "# agent.coder will be started") || !strings.Contains(r.stdout, "stopped outside bottlefile") {
		t.Errorf("plan for a stopped container does not start it:\n%s", r)
	}
	mustRun(t, dir, "apply", "-auto-approve")
	started := containersWith(t, cli, drivers.LabelAddress+"=agent.coder", drivers.LabelLineage+"="+lineage)
	if len(started) != 1 || started[0].ID != restored[0].ID || started[0].State != "running" {
		t.Fatalf("want the same container running again, got %+v", started)
	}

	r = mustRun(t, dir, "destroy", "-auto-approve")
	if !strings.Contains(r.stdout, "Destroy complete!") {
		t.Fatalf("destroy did not complete:\n%s", r)
	}
	if left := containersWith(t, cli, drivers.LabelLineage+"="+lineage); len(left) != 0 {
		t.Errorf("containers left after destroy: %+v", left)
	}
	if left := networksWith(t, cli, drivers.LabelLineage+"="+lineage); len(left) != 0 {
		t.Errorf("networks left after destroy: %+v", left)
	}
	if r := mustRun(t, dir, "plan"); !strings.Contains(r.stdout, "# agent.coder will be created") {
		t.Errorf("plan after destroy does not create again:\n%s", r)
	}
}

// TestE2ELockHeld: a second apply while another process holds the state
// fails at once, naming the lock.
func TestE2ELockHeld(t *testing.T) {
	parallel(t)
	dir := t.TempDir()
	writeBottlefile(t, dir, agentConfig, "bottlefile-test/never-used:1", `["true"]`)
	held, err := state.Open(dir, state.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	r := bottlefile(t, dir, "apply", "-auto-approve")
	if r.code != 1 {
		t.Fatalf("apply with the state held: want exit 1, got %s", r)
	}
	for _, want := range []string{"state is locked", state.Path(dir), "-lock-timeout"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("the lock error lacks %q:\n%s", want, r)
		}
	}
}
