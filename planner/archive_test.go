package planner_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/executor"
	"github.com/bottlefile/bottlefile/planner"
	"github.com/bottlefile/bottlefile/planner/dag"
	"github.com/bottlefile/bottlefile/state"
)

// newExecutor is the executor bench.apply uses, on store.
func newExecutor(b *bench, store *state.Store) *executor.Executor {
	lineage, err := store.Init()
	if err != nil {
		b.t.Fatal(err)
	}
	return &executor.Executor{State: store, Lineage: lineage, Runtimes: b.last.Runtimes, Parallelism: 10, Resolver: b.last}
}

// archived applies an archive of agent.coder and checks what it left: the
// snapshot, the records marked, nothing of the agent live but the
// snapshot, and a plan after it with nothing to do.
func archived(t *testing.T, b *bench) string {
	t.Helper()
	p := b.apply(planner.Options{Archive: []string{"agent.coder"}})
	snap := ""
	for _, c := range p.Changes {
		if c.Takes() {
			snap = c.Addr
		}
	}
	if snap == "" {
		t.Fatalf("archive takes no snapshot:\n%s", p)
	}
	recs := b.records()
	for _, addr := range []string{"agent.coder", "agent.coder.network"} {
		if recs[addr].Computed[planner.ArchivedKey] == "" {
			t.Errorf("%s is not marked archived: %v", addr, recs[addr].Computed)
		}
	}
	if got := recs["agent.coder"].Computed[planner.ArchiveSnapshotKey]; got != snap {
		t.Errorf("agent.coder is archived in %q, want %s", got, snap)
	}
	for _, addr := range b.live() {
		if addr == "agent.coder" || addr == "agent.coder.network" {
			t.Errorf("%s is still live after the archive", addr)
		}
	}
	if p := b.plan(planner.Options{}); p.Applyable() {
		t.Fatalf("a plan after archive has something to do:\n%s", pending(p))
	}
	return snap
}

// TestArchive: archive plans a snapshot of the agent, then its workload
// and network archived after it, and nothing of the other agent; the next
// plan has nothing to do; archiving again has nothing to do; start
// resumes it from the snapshot with its files, and clears the marks.
func TestArchive(t *testing.T) {
	b := newBench(t)
	b.write(twoCoders)
	b.apply(planner.Options{})
	b.fake.WriteFile(b.lineage(), "agent.coder", "/workspace/notes.txt")

	p := b.plan(planner.Options{Archive: []string{"agent.coder"}})
	want := "zz agent.coder (agent.coder is archived: its filesystem is kept in agent.coder.snapshot.1, and its workloads and networks are removed until start, exec or an apply that changes it resumes it)\n" +
		"zz agent.coder.network (agent.coder is archived: its filesystem is kept in agent.coder.snapshot.1, and its workloads and networks are removed until start, exec or an apply that changes it resumes it)\n" +
		"+ agent.coder.snapshot.1 (archive: agent.coder's filesystem is committed before its workloads are removed)"
	if got := pending(p); got != want {
		t.Fatalf("archive plans:\n%s\nwant:\n%s", got, want)
	}
	if s := p.Summary().String(); s != "Plan: 0 to add, 0 to change, 0 to destroy, 2 to archive, 1 to snapshot." {
		t.Errorf("summary: %s", s)
	}
	if c := change(p, "agent.coder"); c.Headline() != "will be archived in agent.coder.snapshot.1" || c.SnapshotFirst != "agent.coder.snapshot.1" {
		t.Errorf("the workload's change: %q, snapshot first %q", c.Headline(), c.SnapshotFirst)
	}
	snap := archived(t, b)
	if !slices.Contains(b.live(), "agent.other") {
		t.Errorf("the other agent went too: %v", b.live())
	}
	if p := b.plan(planner.Options{Archive: []string{"agent.coder"}}); p.Applyable() {
		t.Fatalf("a second archive plans:\n%s", pending(p))
	}
	if p := b.plan(planner.Options{Stop: []string{"agent.coder"}}); p.Applyable() {
		t.Fatalf("stop of an archived agent plans:\n%s", pending(p))
	}

	p = b.apply(planner.Options{Start: []string{"agent.coder"}})
	if got := pending(p); !strings.HasPrefix(got, "+ agent.coder (agent.coder is archived (since ") ||
		!strings.Contains(got, "and is resumed for start) (it resumes from "+snap+", where it was archived on ") ||
		!strings.Contains(got, "+ agent.coder.network (agent.coder is archived") {
		t.Fatalf("start of an archived agent plans:\n%s", got)
	}
	if c := change(p, "agent.coder"); c.BootFrom != snap {
		t.Errorf("the workload boots from %q, want %s", c.BootFrom, snap)
	}
	if files := b.fake.Files(b.lineage(), "agent.coder"); len(files) != 1 {
		t.Errorf("after the resume the agent has %v, want its notes", files)
	}
	for addr, r := range b.records() {
		if r.Computed[planner.ArchivedKey] != "" || r.Computed[planner.ArchiveSnapshotKey] != "" {
			t.Errorf("%s keeps its archive marks after the resume: %v", addr, r.Computed)
		}
	}
	if p := b.plan(planner.Options{}); p.Applyable() {
		t.Fatalf("a plan after the resume has something to do:\n%s", pending(p))
	}
}

