package main

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/docker/dockertest"
)

// running is the binary started in the background, its stdout read line by
// line as it is written.
type running struct {
	t     *testing.T
	cmd   *exec.Cmd
	lines chan string
	errb  syncBuffer // read while the command runs (watch's log)
	done  chan struct{}
	err   error // set before done is closed

	mu  sync.Mutex // guards out
	out []string
}

func startBottlefile(t *testing.T, dir string, args ...string) *running {
	t.Helper()
	r := &running{t: t, lines: make(chan string, 1000), done: make(chan struct{})}
	r.cmd = exec.Command(binary, append([]string{"-chdir=" + dir}, args...)...)
	r.cmd.Env = append(os.Environ(), "NO_COLOR=1")
	r.cmd.Stderr = &r.errb
	stdout, err := r.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			r.mu.Lock()
			r.out = append(r.out, sc.Text())
			r.mu.Unlock()
			r.lines <- sc.Text()
		}
		close(r.lines)
		r.err = r.cmd.Wait()
		close(r.done)
	}()
	t.Cleanup(func() {
		select {
		case <-r.done:
		default:
			r.cmd.Process.Kill()
			<-r.done
		}
	})
	return r
}

// waitLine waits for a line of stdout matching re and returns it.
func (r *running) waitLine(re *regexp.Regexp, timeout time.Duration) string {
	r.t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case line, ok := <-r.lines:
			if !ok {
				<-r.done
				r.t.Fatalf("bottlefile ended (%v) before printing a line matching %s:\n%s", r.err, re, r)
			}
			if re.MatchString(line) {
				return line
			}
		case <-deadline:
			r.t.Fatalf("no line matching %s within %s:\n%s", re, timeout, r)
		}
	}
}

// wait waits for the process to end and returns its exit code.
func (r *running) wait(timeout time.Duration) int {
	r.t.Helper()
	go func() {
		for range r.lines { // keep reading until stdout closes
		}
	}()
	select {
	case <-r.done:
	case <-time.After(timeout):
		r.t.Fatalf("bottlefile did not end within %s:\n%s", timeout, r)
	}
	if r.err == nil {
		return 0
	}
	if exitErr, ok := r.err.(*exec.ExitError); ok {
		return exitErr.ExitCode()
	}
	r.t.Fatalf("running bottlefile: %v", r.err)
	return -1
}

func (r *running) stdout() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.out, "\n") + "\n"
}

func (r *running) String() string {
	return fmt.Sprintf("--- stdout\n%s--- stderr\n%s", r.stdout(), r.errb.String())
}

var (
	containerCreating = regexp.MustCompile(`^(agent\.[a-z]+): Creating\.\.\.$`)
	stepLine          = regexp.MustCompile(`^([a-z][a-z0-9_.-]*): (Creating\.\.\.|Creation complete after .*|not started \(the apply was interrupted\))$`)
	planAdds          = regexp.MustCompile(`(?m)^Plan: (\d+) to add, 0 to change, 0 to destroy\.$`)
)

// TestE2EInterrupt: one Ctrl-C while an apply of three agents runs, one step
// at a time (-parallelism=1), landing while a container is being created
// (a create and start takes a few hundred milliseconds). No new step starts;
// the one running finishes and is recorded; the run exits 1 with the
// "Apply incomplete" summary naming what did not start; the state records
// exactly what finished, nothing on the engine is unrecorded, and the next
// plan creates only the rest.
func TestE2EInterrupt(t *testing.T) {
	parallel(t)
	cli := dockertest.Client(t)
	image := dockertest.BusyboxImage(t, cli)
	dir := t.TempDir()
	writeBottlefile(t, dir, "%s", crashConfig(image, `["sleep", "600"]`))

	run := startBottlefile(t, dir, "apply", "-auto-approve", "-parallelism=1")
	line := run.waitLine(containerCreating, time.Minute)
	interrupted := containerCreating.FindStringSubmatch(line)[1]
	if err := run.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if code := run.wait(time.Minute); code != 1 {
		t.Fatalf("interrupted apply: want exit 1, got %d\n%s", code, run)
	}
	out := run.stdout()
	if !strings.Contains(run.errb.String(), "Interrupt received") {
		t.Errorf("no interrupt message on stderr:\n%s", run)
	}
	if !strings.Contains(out, "\nApply incomplete.") {
		t.Errorf("no \"Apply incomplete\" summary:\n%s", run)
	}

	// Every step that started finished; the rest did not start.
	started, finished, notStarted := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, l := range strings.Split(out, "\n") {
		m := stepLine.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		switch {
		case m[2] == "Creating...":
			started[m[1]] = true
		case strings.HasPrefix(m[2], "Creation complete"):
			finished[m[1]] = true
		default:
			notStarted[m[1]] = true
		}
	}
	if !finished[interrupted] {
		t.Errorf("%s was being created when the interrupt came, and did not finish:\n%s", interrupted, run)
	}
	for addr := range started {
		if !finished[addr] {
			t.Errorf("%s started but did not finish:\n%s", addr, run)
		}
	}
	m := planAdds.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("the apply printed no plan of creates:\n%s", run)
	}
	if steps, _ := strconv.Atoi(m[1]); len(notStarted) == 0 || len(finished)+len(notStarted) != steps {
		t.Errorf("want every one of the %d steps either finished or not started, got finished %v, not started %v:\n%s", steps, keysOf(finished), keysOf(notStarted), run)
	}
	for addr := range notStarted {
		if !strings.Contains(out, "  not started: create "+addr+"\n") {
			t.Errorf("the summary does not list %s as not started:\n%s", addr, run)
		}
	}

	// The state records exactly what finished, and the engine holds
	// nothing else of this lineage.
	lineage, recs := readState(t, dir)
	dockertest.Cleanup(t, cli, lineage)
	var recorded []string
	ids := map[string]bool{}
	for _, r := range recs {
		recorded = append(recorded, r.Addr)
		ids[r.ID] = true
	}
	if want := keysOf(finished); !slices.Equal(recorded, want) {
		t.Errorf("the state records %v, want what finished: %v", recorded, want)
	}
	for _, c := range containersWith(t, cli, drivers.LabelLineage+"="+lineage) {
		if !ids[c.ID] {
			t.Errorf("container %s of the lineage is not recorded", c.Names)
		}
	}
	for _, n := range networksWith(t, cli, drivers.LabelLineage+"="+lineage) {
		if !ids[n.ID] {
			t.Errorf("network %s of the lineage is not recorded", n.Name)
		}
	}

	// The next plan creates only the rest.
	r := mustRun(t, dir, "plan")
	var planned []string
	for _, c := range parsePlan(r.stdout) {
		if c.headline != "will be created" || len(c.reasons) > 0 {
			t.Errorf("after the interrupt the plan does more than create what was not started: %s %s %v", c.addr, c.headline, c.reasons)
		}
		planned = append(planned, c.addr)
	}
	if want := keysOf(notStarted); !slices.Equal(planned, want) {
		t.Errorf("the plan after the interrupt covers %v, want what did not start: %v\n%s", planned, want, r)
	}
	if want := fmt.Sprintf("Plan: %d to add, 0 to change, 0 to destroy.", len(notStarted)); !strings.Contains(r.stdout, want) {
		t.Errorf("plan lacks %q:\n%s", want, r)
	}
	mustRun(t, dir, "apply", "-auto-approve")
	if r := mustRun(t, dir, "plan"); !strings.Contains(r.stdout, "No changes.") {
		t.Errorf("apply after the interrupt did not converge:\n%s", r)
	}
	mustRun(t, dir, "destroy", "-auto-approve")
}

