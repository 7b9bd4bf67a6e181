package planner_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/planner"
)

// plainCoder is one agent without a snapshot policy.
const plainCoder = `
agent "coder" {
  image   = "busybox:1"
  command = ["sleep", "600"]
}
`

// restartedBench applies plainCoder on a fake of three nodes (the agent
// on node1) and writes a file in it.
func restartedBench(t *testing.T) *bench {
	b := newBench(t)
	b.fake.Nodes = []string{"node1", "node2", "node3"}
	b.write(plainCoder)
	b.apply(planner.Options{})
	b.fake.WriteFile(b.lineage(), "agent.coder", "/workspace/notes.txt")
	if r := b.records()["agent.coder"]; r.Computed[drivers.ComputedInstance] == "" || r.Computed[drivers.ComputedNode] != "node1" {
		t.Fatalf("the record holds no instance on node1: %v", r.Computed)
	}
	return b
}

// TestRestartedByClusterResumes: a snapshot is taken; the cluster then
// starts the agent again on node3 from its image (node1 is down). The plan
// says so in words and replaces it, resumed from the snapshot; after the
// apply the agent has its file, and the next plan has nothing to do.
func TestRestartedByClusterResumes(t *testing.T) {
	b := restartedBench(t)
	b.apply(planner.Options{Take: []planner.TakeRequest{{Agent: "agent.coder"}}})
	if !b.fake.Restart(b.lineage(), "agent.coder", "node3", "node node1 is down") {
		t.Fatal("no instance to restart")
	}
	if files := b.fake.Files(b.lineage(), "agent.coder"); len(files) != 0 {
		t.Fatalf("the new instance has %v: the test proves nothing", files)
	}
	p := b.plan(planner.Options{})
	c := change(p, "agent.coder")
	if c.Action != planner.Replace || c.BootFrom != "agent.coder.snapshot.1" {
		t.Fatalf("plan:\n%s", p)
	}
	want := []string{
		"agent.coder was restarted by the cluster on node3 from its image (node node1 is down); it will be resumed from agent.coder.snapshot.1, taken 09:01 UTC",
		"what it wrote on node1 after agent.coder.snapshot.1 was taken is lost with that task",
	}
	if len(planner.ReasonTexts(c.Reasons)) < 2 || !slices.Equal(planner.ReasonTexts(c.Reasons)[:2], []string{strings.Replace(want[0], "09:01 UTC", clockOf(planner.ReasonTexts(c.Reasons)[0]), 1), want[1]}) {
		t.Errorf("reasons:\n%s\nwant:\n%s", strings.Join(planner.ReasonTexts(c.Reasons), "\n"), strings.Join(want, "\n"))
	}
	if got := pending(p); strings.Count(got, "\n") != 0 || !strings.HasPrefix(got, "-/+ agent.coder (") {
		t.Errorf("the plan does more than resume the agent:\n%s", pending(p))
	}
	b.apply(planner.Options{})
	if files := b.fake.Files(b.lineage(), "agent.coder"); !slices.Equal(files, []string{"/workspace/notes.txt"}) {
		t.Errorf("after the resume the agent has %v", files)
	}
	if p := b.plan(planner.Options{}); p.Applyable() {
		t.Errorf("the plan after the resume:\n%s", p)
	}
}

// clockOf is the "HH:MM UTC" (or dated) time after "taken " in a reason.
func clockOf(reason string) string {
	_, t, _ := strings.Cut(reason, "taken ")
	return t
}

// TestRestartedByClusterNoSnapshot: without a snapshot newer than what the
// new task booted from, the plan says what happened and only records the
// new task; the plan after that has nothing to do.
func TestRestartedByClusterNoSnapshot(t *testing.T) {
	b := restartedBench(t)
	b.fake.Restart(b.lineage(), "agent.coder", "node2", "node node1 was drained")
	p := b.plan(planner.Options{})
	c := change(p, "agent.coder")
	want := "agent.coder was restarted by the cluster on node2 from its image (node node1 was drained); no snapshot of it is newer than what it booted from, so what it wrote on node1 is lost and the new task is recorded"
	if c.Action != planner.Update || !c.StateOnly || len(planner.ReasonTexts(c.Reasons)) != 1 || planner.ReasonTexts(c.Reasons)[0] != want {
		t.Fatalf("plan:\n%s", p)
	}
	b.apply(planner.Options{})
	if r := b.records()["agent.coder"]; r.Computed[drivers.ComputedNode] != "node2" {
		t.Errorf("the record's node after the apply: %v", r.Computed)
	}
	if p := b.plan(planner.Options{}); p.Applyable() {
		t.Errorf("the plan after recording the new task:\n%s", p)
	}
}

// TestRestartedByClusterNotRunningYet: the cluster replaced the task and
// the new one is still being started (a node that came back, a pull):
// the plan says the cluster restarted it and what was lost, never that it
// was stopped outside bottlefile.
func TestRestartedByClusterNotRunningYet(t *testing.T) {
	b := restartedBench(t)
	b.apply(planner.Options{Take: []planner.TakeRequest{{Agent: "agent.coder"}}})
	if !b.fake.Restart(b.lineage(), "agent.coder", "node1", "its task on node node1 failed") || !b.fake.Stop(b.lineage(), "agent.coder") {
		t.Fatal("no instance to restart")
	}
	p := b.plan(planner.Options{})
	c := change(p, "agent.coder")
	all := strings.Join(planner.ReasonTexts(c.Reasons), "\n")
	if c.Action != planner.Replace || c.BootFrom != "agent.coder.snapshot.1" || strings.Contains(all, "stopped outside bottlefile") ||
		!strings.Contains(all, "was restarted by the cluster on node1") || !strings.Contains(all, "after agent.coder.snapshot.1 was taken is lost") {
		t.Errorf("plan %s, reasons:\n%s", c.Action, all)
	}
}