// TestArchiveResumeOnChange: an apply that changes an archived agent
// resumes it from its archive snapshot, with its files, even with resume
// = false; one that changes only the other agent leaves it archived.
func TestArchiveResumeOnChange(t *testing.T) {
	b := newBench(t)
	src := strings.Replace(twoCoders, `command = ["sleep", "600"]`, `command = ["sleep", "600"]
  resume  = false`, 1)
	b.write(src)
	b.apply(planner.Options{})
	b.fake.WriteFile(b.lineage(), "agent.coder", "/workspace/notes.txt")
	snap := archived(t, b)

	// A change of the other agent: the archived one stays archived.
	b.write(strings.Replace(src, `["sleep", "600"]
}`, `["sleep", "700"]
}`, 1))
	p := b.apply(planner.Options{})
	if got := pending(p); got != "-/+ agent.other forced by command" {
		t.Fatalf("a change of the other agent plans:\n%s", got)
	}

	b.write(strings.Replace(strings.Replace(src, `["sleep", "600"]
}`, `["sleep", "700"]
}`, 1), `["sleep", "600"]`, `["sleep", "800"]`, 1))
	p = b.apply(planner.Options{})
	c := change(p, "agent.coder")
	if c == nil || c.Action != planner.Create || c.BootFrom != snap {
		t.Fatalf("a change of the archived agent plans:\n%s", pending(p))
	}
	if got := pending(p); !strings.Contains(got, "is resumed for a change of its configuration") {
		t.Errorf("the plan does not say why it resumes:\n%s", got)
	}
	if files := b.fake.Files(b.lineage(), "agent.coder"); len(files) != 1 {
		t.Errorf("after the resume the agent has %v, want its notes", files)
	}
	if p := b.plan(planner.Options{}); p.Applyable() {
		t.Fatalf("a plan after the resume has something to do:\n%s", pending(p))
	}
}

// TestArchiveKeepsSnapshot: the archive snapshot is kept by retention
// while the agent is archived, whatever keep_last says; start refuses an
// archived agent whose configuration changed; destroy forgets the
// records and keeps the snapshot as the policy says.
func TestArchiveKeepsSnapshot(t *testing.T) {
	b := newBench(t)
	src := `
agent "coder" {
  image   = "busybox:1"
  command = ["sleep", "600"]
  snapshot_policy {
    before    = ["destroy"]
    keep_last = 1
  }
}
`
	b.write(src)
	b.apply(planner.Options{})
	snap := archived(t, b)
	// A snapshot taken after it would push it out by keep_last, were it
	// not kept for the archive: an archived agent has no workload to
	// commit, so one is made by hand in the state's place.
	if _, err := b.tryPlan(planner.Options{Take: []planner.TakeRequest{{Agent: "agent.coder"}}}); !strings.Contains(err, "Cannot snapshot agent.coder") {
		t.Errorf("snapshot take of an archived agent: %q", err)
	}

	b.write(strings.Replace(src, `"600"`, `"700"`, 1))
	if _, err := b.tryPlan(planner.Options{Start: []string{"agent.coder"}}); !strings.Contains(err, "is archived, and agent.coder has a change to apply (create)") {
		t.Errorf("start of a changed archived agent: %q", err)
	}
	b.write(src)

	p := b.apply(planner.Options{Destroy: true})
	for _, addr := range []string{"agent.coder", "agent.coder.network"} {
		c := change(p, addr)
		if c == nil || c.Action != planner.Forget || c.Reasons[0].Code != planner.ReasonArchivedForget {
			t.Errorf("destroy plans for %s:\n%s", addr, p)
		}
	}
	if _, ok := b.records()[snap]; !ok || len(p.Kept) != 1 || p.Kept[0].Addr != snap {
		t.Errorf("destroy did not keep the archive snapshot %s (kept %v)", snap, p.Kept)
	}
	if _, ok := b.records()["agent.coder"]; ok {
		t.Error("destroy kept the archived agent's record")
	}
}

