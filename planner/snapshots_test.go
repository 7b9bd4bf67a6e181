package planner_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/bottlefile/bottlefile/planner"
)

// coder is one agent with a snapshot policy; %s is its before list, and
// %s more policy attributes.
const coder = `
agent "coder" {
  image   = "busybox:1"
  command = ["sleep", "600"]

  snapshot_policy {
    before = %s
    %s
  }
}
`

// destroyed applies coder with a before-destroy policy, writes a file in
// the workload and destroys, leaving agent.coder.snapshot.1.
func destroyed(t *testing.T) *bench {
	b := newBench(t)
	b.write(fmt.Sprintf(coder, `["destroy"]`, ""))
	b.apply(planner.Options{})
	b.fake.WriteFile(b.lineage(), "agent.coder", "/workspace/notes.txt")
	p := b.apply(planner.Options{Destroy: true})
	if len(p.Kept) != 1 || p.Kept[0].Addr != "agent.coder.snapshot.1" || p.Kept[0].Size != -1 {
		t.Fatalf("the destroy does not keep the snapshot it takes: %+v\n%s", p.Kept, p)
	}
	if got := b.live(); !slices.Equal(got, []string{"agent.coder.snapshot.1"}) {
		t.Fatalf("after the destroy: %v", got)
	}
	return b
}

// TestDestroyKeepsPolicySnapshots: a destroy after a destroy has nothing to
// do, and lists the kept snapshot with its recorded size and time.
func TestDestroyKeepsPolicySnapshots(t *testing.T) {
	b := destroyed(t)
	p := b.plan(planner.Options{Destroy: true})
	if p.Applyable() {
		t.Errorf("a second destroy has changes:\n%s", p)
	}
	want := []planner.KeptSnapshot{{Addr: "agent.coder.snapshot.1", Size: 1000, Created: b.clock}}
	if !slices.Equal(p.Kept, want) {
		t.Errorf("kept = %+v, want %+v", p.Kept, want)
	}
	// A saved plan keeps the list, for show.
	data, err := json.Marshal(planner.Save(p, map[string]string{"Bottlefile": "hash"}, nil))
	if err != nil {
		t.Fatal(err)
	}
	saved, err := planner.DecodePlanFile(data)
	if err != nil {
		t.Fatal(err)
	}
	if got := saved.Plan().Kept; len(got) != 1 || got[0].Addr != want[0].Addr || got[0].Size != 1000 || !got[0].Created.Equal(b.clock) {
		t.Errorf("saved kept = %+v", got)
	}
}

// TestDestroyIncludeSnapshots: -include-snapshots deletes the kept
// snapshots, and from a running agent takes none first.
func TestDestroyIncludeSnapshots(t *testing.T) {
	t.Run("kept before", func(t *testing.T) {
		b := destroyed(t)
		p := b.apply(planner.Options{Destroy: true, IncludeSnapshots: true})
		if got := pending(p); got != "- agent.coder.snapshot.1" {
			t.Errorf("plan:\n%s", got)
		}
		if len(p.Kept) != 0 || len(b.live()) != 0 || len(b.records()) != 0 {
			t.Errorf("left: kept %v, live %v, records %v", p.Kept, b.live(), b.records())
		}
	})
	t.Run("running", func(t *testing.T) {
		b := newBench(t)
		b.write(fmt.Sprintf(coder, `["destroy"]`, ""))
		b.apply(planner.Options{})
		p := b.apply(planner.Options{Destroy: true, IncludeSnapshots: true})
		if c := change(p, "agent.coder.snapshot.1"); c != nil {
			t.Errorf("a snapshot is taken to be deleted: %s", p)
		}
		if len(b.live()) != 0 {
			t.Errorf("left: %v", b.live())
		}
	})
}

// TestDestroyTargetSnapshot: -target of a kept snapshot deletes it alone.
func TestDestroyTargetSnapshot(t *testing.T) {
	b := destroyed(t)
	b.write(fmt.Sprintf(coder, `["destroy", "replace"]`, ""))
	b.apply(planner.Options{}) // resumes from snapshot.1
	b.apply(planner.Options{Replace: []string{"agent.coder"}})
	p := b.apply(planner.Options{Destroy: true, Targets: []string{"agent.coder.snapshot.1"}})
	if got := pending(p); got != "- agent.coder.snapshot.1" {
		t.Errorf("plan:\n%s", got)
	}
	if _, ok := b.records()["agent.coder.snapshot.2"]; !ok {
		t.Errorf("the snapshot not targeted went: %v", b.live())
	}
}

