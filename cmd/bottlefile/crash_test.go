package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/docker/dockertest"
	"github.com/bottlefile/bottlefile/state"
)

// crashAgents is how many agents the crash test declares. Each is at
// least a network and a container (and, with the egress gateway, a gateway
// container, plus the runtime's egress network for all), so a fresh apply
// makes 6 driver calls or more; the test counts them.
const crashAgents = 3

var crashAgentNames = []string{"a", "b", "c"}[:crashAgents]

// crashConfig declares crashAgents agents running command.
func crashConfig(image, command string) string {
	var b strings.Builder
	for _, name := range crashAgentNames {
		fmt.Fprintf(&b, "agent %q {\n  image   = %q\n  command = %s\n}\n\n", name, image, command)
	}
	return b.String()
}

// TestE2ECrash is issue 4's crash test. An apply of three agents is killed
// with SIGKILL, at each point in turn: after each driver call of a fresh
// apply (6 of them, 10 with egress gateways), through the test-only hook
// BOTTLEFILE_TEST_CRASH_AFTER, which kills the process right after an
// object was made on the engine and before the state records it, the worst
// window; at 3 random moments of a fresh apply; at 3 points and 1 random
// moment of a replacement of every agent container; at 3 points of a
// destroy; and once during the apply that recovers from one. After each
// crash:
//
//   - plan exits 0 and explains every change it shows: a create, a change
//     the configuration forces, or a "(because ...)" line;
//   - every container, network and image carrying the state's lineage
//     label is either recorded in the state (by id) or adopted, destroyed
//     or replaced by that plan, and every record whose object is gone is
//     re-created or forgotten by it: nothing is left untracked;
//   - apply (or destroy) exits 0, the next plan says "No changes.", and the
//     engine holds exactly what the state records.
//
// Finally destroy leaves nothing carrying the lineage label.
//
// A killed client does not cancel what it asked the engine for: a start or
// a force-remove in flight completes after the process is gone. Before each
// check the test waits until the lineage's objects stop changing (settle),
// as a user re-running apply a moment later would.
func TestE2ECrash(t *testing.T) {
	parallel(t)
	cli := dockertest.Client(t)
	image := dockertest.BusyboxImage(t, cli)
	c := &crashRig{t: t, cli: cli, dir: t.TempDir(), image: image}
	c.write(`["sleep", "600"]`)

	// How many driver calls a fresh apply makes: one per object.
	mustRun(t, c.dir, "apply", "-auto-approve")
	c.checkConverged("first apply", false)
	objects := len(c.readState())
	c.destroyAll()
	t.Logf("a fresh apply of %d agents makes %d objects", crashAgents, objects)

	// Fresh applies, killed after each of their driver calls.
	for n := 1; n <= objects; n++ {
		c.crashAfter(n, "apply", "-auto-approve")
		c.recover(fmt.Sprintf("fresh apply killed after %d of %d driver calls", n, objects), false)
		c.destroyAll()
	}
	// Fresh applies killed at random moments.
	for i := range 3 {
		c.killAt(randomDelay(), "apply", "-auto-approve")
		c.recover(fmt.Sprintf("fresh apply killed at random #%d", i+1), false)
		c.destroyAll()
	}

	// Replacements of every agent container (a command change): each makes
	// 3 deletes and 3 creates.
	mustRun(t, c.dir, "apply", "-auto-approve")
	for i, n := range []int{1, 3, 5} {
		c.write(fmt.Sprintf(`["sleep", "6%02d"]`, i+1))
		c.crashAfter(n, "apply", "-auto-approve")
		c.recover(fmt.Sprintf("replacement killed after %d driver calls", n), false)
	}
	c.write(`["sleep", "650"]`)
	c.killAt(randomDelay(), "apply", "-auto-approve")
	c.recover("replacement killed at random", false)

	// Destroys, killed: recovered by applying again, or by destroying again.
	c.crashAfter(2, "destroy", "-auto-approve")
	c.recover("destroy killed after 2 driver calls, then apply", false)
	// A crash while recovering: the destroy removed objects whose records
	// stay; the apply re-creating them is killed after the first create,
	// before that object's record is rewritten.
	c.crashAfter(3, "destroy", "-auto-approve")
	c.settle()
	c.crashAfter(1, "apply", "-auto-approve")
	c.recover("apply killed after 1 driver call while re-creating what a killed destroy removed", false)
	c.crashAfter(4, "destroy", "-auto-approve")
	c.recover("destroy killed after 4 driver calls, then destroy", true)

	c.destroyAll()
	if c.lineage == "" {
		t.Fatal("no lineage was ever recorded")
	}
	if left := c.live(); len(left) != 0 {
		t.Errorf("objects carrying the lineage left after destroy: %v", left)
	}
}

