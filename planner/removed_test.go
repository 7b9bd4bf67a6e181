package planner_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/bottlefile/bottlefile/planner"
)

// tester is a second agent beside coder, with a snapshot policy whose
// before list is %s.
const tester = `
agent "coder" {
  image   = "busybox:1"
  command = ["sleep", "600"]
}

agent "tester" {
  image   = "busybox:1"
  command = ["sleep", "600"]

  snapshot_policy {
    before    = %s
    keep_last = 3
  }
}
`

const coderOnly = `
agent "coder" {
  image   = "busybox:1"
  command = ["sleep", "600"]
}
`

// TestRemovedAgentSnapshots: removing an agent's block goes by the policy
// it was applied with. With "destroy" a snapshot is taken first and all of
// them stay, through later plans and destroys, until -include-snapshots;
// a block of the name added again resumes from the newest. Without, the
// plan says what the workload discards and deletes the snapshots.
func TestRemovedAgentSnapshots(t *testing.T) {
	cases := []struct {
		name, before string
		// plan is the removal's pending changes.
		plan string
		kept []string
		// summary is the removal's Plan: line.
		summary string
	}{
		{
			name: "destroy in policy", before: `["replace", "destroy"]`,
			plan: "- agent.tester (agent.tester.snapshot.2 is taken first (the snapshot_policy it was applied with))\n" +
				"- agent.tester.network\n" +
				"+ agent.tester.snapshot.2 (agent.tester's block was removed, and the snapshot_policy it was applied with includes \"destroy\": its filesystem is committed before it is destroyed, and its snapshots are kept)",
			kept:    []string{"agent.tester.snapshot.1", "agent.tester.snapshot.2"},
			summary: "Plan: 0 to add, 0 to change, 2 to destroy, 1 to snapshot, 0 snapshots deleted.",
		},
		{
			name: "no destroy in policy", before: `["replace"]`,
			plan: "- agent.tester (this destroy discards 1000 B written inside it; its block was removed, and the snapshot_policy it was applied with does not include \"destroy\")\n" +
				"- agent.tester.network\n" +
				"- agent.tester.snapshot.1 (agent.tester's block was removed, and the snapshot_policy it was applied with does not keep snapshots across destroy)",
			summary: "Plan: 0 to add, 0 to change, 3 to destroy, 1 snapshot deleted.",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := newBench(t)
			b.write(fmt.Sprintf(tester, tc.before))
			b.apply(planner.Options{})
			b.apply(planner.Options{Replace: []string{"agent.tester"}}) // snapshot.1
			b.fake.WriteFile(b.lineage(), "agent.tester", "/workspace/notes.txt")

			b.write(coderOnly)
			p := b.apply(planner.Options{})
			if got := pending(p); got != tc.plan {
				t.Errorf("removal plan:\n%s\nwant:\n%s", got, tc.plan)
			}
			var kept []string
			for _, k := range p.Kept {
				kept = append(kept, k.Addr)
			}
			if !slices.Equal(kept, tc.kept) {
				t.Errorf("kept = %v, want %v", kept, tc.kept)
			}
			if got := p.Summary().String(); got != tc.summary {
				t.Errorf("summary = %q, want %q", got, tc.summary)
			}
			var left []string
			for _, a := range b.live() {
				if strings.HasPrefix(a, "agent.tester") {
					left = append(left, a)
				}
			}
			if !slices.Equal(left, tc.kept) {
				t.Fatalf("after the removal the engine has %v, want %v", left, tc.kept)
			}
			if len(tc.kept) == 0 {
				return
			}

			// Kept: a plan after has nothing to do, a destroy keeps them.
			if p := b.plan(planner.Options{}); p.Applyable() {
				t.Errorf("the plan after the removal has changes:\n%s", p)
			}
			if p := b.plan(planner.Options{Destroy: true}); len(p.Kept) != 2 || change(p, "agent.tester.snapshot.1").Action != planner.NoOp {
				t.Errorf("a destroy does not keep them: kept %v\n%s", p.Kept, p)
			}
			// The block back: it resumes from the newest.
			b.write(fmt.Sprintf(tester, tc.before))
			p = b.plan(planner.Options{})
			if c := change(p, "agent.tester"); c == nil || c.BootFrom != "agent.tester.snapshot.2" {
				t.Errorf("the agent back does not resume from snapshot.2:\n%s", p)
			}
			// -include-snapshots deletes them, with the block gone.
			b.write(coderOnly)
			p = b.apply(planner.Options{Destroy: true, IncludeSnapshots: true})
			if s := p.Summary(); s.SnapshotDelete != 2 {
				t.Errorf("destroy -include-snapshots deletes %d snapshots:\n%s", s.SnapshotDelete, p)
			}
			if len(b.live()) != 0 || len(b.records()) != 0 {
				t.Errorf("left: %v, records %v", b.live(), b.records())
			}
		})
	}
}