// TestArchiveCutOff: an archive cut off after its snapshot and the mark,
// before the workload was removed, is finished by the next plan, which
// commits the workload again first (it may have written since); nothing
// it wrote is lost.
func TestArchiveCutOff(t *testing.T) {
	b := newBench(t)
	b.write(twoCoders)
	b.apply(planner.Options{})
	b.fake.WriteFile(b.lineage(), "agent.coder", "/workspace/notes.txt")
	cut := errors.New("cut off")
	b.fake.BeforeApply = func(_ context.Context, req drivers.ApplyRequest) error {
		if req.Op == drivers.OpDelete && req.Object.Addr == "agent.coder" {
			return cut
		}
		return nil
	}
	p := b.plan(planner.Options{Archive: []string{"agent.coder"}})
	store := b.open(false)
	ex := newExecutor(b, store)
	if _, diags := ex.Apply(context.Background(), p); !diags.HasErrors() {
		t.Fatal("the cut-off archive did not fail")
	}
	store.Close()
	b.fake.BeforeApply = nil
	if r := b.records()["agent.coder"]; r.Computed[planner.ArchivedKey] == "" || !slices.Contains(b.live(), "agent.coder") {
		t.Fatalf("the cut-off left %v, live %v", r.Computed, b.live())
	}
	b.fake.WriteFile(b.lineage(), "agent.coder", "/workspace/later.txt")

	p = b.plan(planner.Options{})
	got := pending(p)
	if !strings.Contains(got, "+ agent.coder.snapshot.2 (archive:") || !strings.Contains(got, "zz agent.coder (an archive of agent.coder was cut off") {
		t.Fatalf("the plan after the cut-off:\n%s", got)
	}
	b.apply(planner.Options{})
	if p := b.plan(planner.Options{}); p.Applyable() {
		t.Fatalf("a plan after the finished archive has something to do:\n%s", pending(p))
	}
	if r := b.records()["agent.coder"]; r.Computed[planner.ArchiveSnapshotKey] != "agent.coder.snapshot.2" {
		t.Errorf("archived in %q", r.Computed[planner.ArchiveSnapshotKey])
	}
	b.apply(planner.Options{Start: []string{"agent.coder"}})
	if files := b.fake.Files(b.lineage(), "agent.coder"); len(files) != 2 {
		t.Errorf("after the resume the agent has %v, want both files", files)
	}
}