// randomDelay is when a random kill lands: 50 to 800 ms after start, which
// spans the plan, the network creates and the container starts.
func randomDelay() time.Duration {
	return time.Duration(50+rand.IntN(751)) * time.Millisecond
}

// crashRig runs the binary in one Bottlefile directory and checks the
// engine against its state.
type crashRig struct {
	t       *testing.T
	cli     *client.Client
	dir     string
	image   string
	lineage string // once known; cleanup is registered for it
	// agents are the agents the Bottlefile declares, each of which must
	// run once converged: crashAgentNames when nil.
	agents []string
	// engineRestarts is set when the engine itself was killed and
	// restarted: a restarting engine stops the containers that were
	// running, so a plan may start them again as stopped outside
	// bottlefile.
	engineRestarts bool
}

func (c *crashRig) write(command string) {
	c.t.Helper()
	writeBottlefile(c.t, c.dir, "%s", crashConfig(c.image, command))
}

// start starts the binary with extra environment.
func (c *crashRig) start(env []string, args ...string) (*exec.Cmd, *bytes.Buffer, *bytes.Buffer) {
	c.t.Helper()
	cmd := exec.Command(binary, append([]string{"-chdir=" + c.dir}, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.Env = append(append(os.Environ(), "NO_COLOR=1"), env...)
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	return cmd, &out, &errb
}

// crashAfter runs the binary with the crash hook set to n and requires
// that it died by SIGKILL.
func (c *crashRig) crashAfter(n int, args ...string) {
	c.t.Helper()
	cmd, out, errb := c.start([]string{CrashAfterEnv + "=" + strconv.Itoa(n)}, args...)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if !killed(err) {
			c.t.Fatalf("%s with the crash hook at %d: want death by SIGKILL, got %v\n--- stdout\n%s--- stderr\n%s", strings.Join(args, " "), n, err, out, errb)
		}
	case <-time.After(2 * time.Minute):
		cmd.Process.Kill()
		c.t.Fatalf("%s with the crash hook at %d did not end", strings.Join(args, " "), n)
	}
}

// killAt runs the binary and SIGKILLs it after d, unless it ended before.
func (c *crashRig) killAt(d time.Duration, args ...string) {
	c.t.Helper()
	cmd, out, errb := c.start(nil, args...)
	time.Sleep(d)
	kerr := cmd.Process.Kill()
	err := cmd.Wait()
	if kerr != nil || !killed(err) {
		c.t.Logf("%s ended before the kill at %s (%v):\n%s%s", strings.Join(args, " "), d, err, out, errb)
		if err != nil && !killed(err) {
			c.t.Fatalf("%s failed on its own: %v", strings.Join(args, " "), err)
		}
		return
	}
	c.t.Logf("%s killed at %s", strings.Join(args, " "), d)
}

func killed(err error) bool {
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) {
		return false
	}
	ws, ok := exitErr.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

// liveObject is a container, network or image carrying the lineage label.
type liveObject struct {
	kind, id, addr, state string
}

func (o liveObject) String() string {
	return fmt.Sprintf("%s %s (%s, %s)", o.kind, o.addr, short(o.id), o.state)
}

// live lists the containers, networks and images carrying the lineage
// label on the engine, sorted.
func (c *crashRig) live() []liveObject {
	c.t.Helper()
	if c.lineage == "" {
		return nil
	}
	var out []liveObject
	for _, ct := range containersWith(c.t, c.cli, drivers.LabelLineage+"="+c.lineage) {
		out = append(out, liveObject{"container", ct.ID, ct.Labels[drivers.LabelAddress], ct.State})
	}
	for _, n := range networksWith(c.t, c.cli, drivers.LabelLineage+"="+c.lineage) {
		out = append(out, liveObject{"network", n.ID, n.Labels[drivers.LabelAddress], ""})
	}
	imgs, err := c.cli.ImageList(context.Background(), image.ListOptions{Filters: filters.NewArgs(filters.Arg("label", drivers.LabelLineage+"="+c.lineage))})
	if err != nil {
		c.t.Fatal(err)
	}
	for _, img := range imgs {
		out = append(out, liveObject{"image", img.ID, img.Labels[drivers.LabelAddress], ""})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].addr+out[i].id < out[j].addr+out[j].id })
	return out
}