// TestPolicyRecorded: the policy an agent is applied with is recorded on
// its workload; a changed policy is recorded by a state-only update.
func TestPolicyRecorded(t *testing.T) {
	b := newBench(t)
	b.write(fmt.Sprintf(tester, `["destroy"]`))
	b.apply(planner.Options{})
	if got := b.records()["agent.tester"].Computed[planner.PolicyKey]; got != `{"before":["destroy"],"keep_last":3}` {
		t.Errorf("recorded policy = %q", got)
	}
	if _, ok := b.records()["agent.coder"].Computed[planner.PolicyKey]; ok {
		t.Errorf("an agent without a policy records one")
	}
	b.write(fmt.Sprintf(tester, `["replace"]`))
	p := b.apply(planner.Options{})
	c := change(p, "agent.tester")
	if c.Action != planner.Update || !c.StateOnly {
		t.Fatalf("a changed policy is not recorded by a state-only update:\n%s", p)
	}
	if got := b.records()["agent.tester"].Computed[planner.PolicyKey]; got != `{"before":["replace"],"keep_last":3}` {
		t.Errorf("recorded policy = %q", got)
	}
	if p := b.plan(planner.Options{}); p.Applyable() {
		t.Errorf("changes after recording:\n%s", p)
	}
}

// TestRetentionReadsLiveBootSource: retention never prunes the snapshot a
// live workload runs, as the runtime reports its image, even when the
// workload's record names another (a crash misrecorded it).
func TestRetentionReadsLiveBootSource(t *testing.T) {
	b := newBench(t)
	b.write(fmt.Sprintf(coder, `["replace"]`, ""))
	b.apply(planner.Options{})
	for range 3 {
		b.apply(planner.Options{Replace: []string{"agent.coder"}}) // snapshot.1 .. 3, booting from each
	}
	old := b.records()["agent.coder.snapshot.1"].Computed["image"]
	for _, o := range b.fake.Objects(b.lineage()) {
		if o.Addr == "agent.coder" {
			o.ImageID = old // runs snapshot.1; its record says snapshot.3
			b.fake.Put(b.lineage(), o)
		}
	}
	b.write(fmt.Sprintf(coder, `["replace"]`, "keep_last = 1"))
	p := b.plan(planner.Options{})
	if c := change(p, "agent.coder.snapshot.1"); c == nil || c.Action == planner.Delete {
		t.Errorf("retention prunes the snapshot the workload runs:\n%s", p)
	}
	if c := change(p, "agent.coder.snapshot.2"); c == nil || c.Action != planner.Delete {
		t.Errorf("retention keeps snapshot.2, which nothing runs:\n%s", p)
	}
	if got := p.RunningFrom["agent.coder.snapshot.1"]; !slices.Equal(got, []string{"agent.coder"}) {
		t.Errorf("running from snapshot.1: %v", got)
	}
}