// TestLostSnapshotForgotten: a kept snapshot whose image is deleted
// outside bottlefile is forgotten, by a plan and by a destroy, never taken
// again; the agent is created from its image.
func TestLostSnapshotForgotten(t *testing.T) {
	for _, destroy := range []bool{false, true} {
		t.Run(fmt.Sprintf("destroy=%t", destroy), func(t *testing.T) {
			b := destroyed(t)
			b.fake.Remove(b.lineage(), "agent.coder.snapshot.1")
			p := b.apply(planner.Options{Destroy: destroy})
			c := change(p, "agent.coder.snapshot.1")
			if c == nil || c.Action != planner.Forget || !strings.Contains(strings.Join(planner.ReasonTexts(c.Reasons), ";"), "its image is gone from the runtime") {
				t.Fatalf("the lost snapshot is not forgotten:\n%s", p)
			}
			if w := change(p, "agent.coder"); w != nil && w.BootFrom != "" {
				t.Errorf("the agent boots from %s", w.BootFrom)
			}
			if _, ok := b.records()["agent.coder.snapshot.1"]; ok {
				t.Error("still recorded")
			}
		})
	}
}

// TestLostSnapshotBlock: a snapshot block whose image is gone is taken
// again while its agent runs, and forgotten while it has no workload.
func TestLostSnapshotBlock(t *testing.T) {
	const src = `
agent "coder" {
  image = "busybox:1"
}

snapshot "clean" {
  agent = agent.coder
}
`
	b := newBench(t)
	b.write(src)
	b.apply(planner.Options{})
	b.fake.Remove(b.lineage(), "snapshot.clean")
	p := b.plan(planner.Options{})
	if c := change(p, "snapshot.clean"); c == nil || c.Action != planner.Create || !strings.Contains(planner.ReasonTexts(c.Reasons)[0], "taken again from agent.coder, which is running") {
		t.Errorf("with the agent running:\n%s", p)
	}
	b.fake.Remove(b.lineage(), "agent.coder")
	p = b.plan(planner.Options{})
	if c := change(p, "snapshot.clean"); c == nil || c.Action != planner.Forget || !strings.Contains(planner.ReasonTexts(c.Reasons)[0], "agent.coder has no running workload") {
		t.Errorf("with the agent gone:\n%s", p)
	}
}

// TestTake: Options.Take plans the agent's next policy snapshot, with its
// description and trigger, prunes by keep_last, and nothing else.
func TestTake(t *testing.T) {
	b := newBench(t)
	b.write(fmt.Sprintf(coder, `["replace"]`, "keep_last = 2"))
	b.apply(planner.Options{})
	b.apply(planner.Options{Take: []planner.TakeRequest{{Agent: "agent.coder"}}})
	b.apply(planner.Options{Take: []planner.TakeRequest{{Agent: "agent.coder", Description: "before rm -rf"}}})
	// A change in the configuration waits for a normal plan.
	b.write(strings.Replace(fmt.Sprintf(coder, `["replace"]`, "keep_last = 2"), "600", "700", 1))
	p := b.plan(planner.Options{Take: []planner.TakeRequest{{Agent: "agent.coder"}}})
	if got, want := pending(p), "- agent.coder.snapshot.1 (snapshot_policy.keep_last = 2, and 2 newer snapshots are kept)\n+ agent.coder.snapshot.3 (snapshot take: agent.coder's filesystem is committed now)"; got != want {
		t.Errorf("plan:\n%s\nwant:\n%s", got, want)
	}
	c := change(p, "agent.coder.snapshot.3")
	if c == nil || string(c.After["trigger"]) != `"take"` || string(c.After["description"]) != `"taken by snapshot take"` || c.AgentSpec == nil {
		t.Errorf("the snapshot taken: %+v", c)
	}
	if got := string(b.records()["agent.coder.snapshot.2"].Attrs["description"]); got != `"before rm -rf"` {
		t.Errorf("recorded description %s", got)
	}
}