// readState returns the state's lineage and records, and registers the
// cleanup of the lineage the first time it is seen.
func (c *crashRig) readState() []state.Record {
	c.t.Helper()
	l, recs := readState(c.t, c.dir)
	if l != "" && c.lineage == "" {
		c.lineage = l
		dockertest.Cleanup(c.t, c.cli, l)
	} else if l != c.lineage {
		c.t.Fatalf("the lineage changed from %q to %q", c.lineage, l)
	}
	return recs
}

// settle waits until the engine has finished what the killed process had
// asked of it: the lineage's objects are the same over 600 ms and none is
// being removed.
func (c *crashRig) settle() {
	c.t.Helper()
	c.readState()
	if c.lineage == "" {
		return // killed before the first state write: nothing can be ours
	}
	deadline := time.Now().Add(15 * time.Second)
	prev, same := "", 0
	for time.Now().Before(deadline) {
		objs := c.live()
		snap := fmt.Sprint(objs)
		busy := slices.ContainsFunc(objs, func(o liveObject) bool { return o.state == "removing" || o.state == "restarting" })
		if snap == prev && !busy {
			if same++; same == 3 {
				return
			}
		} else {
			same = 0
		}
		prev = snap
		time.Sleep(200 * time.Millisecond)
	}
	c.t.Fatalf("the engine did not settle after the crash: %s", prev)
}

// planChange is one change of a human plan.
type planChange struct {
	addr, headline string
	reasons        []string
	body           []string
}

// explained reports whether the plan says why the change is needed: a
// create or (in a destroy plan) a destroy is what was asked for; anything
// else needs a forcing attribute or a reason.
func (p planChange) explained(destroy bool) bool {
	if len(p.reasons) > 0 || p.headline == "will be created" && !destroy || p.headline == "will be destroyed" && destroy {
		return true
	}
	return slices.ContainsFunc(p.body, func(l string) bool { return strings.Contains(l, "# forces replacement") })
}

// parsePlan reads the changes of a human plan.
func parsePlan(out string) []planChange {
	var changes []planChange
	for _, line := range strings.Split(out, "\n") {
		switch {
		case strings.HasPrefix(line, "  # (because "):
			if len(changes) > 0 {
				changes[len(changes)-1].reasons = append(changes[len(changes)-1].reasons, strings.TrimPrefix(line, "  # "))
			}
		case strings.HasPrefix(line, "  # "):
			addr, headline, _ := strings.Cut(strings.TrimPrefix(line, "  # "), " ")
			changes = append(changes, planChange{addr: addr, headline: headline})
		case len(changes) > 0 && line != "" && !strings.HasPrefix(line, "Plan:"):
			changes[len(changes)-1].body = append(changes[len(changes)-1].body, line)
		}
	}
	return changes
}

