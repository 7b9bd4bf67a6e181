package command

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bottlefile/bottlefile/drivers"
)

const threeAgents = `
agent "broken" {
  image = "busybox:1"
}

agent "follower" {
  image      = "busybox:1"
  env        = { LEADER = agent.broken.id }
}

agent "independent" {
  image = "busybox:1"
}
`

// TestPartialFailure: one agent fails to create; the agent that refers to
// it is not started, the independent one is applied, the exit code is 1,
// the summary says what was and was not done, and the next plan picks up
// exactly what is left.
func TestPartialFailure(t *testing.T) {
	w := newWorkspace(t)
	w.write(threeAgents)
	w.fake.FailApply = map[string]error{"agent.broken": errors.New(`image "busybox:1" not found`)}
	code, out, errs := w.run("apply", "-auto-approve")
	if code != 1 {
		t.Fatalf("want exit 1, got %d\n%s%s", code, out, errs)
	}
	for _, want := range []string{
		"agent.independent: Creation complete",
		"agent.follower: skipped, because create agent.broken did not complete",
		"agent.follower.network: skipped, because create agent.broken did not complete",
		"Apply incomplete. Done: 3 added, 0 changed, 0 destroyed. Failed: 1. Not started: 2.",
		"failed:      create agent.broken",
		"not started: create agent.follower",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("apply output lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(errs, "Failed to create agent.broken") || !strings.Contains(errs, "not found") {
		t.Errorf("the error does not name the failed step and its cause:\n%s", errs)
	}
	live := map[string]bool{}
	for _, o := range w.fake.Objects(w.lineage()) {
		live[o.Addr] = true
	}
	if !live["agent.independent"] || live["agent.follower"] || live["agent.broken"] {
		t.Errorf("live objects after a partial failure: %v", live)
	}

	// State recorded everything that was done: the next plan creates only
	// what failed or was skipped, and then converges.
	plan := w.must("plan")
	if !strings.Contains(plan, "Plan: 3 to add, 0 to change, 0 to destroy.") {
		t.Errorf("plan after a partial failure:\n%s", plan)
	}
	w.fake.FailApply = nil
	w.must("apply", "-auto-approve")
	if out := w.must("plan"); !strings.Contains(out, "No changes.") {
		t.Errorf("not converged:\n%s", out)
	}
	// The value known only after apply reached the follower.
	broken := ""
	for _, o := range w.fake.Objects(w.lineage()) {
		if o.Addr == "agent.broken" {
			broken = o.ID
		}
	}
	for _, req := range w.fake.ApplyRequests {
		if req.Object.Addr == "agent.follower" && !strings.Contains(req.Object.Attrs["env"].GoString(), broken) {
			t.Errorf("agent.follower was created without agent.broken's id %s: %s", broken, req.Object.Attrs["env"].GoString())
		}
	}
}

// TestDestroyIncomplete: a destroy that fails says "Destroy incomplete.",
// not "Apply incomplete.", in the human summary and in the JSON one.
func TestDestroyIncomplete(t *testing.T) {
	w := newWorkspace(t)
	w.write(threeAgents)
	w.must("apply", "-auto-approve")
	w.fake.FailApply = map[string]error{"agent.independent": errors.New("engine said no")}
	code, out, _ := w.run("destroy", "-auto-approve")
	if code != 1 {
		t.Fatalf("want exit 1, got %d\n%s", code, out)
	}
	_, summary, _ := strings.Cut(out, "\nDestroy incomplete.")
	golden(t, "testdata/destroy-incomplete.txt", "Destroy incomplete."+summary)
	if strings.Contains(out, "Apply incomplete") {
		t.Errorf("a failed destroy says Apply incomplete:\n%s", out)
	}
	_, asJSON, _ := w.run("destroy", "-auto-approve", "-json")
	if !strings.Contains(asJSON, `"Destroy incomplete: 1 failed, 1 not started"`) {
		t.Errorf("the JSON summary of a failed destroy:\n%s", asJSON)
	}
}

// TestApplyWorkloadExited: a workload that exits right after apply
// started it fails its action with its exit code and last lines, what
// depends on it is not started, and the independent one is applied.
// -wait reaches the driver, and -wait=0 still looks once.
func TestApplyWorkloadExited(t *testing.T) {
	w := newWorkspace(t)
	w.write(threeAgents)
	var waits []time.Duration
	var mu sync.Mutex
	w.fake.SettleFn = func(_ context.Context, req drivers.SettleRequest) error {
		mu.Lock()
		waits = append(waits, req.Wait)
		mu.Unlock()
		if req.Object.Addr == "agent.broken" {
			return &drivers.ExitError{Addr: req.Object.Addr, Exit: drivers.Exit{Code: 127,
				Last: []string{`[FATAL tini (7)] exec claud failed: No such file or directory`}}}
		}
		return nil
	}
	code, out, errs := w.run("apply", "-auto-approve", "-wait=1500ms")
	if code != 1 {
		t.Fatalf("want exit 1, got %d\n%s%s", code, out, errs)
	}
	for _, want := range []string{
		"agent.follower: skipped, because create agent.broken did not complete",
		"failed:      create agent.broken",
		"agent.independent: Creation complete",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("apply output lacks %q:\n%s", want, out)
		}
	}
	for _, want := range []string{"agent.broken exited with code 127", "exec claud failed"} {
		if !strings.Contains(errs, want) {
			t.Errorf("the error lacks %q:\n%s", want, errs)
		}
	}
	// Only workloads are watched (not networks), each with -wait.
	if len(waits) != 2 || waits[0] != 1500*time.Millisecond {
		t.Errorf("Settle waits = %v, want two of 1.5s (agent.broken, agent.independent)", waits)
	}

	waits = nil
	w.fake.SettleFn = func(_ context.Context, req drivers.SettleRequest) error {
		waits = append(waits, req.Wait)
		return nil
	}
	w.must("apply", "-auto-approve", "-wait=0")
	if len(waits) != 1 || waits[0] != 0 {
		t.Errorf("with -wait=0 Settle waits = %v, want one of 0 (agent.follower, the one left to start)", waits)
	}
}