// TestArchiveInstanceStopped: an instance of a for_each agent, stopped
// with bottlefile stop, is archived alone (its snapshot committed from the
// stopped workload); start resumes it running, without the stopped mark,
// with its files; the other instances are untouched.
func TestArchiveInstanceStopped(t *testing.T) {
	b := newBench(t)
	b.writeFixture("three.bf")
	b.apply(planner.Options{})
	addr := `agent.coder["b"]`
	b.fake.WriteFile(b.lineage(), addr, "/workspace/notes.txt")
	b.apply(planner.Options{Stop: []string{addr}})

	p := b.apply(planner.Options{Archive: []string{addr}})
	if s := p.Summary(); s.Archive != 2 || s.Snapshot != 1 || len(strings.Split(pending(p), "\n")) != 3 {
		t.Fatalf("archive of one instance plans:\n%s", pending(p))
	}
	if live := b.live(); slices.Contains(live, addr) || !slices.Contains(live, `agent.coder["a"]`) || !slices.Contains(live, `agent.coder["c"]`) {
		t.Errorf("live after archiving %s: %v", addr, live)
	}
	if r := b.records()[addr]; r.Computed[planner.StoppedKey] != "" || r.Computed[planner.ArchivedKey] == "" {
		t.Errorf("the archived record: %v", r.Computed)
	}
	if p := b.plan(planner.Options{}); p.Applyable() {
		t.Fatalf("a plan after archive has something to do:\n%s", pending(p))
	}
	b.apply(planner.Options{Start: []string{addr}})
	if files := b.fake.Files(b.lineage(), addr); len(files) != 1 {
		t.Errorf("after the resume %s has %v", addr, files)
	}
	for _, o := range b.fake.Objects(b.lineage()) {
		if o.Addr == addr && !o.Running {
			t.Errorf("%s is not running after start", addr)
		}
	}
	if p := b.plan(planner.Options{}); p.Applyable() {
		t.Fatalf("a plan after the resume has something to do:\n%s", pending(p))
	}
}

// TestArchiveRefreshOnly: -refresh-only keeps an archived agent's records,
// even when its configuration changed (a normal plan would resume it).
func TestArchiveRefreshOnly(t *testing.T) {
	b := newBench(t)
	b.write(twoCoders)
	b.apply(planner.Options{})
	archived(t, b)
	b.write(strings.Replace(twoCoders, `["sleep", "600"]`, `["sleep", "700"]`, 1))
	if p := b.plan(planner.Options{RefreshOnly: true}); p.Applyable() {
		t.Fatalf("-refresh-only of an archived agent plans:\n%s", pending(p))
	}
}

// TestArchiveAgainPrunes: with keep_last = 1, a second archive (after a
// resume from the first) prunes the first archive snapshot, which the
// workload booted from, in the same plan: the plan after it has nothing
// to do, and the second is kept while archived.
func TestArchiveAgainPrunes(t *testing.T) {
	b := newBench(t)
	b.write(`
agent "coder" {
  image   = "busybox:1"
  command = ["sleep", "600"]
  snapshot_policy {
    keep_last = 1
  }
}
`)
	b.apply(planner.Options{})
	first := archived(t, b)
	b.apply(planner.Options{Start: []string{"agent.coder"}})
	p := b.plan(planner.Options{Archive: []string{"agent.coder"}})
	if c := change(p, first); c == nil || c.Action != planner.Delete {
		t.Errorf("the second archive does not prune %s:\n%s", first, pending(p))
	}
	// The workload runs the image of the snapshot pruned: it goes first.
	g := p.Graph()
	del, ok := g.Lookup("delete " + first)
	if !ok {
		t.Fatalf("no delete step of %s:\n%s", first, g)
	}
	if !slices.ContainsFunc(g.Dependencies(del), func(v dag.Vertex) bool { return v.Name() == "archive agent.coder" }) {
		t.Errorf("the prune of %s does not wait for the archive of the workload:\n%s", first, g)
	}
	second := archived(t, b)
	if _, ok := b.records()[first]; ok || second == first {
		t.Errorf("after the second archive: %v", b.records())
	}
}

// TestArchiveRemovesLeftoverSnapshot: a snapshot image an archive cut off
// before recording it left is removed by the next archive (or tick), which
// takes the next number: the plan after it is empty.
func TestArchiveRemovesLeftoverSnapshot(t *testing.T) {
	b := newBench(t)
	b.write(twoCoders)
	b.apply(planner.Options{})
	b.fake.Put(b.lineage(), drivers.LiveObject{Addr: "agent.coder.snapshot.1", Kind: drivers.KindSnapshot, ID: "left-1", Name: "fake-snapshot-left-1"})
	p := b.plan(planner.Options{Archive: []string{"agent.coder"}})
	if c := change(p, "agent.coder.snapshot.1"); c == nil || c.Action != planner.Delete {
		t.Errorf("the archive keeps no removal of the leftover snapshot:\n%s", pending(p))
	}
	if c := change(p, "agent.coder.snapshot.2"); c == nil || !c.Takes() {
		t.Errorf("the archive does not take agent.coder.snapshot.2:\n%s", pending(p))
	}
	archived(t, b)
}