// TestE2EInterruptTwice: the second Ctrl-C abandons a running step. The
// step made to hang is the pull of an image from a registry on loopback
// that accepts connections and never answers (the engine would wait about
// 25 s for it). After the first interrupt the apply waits for the pull, as
// it must; after the second it cancels it and exits 1 at once, with the
// step reported failed. Nothing the apply made is left unrecorded, and the
// next plan explains what is left.
func TestE2EInterruptTwice(t *testing.T) {
	parallel(t)
	cli := dockertest.Client(t)
	image := dockertest.BusyboxImage(t, cli)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var held []net.Conn
	var heldMu sync.Mutex // guards held
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			heldMu.Lock()
			held = append(held, c)
			heldMu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		heldMu.Lock()
		defer heldMu.Unlock()
		for _, c := range held {
			c.Close()
		}
	})

	dir := t.TempDir()
	writeBottlefile(t, dir, `
agent "ok" {
  image   = %q
  command = ["sleep", "600"]
}

agent "stuck" {
  image   = "%s/bottlefile-test/never:1"
  command = ["sleep", "600"]
}
`, image, ln.Addr())

	run := startBottlefile(t, dir, "apply", "-auto-approve")
	run.waitLine(regexp.MustCompile(`^agent\.stuck: Creating\.\.\.$`), time.Minute)
	if err := run.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	select {
	case <-run.done:
		t.Fatalf("the apply ended after one interrupt, while agent.stuck was still being created:\n%s", run)
	case <-time.After(1500 * time.Millisecond):
	}
	second := time.Now()
	if err := run.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if code := run.wait(10 * time.Second); code != 1 {
		t.Fatalf("apply interrupted twice: want exit 1, got %d\n%s", code, run)
	}
	t.Logf("the apply ended %s after the second interrupt", time.Since(second).Round(time.Millisecond))
	out := run.stdout()
	if !strings.Contains(run.errb.String(), "Second interrupt: abandoning running actions.") {
		t.Errorf("no second-interrupt message on stderr:\n%s", run)
	}
	for _, want := range []string{"agent.stuck: Creating failed after", "\nApply incomplete.", "  failed:      create agent.stuck\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, run)
		}
	}

	lineage, recs := readState(t, dir)
	dockertest.Cleanup(t, cli, lineage)
	ids := map[string]bool{}
	for _, r := range recs {
		ids[r.ID] = true
		if r.Addr == "agent.stuck" {
			t.Errorf("the abandoned agent.stuck is recorded: %+v", r)
		}
	}
	for _, c := range containersWith(t, cli, drivers.LabelLineage+"="+lineage) {
		if !ids[c.ID] {
			t.Errorf("container %s of the lineage is not recorded", c.Names)
		}
	}
	for _, n := range networksWith(t, cli, drivers.LabelLineage+"="+lineage) {
		if !ids[n.ID] {
			t.Errorf("network %s of the lineage is not recorded", n.Name)
		}
	}
	r := mustRun(t, dir, "plan")
	if !strings.Contains(r.stdout, "# agent.stuck will be created") {
		t.Errorf("the plan after the abandoned step does not create agent.stuck:\n%s", r)
	}
	for _, c := range parsePlan(r.stdout) {
		if !c.explained(false) {
			t.Errorf("the plan does not say why %s %s:\n%s", c.addr, c.headline, r)
		}
	}
	mustRun(t, dir, "destroy", "-auto-approve")
	if left := containersWith(t, cli, drivers.LabelLineage+"="+lineage); len(left) != 0 {
		t.Errorf("containers left after destroy: %v", left)
	}
	if left := networksWith(t, cli, drivers.LabelLineage+"="+lineage); len(left) != 0 {
		t.Errorf("networks left after destroy: %v", left)
	}
}

func keysOf(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
