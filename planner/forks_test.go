package planner_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/planner"
)

// dependsOn reports whether, in the plan's graph, step depends on dep
// (names like "create agent.x").
func dependsOn(t *testing.T, p *planner.Plan, step, dep string) bool {
	t.Helper()
	g := p.Graph()
	v, ok := g.Lookup(step)
	if !ok {
		t.Fatalf("no step %q in\n%s", step, g)
	}
	for _, d := range g.Dependencies(v) {
		if d.Name() == dep {
			return true
		}
	}
	return false
}

// createRequest is the fake's last create request for addr.
func (b *bench) createRequest(addr string) *drivers.ApplyRequest {
	var out *drivers.ApplyRequest
	for i, r := range b.fake.ApplyRequests {
		if r.Op == drivers.OpCreate && r.Object.Addr == addr {
			out = &b.fake.ApplyRequests[i]
		}
	}
	return out
}

const source = `
agent "coder" {
  image = "busybox:1"
  env   = { ROLE = "coder", TOKEN = "coder-only" }
  snapshot_policy {
    before = ["destroy"]
  }
}
`

// TestForkOfSnapshotBlock: an agent with from_snapshot = snapshot.X of
// another agent and no image boots from it on its first apply, with the
// source's files and only its own env, after the snapshot is taken; it is
// deleted before the snapshot.
func TestForkOfSnapshotBlock(t *testing.T) {
	b := newBench(t)
	b.write(source)
	b.apply(planner.Options{})
	b.fake.WriteFile(b.lineage(), "agent.coder", "/workspace/notes.txt")
	b.write(source + `
snapshot "reviewed" {
  agent = agent.coder
}

agent "reviewer" {
  from_snapshot = snapshot.reviewed
  env           = { ROLE = "reviewer" }
}
`)
	p := b.plan(planner.Options{})
	w := change(p, "agent.reviewer")
	if w == nil || w.BootFrom != "snapshot.reviewed" {
		t.Fatalf("the fork does not boot from the snapshot:\n%s", p)
	}
	if !dependsOn(t, p, "create agent.reviewer", "create snapshot.reviewed") {
		t.Errorf("the fork is not created after the snapshot:\n%s", p.Graph())
	}
	b.apply(planner.Options{})
	req := b.createRequest("agent.reviewer")
	if req == nil || req.BootImage == "" || req.Agent != nil {
		t.Fatalf("create request of the fork: %+v", req)
	}
	if env := req.Object.Attrs["env"]; !env.RawEquals(ctyMap("ROLE", "reviewer")) {
		t.Errorf("the fork's env is %#v, want only its own", env)
	}
	if got := b.fake.Files(b.lineage(), "agent.reviewer"); !slices.Contains(got, "/workspace/notes.txt") {
		t.Errorf("the fork lacks the source's file: %v", got)
	}
	if p := b.plan(planner.Options{}); p.Applyable() {
		t.Errorf("not converged:\n%s", p)
	}
	// The snapshot goes after the fork whose image it is (the fake refuses
	// to delete what something depends on).
	b.apply(planner.Options{Destroy: true, IncludeSnapshots: true})
	if got := b.live(); len(got) != 0 {
		t.Errorf("left after destroy: %v", got)
	}
}

// TestForkFirstApply: everything new at once, the fork of a snapshot
// block and an agent reading snapshot.X.image and agent.X.id, applies in
// one go.
func TestForkFirstApply(t *testing.T) {
	b := newBench(t)
	b.write(source + `
snapshot "reviewed" {
  agent = agent.coder
}

agent "reviewer" {
  from_snapshot = snapshot.reviewed
}

agent "follower" {
  image      = snapshot.reviewed.image
  env        = { CODER = agent.coder.id }
  depends_on = [snapshot.reviewed]
}
`)
	p := b.plan(planner.Options{})
	for _, edge := range [][2]string{
		{"create agent.follower", "create snapshot.reviewed"},
		{"create agent.follower", "create agent.coder"},
		{"create agent.reviewer", "create snapshot.reviewed"},
		{"create snapshot.reviewed", "create agent.coder"},
	} {
		if !dependsOn(t, p, edge[0], edge[1]) {
			t.Errorf("%s does not wait for %s", edge[0], edge[1])
		}
	}
	b.apply(planner.Options{})
	recs := b.records()
	req := b.createRequest("agent.follower")
	if got, want := req.Object.Attrs["image"].AsString(), recs["snapshot.reviewed"].Computed["image"]; got != want {
		t.Errorf("follower image %q, want the snapshot's %q", got, want)
	}
	if got, want := req.Object.Attrs["env"], ctyMap("CODER", recs["agent.coder"].ID); !got.RawEquals(want) {
		t.Errorf("follower env %#v, want %#v", got, want)
	}
	if p := b.plan(planner.Options{}); p.Applyable() {
		t.Errorf("not converged:\n%s", p)
	}
	// Whatever runs the snapshot's image goes before it: it depends on it,
	// and the fake refuses to delete what something depends on.
	for _, addr := range []string{"agent.follower", "agent.reviewer"} {
		if deps := recs[addr].DependsOn; !slices.Contains(deps, "snapshot.reviewed") {
			t.Errorf("%s depends on %v, not on the snapshot", addr, deps)
		}
	}
	b.apply(planner.Options{Destroy: true, IncludeSnapshots: true})
	if got := b.live(); len(got) != 0 {
		t.Errorf("left after destroy: %v", got)
	}
}

