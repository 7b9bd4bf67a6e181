package planner_test

import (
	"strings"
	"testing"

	"github.com/bottlefile/bottlefile/planner"
)

const twoCoders = `
agent "coder" {
  image   = "busybox:1"
  command = ["sleep", "600"]
}

agent "other" {
  image   = "busybox:1"
  command = ["sleep", "600"]
}
`

// TestStopStart: stop plans stopping the named agent's workload and
// nothing else, and records it as stopped on purpose; the next plan has
// nothing to do (a workload found stopped otherwise is started again);
// start runs it again with its files, and clears the mark.
func TestStopStart(t *testing.T) {
	b := newBench(t)
	b.write(twoCoders)
	b.apply(planner.Options{})
	b.fake.WriteFile(b.lineage(), "agent.coder", "/workspace/notes.txt")

	p := b.apply(planner.Options{Stop: []string{"agent.coder"}})
	if got := pending(p); got != "|| agent.coder" {
		t.Fatalf("stop plans:\n%s", got)
	}
	if s := p.Summary(); s.Stop != 1 || s.String() != "Plan: 0 to add, 0 to change, 0 to destroy, 1 to stop." {
		t.Errorf("summary %+v: %s", s, s)
	}
	if r := b.records()["agent.coder"]; r.Computed[planner.StoppedKey] == "" {
		t.Fatalf("the record is not marked stopped: %v", r.Computed)
	}
	if p := b.plan(planner.Options{}); p.Applyable() {
		t.Fatalf("a plan after stop has something to do:\n%s", pending(p))
	}
	// Stopping it again has nothing to do.
	if p := b.plan(planner.Options{Stop: []string{"agent.coder"}}); p.Applyable() {
		t.Fatalf("a second stop plans:\n%s", pending(p))
	}

	p = b.apply(planner.Options{Start: []string{"agent.coder"}})
	if got := pending(p); got != "> agent.coder" {
		t.Fatalf("start plans:\n%s", got)
	}
	if r := b.records()["agent.coder"]; r.Computed[planner.StoppedKey] != "" {
		t.Errorf("start left the stopped mark: %v", r.Computed)
	}
	if files := b.fake.Files(b.lineage(), "agent.coder"); len(files) != 1 {
		t.Errorf("after start the agent has %v, want its notes", files)
	}
	if p := b.plan(planner.Options{}); p.Applyable() {
		t.Fatalf("a plan after start has something to do:\n%s", pending(p))
	}
}

// TestStopConfigChange: a configuration change that replaces a stopped
// agent runs the new workload; start refuses an agent whose change is
// not applied yet; a workload stopped outside bottlefile is still
// started by the next plan.
func TestStopConfigChange(t *testing.T) {
	b := newBench(t)
	b.write(twoCoders)
	b.apply(planner.Options{})
	b.apply(planner.Options{Stop: []string{"agent.coder"}})
	b.write(strings.Replace(twoCoders, `["sleep", "600"]`, `["sleep", "700"]`, 1))
	if _, err := b.tryPlan(planner.Options{Start: []string{"agent.coder"}}); !strings.Contains(err, "has a change to apply (replace)") {
		t.Errorf("start of an agent with a pending replacement: %q", err)
	}
	p := b.apply(planner.Options{})
	if c := change(p, "agent.coder"); c == nil || c.Action != planner.Replace {
		t.Fatalf("plan:\n%s", pending(p))
	}
	if r := b.records()["agent.coder"]; r.Computed[planner.StoppedKey] != "" {
		t.Errorf("the replacement is recorded stopped: %v", r.Computed)
	}
	b.fake.Stop(b.lineage(), "agent.other")
	if c := change(b.plan(planner.Options{}), "agent.other"); c == nil || c.Action != planner.Start {
		t.Errorf("a workload stopped outside bottlefile is not started again")
	}
	if _, err := b.tryPlan(planner.Options{Stop: []string{"agent.nope"}}); !strings.Contains(err, "agent.nope names no agent") {
		t.Errorf("stop of an unknown agent: %q", err)
	}
}

// TestStopStartKeepsPolicy: a stop and a start plan no snapshot_policy,
// yet the workload keeps recording the one it was applied with, so the
// plan after them has nothing to do (a start once dropped it, and the
// next plan recorded it again as an update).
func TestStopStartKeepsPolicy(t *testing.T) {
	b := newBench(t)
	b.write(`
agent "coder" {
  image   = "busybox:1"
  command = ["sleep", "600"]
  snapshot_policy {
    before = ["destroy"]
  }
}
`)
	b.apply(planner.Options{})
	applied := b.records()["agent.coder"].Computed[planner.PolicyKey]
	if applied == "" {
		t.Fatal("apply recorded no snapshot_policy")
	}
	for _, step := range []struct {
		verb string
		opts planner.Options
	}{
		{"stop", planner.Options{Stop: []string{"agent.coder"}}},
		{"start", planner.Options{Start: []string{"agent.coder"}}},
	} {
		b.apply(step.opts)
		if got := b.records()["agent.coder"].Computed[planner.PolicyKey]; got != applied {
			t.Errorf("after %s the record's policy is %q, want %q", step.verb, got, applied)
		}
		if p := b.plan(planner.Options{}); p.Applyable() {
			t.Errorf("a plan after %s has something to do:\n%s", step.verb, pending(p))
		}
	}
}