// TestTakeNeedsRunningWorkload: snapshot take of an agent that is not
// running, or not declared, is an error that says so.
func TestTakeNeedsRunningWorkload(t *testing.T) {
	b := newBench(t)
	b.write(fmt.Sprintf(coder, `["replace"]`, ""))
	for _, tc := range []struct{ agent, want string }{
		{"agent.coder", "agent.coder has no running workload to commit: it has never been applied"},
		{"agent.nobody", "agent.nobody is not an agent of the configuration"},
	} {
		if _, err := b.tryPlan(planner.Options{Take: []planner.TakeRequest{{Agent: tc.agent}}}); !strings.Contains(err, tc.want) {
			t.Errorf("take %s: %q, want %q", tc.agent, err, tc.want)
		}
	}
	b.apply(planner.Options{})
	b.fake.Stop(b.lineage(), "agent.coder")
	if _, err := b.tryPlan(planner.Options{Take: []planner.TakeRequest{{Agent: "agent.coder"}}}); !strings.Contains(err, "its workload is stopped") {
		t.Errorf("take of a stopped agent: %q", err)
	}
}

// TestMaxTotalSize: max_total_size prunes the oldest policy snapshots
// until the recorded sizes, and what the snapshot taken will add (what the
// workload wrote), fit; never the one taken in the plan nor one a fork
// pins.
func TestMaxTotalSize(t *testing.T) {
	const fork = `
agent "bisect" {
  from_snapshot = agent.coder.snapshot.1
}
`
	for _, tc := range []struct {
		name, extra string
		pruned      []string
	}{
		// The snapshot taken counts what the workload wrote (3000 bytes):
		// with it only the snapshot taken fits.
		{name: "oldest first", pruned: []string{"agent.coder.snapshot.1", "agent.coder.snapshot.2", "agent.coder.snapshot.3"}},
		{name: "pinned kept", extra: fork, pruned: []string{"agent.coder.snapshot.2", "agent.coder.snapshot.3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBench(t)
			b.write(fmt.Sprintf(coder, `["replace"]`, ""))
			b.apply(planner.Options{})
			// Snapshots of 1000, 2000 and 3000 bytes: each has one file more.
			for i := range 3 {
				b.fake.WriteFile(b.lineage(), "agent.coder", fmt.Sprintf("/f%d", i))
				b.apply(planner.Options{Take: []planner.TakeRequest{{Agent: "agent.coder"}}})
			}
			b.write(fmt.Sprintf(coder, `["replace"]`, `max_total_size = "4KiB"`) + tc.extra)
			p := b.plan(planner.Options{Take: []planner.TakeRequest{{Agent: "agent.coder"}}})
			var pruned []string
			for _, c := range p.Changes {
				if c.Action == planner.Delete {
					pruned = append(pruned, c.Addr)
					if want := "snapshot_policy.max_total_size = 4.0 KiB: the agent's snapshots total 5.9 KiB, and about 2.9 KiB more with agent.coder.snapshot.4 (what its workload wrote); the oldest go first"; !slices.Contains(planner.ReasonTexts(c.Reasons), want) {
						t.Errorf("%s: reasons %q, want %q", c.Addr, planner.ReasonTexts(c.Reasons), want)
					}
				}
			}
			if !slices.Equal(pruned, tc.pruned) {
				t.Errorf("pruned %v, want %v\n%s", pruned, tc.pruned, p)
			}
			if c := change(p, "agent.coder.snapshot.4"); c == nil || c.Action != planner.Create {
				t.Errorf("the snapshot taken:\n%s", p)
			}
		})
	}
}

// TestPruneKeepsWhatTheWorkloadRuns: retention never prunes the snapshot
// the running workload was created from: its image is in use.
func TestPruneKeepsWhatTheWorkloadRuns(t *testing.T) {
	b := destroyed(t)
	b.write(fmt.Sprintf(coder, `["destroy"]`, "keep_last = 1"))
	b.apply(planner.Options{}) // resumes from snapshot.1
	if got := b.records()["agent.coder"].Computed[planner.BootFromKey]; got != "agent.coder.snapshot.1" {
		t.Fatalf("the workload booted from %q", got)
	}
	b.apply(planner.Options{Take: []planner.TakeRequest{{Agent: "agent.coder"}}})
	p := b.plan(planner.Options{Take: []planner.TakeRequest{{Agent: "agent.coder"}}})
	if got, want := pending(p), "- agent.coder.snapshot.2 (snapshot_policy.keep_last = 1, and 1 newer snapshots are kept)\n+ agent.coder.snapshot.3 (snapshot take: agent.coder's filesystem is committed now)"; got != want {
		t.Errorf("plan:\n%s\nwant:\n%s", got, want)
	}
}