// recover checks what plan says after a crash, then converges with apply
// (or destroy) and checks the result.
func (c *crashRig) recover(what string, destroy bool) {
	t := c.t
	t.Helper()
	c.settle()
	recs := c.readState()
	live := c.live()

	planArgs := []string{"plan"}
	if destroy {
		planArgs = append(planArgs, "-destroy")
	}
	r := bottlefile(t, c.dir, planArgs...)
	if r.code != 0 {
		t.Fatalf("%s: plan: %s", what, r)
	}
	changes := parsePlan(r.stdout)
	byAddr := map[string]planChange{}
	var summary []string
	for _, ch := range changes {
		byAddr[ch.addr] = ch
		summary = append(summary, strings.Join(append([]string{ch.addr + " " + ch.headline}, ch.reasons...), " "))
		if !ch.explained(destroy) {
			t.Errorf("%s: the plan does not say why %s %s:\n%s", what, ch.addr, ch.headline, r.stdout)
		}
		// Only bottlefile touched the engine, and what a cut-off apply
		// made matches the configuration it was making: nothing may be
		// blamed on the outside or replaced for not matching. Only an
		// engine that restarted stops containers, and they are started,
		// never replaced.
		for _, why := range ch.reasons {
			if c.engineRestarts && ch.headline == "will be started" && strings.Contains(why, "stopped outside bottlefile") {
				continue
			}
			if strings.Contains(why, "(re-created outside bottlefile)") || strings.Contains(why, "stopped outside bottlefile") || strings.Contains(why, "does not match the configuration") {
				t.Errorf("%s: %s %s for a reason a crash cannot cause: %s\n%s", what, ch.addr, ch.headline, why, r.stdout)
			}
		}
	}
	t.Logf("%s: plan: %s", what, strings.Join(summary, "; "))

	// Nothing untracked: every live object is recorded, or the plan takes
	// it in or removes it.
	recorded := map[string]state.Record{}
	for _, rec := range recs {
		recorded[rec.ID] = rec
	}
	liveIDs := map[string]bool{}
	for _, o := range live {
		liveIDs[o.id] = true
		if rec, ok := recorded[o.id]; ok && rec.Addr == o.addr {
			continue
		}
		switch byAddr[o.addr].headline {
		case "will be adopted into state", "will be started", "will be destroyed", "must be replaced":
		default:
			t.Errorf("%s: %s carries the lineage but is neither recorded nor adopted or removed by the plan:\n%s", what, o, r.stdout)
		}
	}
	// Every record whose object is gone is re-created or forgotten.
	for _, rec := range recs {
		if liveIDs[rec.ID] {
			continue
		}
		switch h := byAddr[rec.Addr].headline; {
		case h == "will be created", h == "must be replaced", strings.HasPrefix(h, "will be forgotten"),
			// re-recorded: an apply made its successor and was cut off
			h == "will be adopted into state", h == "will be started":
		default:
			t.Errorf("%s: %s is recorded as %s, which is gone, and the plan does not deal with it (%q):\n%s", what, rec.Addr, short(rec.ID), h, r.stdout)
		}
	}

	cmd, word := "apply", "Apply complete!"
	if destroy {
		cmd, word = "destroy", "Destroy complete!"
	}
	r = bottlefile(t, c.dir, cmd, "-auto-approve")
	if r.code != 0 || !strings.Contains(r.stdout, word) && len(changes) > 0 {
		t.Fatalf("%s: %s does not converge: %s", what, cmd, r)
	}
	for _, line := range strings.Split(r.stdout, "\n") {
		if strings.Contains(line, "could not be started") {
			t.Logf("%s: %s said: %s", what, cmd, strings.TrimSpace(line))
		}
	}
	r = bottlefile(t, c.dir, planArgs...)
	if r.code != 0 || !strings.Contains(r.stdout, "No changes.") {
		t.Fatalf("%s: the plan after %s is not empty: %s", what, cmd, r)
	}
	c.checkConverged(what, destroy)
}

// checkConverged requires that the engine holds exactly what the state
// records, every agent's container running; or, destroyed, nothing.
func (c *crashRig) checkConverged(what string, destroyed bool) {
	t := c.t
	t.Helper()
	recs := c.readState()
	live := c.live()
	if destroyed {
		if len(recs) != 0 || len(live) != 0 {
			t.Fatalf("%s: after destroy, want no records and nothing live, got records %v and live %v", what, recs, live)
		}
		return
	}
	recorded := map[string]string{}
	for _, rec := range recs {
		recorded[rec.ID] = rec.Addr
	}
	liveIDs := map[string]bool{}
	running := map[string]bool{}
	for _, o := range live {
		liveIDs[o.id] = true
		if recorded[o.id] != o.addr {
			t.Errorf("%s: after converging, %s is not what the state records", what, o)
		}
		if o.kind == "container" {
			if o.state != "running" {
				t.Errorf("%s: after converging, %s is not running", what, o)
			}
			running[o.addr] = true
		}
	}
	for _, rec := range recs {
		if (rec.Kind == "container" || rec.Kind == "network" || rec.Kind == "image") && !liveIDs[rec.ID] {
			t.Errorf("%s: after converging, %s (%s %s) is recorded but not live", what, rec.Addr, rec.Kind, short(rec.ID))
		}
	}
	agents := c.agents
	if agents == nil {
		agents = crashAgentNames
	}
	for _, name := range agents {
		if !running["agent."+name] {
			t.Errorf("%s: after converging, agent.%s has no running container; live: %v", what, name, live)
		}
	}
}

// destroyAll destroys everything and checks nothing is left.
func (c *crashRig) destroyAll() {
	c.t.Helper()
	mustRun(c.t, c.dir, "destroy", "-auto-approve")
	c.checkConverged("destroy", true)
}

func short(id string) string { return id[:min(12, len(id))] }