// TestSnapshotBlockReferences: a snapshot block is taken after what it
// refers to besides its agent (depends_on, expressions).
func TestSnapshotBlockReferences(t *testing.T) {
	b := newBench(t)
	b.write(`
agent "coder" {
  image = "busybox:1"
}

agent "db" {
  image = "postgres:16"
}

snapshot "seeded" {
  agent       = agent.coder
  description = "db ${agent.db.id}"
  depends_on  = [agent.db]
}
`)
	p := b.plan(planner.Options{})
	if !dependsOn(t, p, "create snapshot.seeded", "create agent.db") {
		t.Errorf("the snapshot does not wait for agent.db:\n%s", p.Graph())
	}
	b.apply(planner.Options{})
	if got, want := string(b.records()["snapshot.seeded"].Attrs["description"]), `"db `+b.records()["agent.db"].ID+`"`; got != want {
		t.Errorf("description %s, want %s", got, want)
	}
}

// TestForkOfPolicySnapshot: from_snapshot = agent.X.snapshot.N boots from
// a kept policy snapshot; one the state does not have is an error that
// names it.
func TestForkOfPolicySnapshot(t *testing.T) {
	b := newBench(t)
	b.write(source)
	b.apply(planner.Options{})
	b.fake.WriteFile(b.lineage(), "agent.coder", "/workspace/notes.txt")
	b.apply(planner.Options{Destroy: true})

	fork := source + `
agent "bisect" {
  from_snapshot = %s
  command       = ["sh"]
}
`
	b.write(fmt.Sprintf(fork, `agent.coder.snapshot.9`))
	if _, err := b.tryPlan(planner.Options{}); !strings.Contains(err, "agent.bisect boots from agent.coder.snapshot.9 (from_snapshot), and has no image of its own, but it is not in the state") {
		t.Errorf("a missing snapshot: %q", err)
	}
	b.write(fmt.Sprintf(fork, `"agent.coder.snapshot.1"`))
	b.apply(planner.Options{})
	if got := b.fake.Files(b.lineage(), "agent.bisect"); !slices.Contains(got, "/workspace/notes.txt") {
		t.Errorf("the fork lacks the snapshot's file: %v", got)
	}
	if got := b.records()["agent.bisect"].DependsOn; !slices.Contains(got, "agent.coder.snapshot.1") {
		t.Errorf("the fork's record does not depend on its snapshot: %v", got)
	}
}

// TestForkSnapshotRetaken: when the source's snapshot block is taken
// again, a fork that reads snapshot.X.image is planned again with the
// value unknown (not the old image), and a from_snapshot fork, whose image
// the snapshot is, is replaced and boots from the new one.
func TestForkSnapshotRetaken(t *testing.T) {
	cfg := source + `
snapshot "reviewed" {
  agent    = agent.coder
  triggers = { round = "%d" }
}

agent "reviewer" {
  from_snapshot = snapshot.reviewed
}

agent "follower" {
  image = snapshot.reviewed.image
}
`
	b := newBench(t)
	b.write(fmt.Sprintf(cfg, 1))
	b.apply(planner.Options{})
	b.write(fmt.Sprintf(cfg, 2))
	p := b.plan(planner.Options{})
	if c := change(p, "agent.follower"); c == nil || c.Action != planner.Replace || !slices.Contains(c.Changed, "image") {
		t.Errorf("the follower is not replaced for its image:\n%s", p)
	}
	if c := change(p, "agent.reviewer"); c == nil || c.Action != planner.Replace || c.BootFrom != "snapshot.reviewed" ||
		!slices.Contains(planner.ReasonTexts(c.Reasons), "snapshot.reviewed, which it depends on, will be replaced") {
		t.Errorf("the fork is not replaced from the new snapshot:\n%s", p)
	}
	b.apply(planner.Options{})
	if got, want := b.records()["agent.follower"].Attrs["image"], b.records()["snapshot.reviewed"].Computed["image"]; string(got) != `"`+want+`"` {
		t.Errorf("follower recorded image %s, want %q", got, want)
	}
}
