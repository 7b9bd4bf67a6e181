package planner_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/planner"
)

// movesOracle renders what a plan does to records and objects, one line
// per change that is not a no-op: "move ADDR from OLD" for a change that
// only moves its record ("from runtime R" for a move between runtime
// blocks of one engine), else the action's symbol, the address, and where
// it moved from; then the Plan: line, or "No changes.".
func movesOracle(p *planner.Plan) string {
	var lines []string
	for _, c := range p.Changes {
		if c.Action == planner.NoOp {
			continue
		}
		line := c.Action.Symbol() + " " + c.Addr
		if c.MoveOnly() {
			line = "move " + c.Addr
		}
		if c.MovedFrom != "" {
			line += " from " + c.MovedFrom
		}
		if c.FromRuntime != "" {
			line += " from runtime " + c.FromRuntime
		}
		lines = append(lines, line)
	}
	if !p.Applyable() {
		lines = append(lines, "No changes.")
	} else {
		lines = append(lines, p.Summary().String())
	}
	return strings.Join(lines, "\n") + "\n"
}

// TestMovesFixtures applies each testdata/moves/CASE/before, plans
// CASE/after, and compares with CASE/want: the oracle's lines, or
// "error: SUMMARY" for a plan that must fail with that summary. The
// runtimes are one fake engine, as two runtime blocks of one docker
// engine are. A plan that moves is applied, and the plan after it must
// have nothing to do, moved blocks still in place.
func TestMovesFixtures(t *testing.T) {
	dirs, err := filepath.Glob("testdata/moves/*")
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	for _, dir := range dirs {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			read := func(name string) string {
				data, err := os.ReadFile(filepath.Join(dir, name))
				if err != nil {
					t.Fatal(err)
				}
				return string(data)
			}
			b := newBench(t)
			b.fake.Engine = "engine-1"
			b.write(read("before"))
			b.apply(planner.Options{})
			b.write(read("after"))
			want := read("want")
			p, errs := b.tryPlan(planner.Options{})
			if summary, ok := strings.CutPrefix(strings.TrimSpace(want), "error: "); ok {
				if !strings.Contains(errs, summary) {
					t.Fatalf("plan errors %q, want one with %q", errs, summary)
				}
				return
			}
			if errs != "" {
				t.Fatalf("plan: %s", errs)
			}
			if diff := cmp.Diff(want, movesOracle(p)); diff != "" {
				t.Fatalf("plan (-want +got):\n%s\n%s", diff, p)
			}
			if !p.Applyable() {
				return
			}
			before := b.fake.Objects(b.lineage())
			b.apply(planner.Options{})
			if again := b.plan(planner.Options{}); again.Applyable() {
				t.Errorf("the plan after the move is not empty:\n%s", again)
			}
			// What only moved is the same object on the runtime.
			live := map[string]string{}
			for _, o := range b.fake.Objects(b.lineage()) {
				live[o.ID] = o.Addr
			}
			for _, c := range p.Changes {
				if c.MoveOnly() && c.Prior != nil {
					if _, ok := live[c.Prior.ID]; !ok {
						t.Errorf("%s (%s) is gone after a move; live before: %v", c.Addr, c.Prior.ID, before)
					}
				}
			}
			recs := b.records()
			for _, c := range p.Changes {
				if c.MovedFrom == "" {
					continue
				}
				if _, ok := recs[c.MovedFrom]; ok {
					t.Errorf("the state still records %s after moving it to %s", c.MovedFrom, c.Addr)
				}
				if r, ok := recs[c.Addr]; !ok || (c.MoveOnly() && r.ID != c.Prior.ID) {
					t.Errorf("after the move the record of %s is %+v, want id %s", c.Addr, r, c.Prior.ID)
				}
			}
		})
	}
}

// TestCheckFreshKeysStrays: a saved plan holding a stray copy of an
// address (on another runtime) beside the address's own change is fresh
// when a plan made now holds the same two; it is not taken for the
// address's change ("would no longer delete; would now delete, not
// migrate", which named one change twice).
func TestCheckFreshKeysStrays(t *testing.T) {
	live := &drivers.LiveObject{Addr: "agent.mig", Kind: "container", ID: "c2"}
	plan := func() *planner.Plan {
		return &planner.Plan{Changes: []*planner.Change{
			{Addr: "agent.mig", Kind: "container", Runtime: "two", Action: planner.Migrate},
			{Addr: "agent.mig", Kind: "container", Runtime: "one", Action: planner.Delete, Stray: true, Live: live},
		}}
	}
	saved := planner.Save(plan(), map[string]string{"Bottlefile": "h"}, nil)
	if err := saved.CheckFresh(plan()); err != nil {
		t.Errorf("the same plan is stale: %v", err)
	}
	fresh := plan()
	fresh.Changes = fresh.Changes[:1]
	err := saved.CheckFresh(fresh)
	if err == nil || !strings.Contains(err.Error(), `agent.mig on runtime "one" would no longer delete`) || strings.Contains(err.Error(), "not migrate") {
		t.Errorf("a plan without the stray: %v", err)
	}
}

// TestLegacyObjectsOnTwoRuntimes: objects made before objects carried
// their runtime (no runtime label), on two runtime blocks of one engine,
// are each attributed to the runtime their record names: the plan has
// nothing to do, and nothing is called a stray.
func TestLegacyObjectsOnTwoRuntimes(t *testing.T) {
	b := newBench(t)
	b.fake.Engine = "engine-1"
	b.write(`
runtime "one" {
  driver = "docker"
}

runtime "two" {
  driver = "docker"
}

agent "a1" {
  image   = "alpine:3"
  runtime = runtime.one
}

agent "a2" {
  image   = "alpine:3"
  runtime = runtime.two
}
`)
	b.apply(planner.Options{})
	b.wrap = func(d drivers.Driver) drivers.Driver { return unlabelled{d} }
	if p := b.plan(planner.Options{}); p.Applyable() {
		t.Errorf("a plan over unlabelled objects on two runtimes of one engine:\n%s", p)
	}
}

// unlabelled reads as an engine of objects made before the runtime label.
type unlabelled struct{ drivers.Driver }

func (u unlabelled) Read(ctx context.Context, req drivers.ReadRequest) (drivers.ReadResponse, error) {
	resp, err := u.Driver.Read(ctx, req)
	for i := range resp.Objects {
		resp.Objects[i].Runtime = ""
	}
	return resp, err
}

func (u unlabelled) EngineID(ctx context.Context) (string, error) {
	return u.Driver.(drivers.EngineIdentifier).EngineID(ctx)
}

// TestPlanGoesOnWithoutTheEngineIdentity: with one runtime and every
// record on it, no move between runtimes can hinge on the engine's
// identity, so a plan is made while it is still being asked (it is the
// slowest call of a no-op plan on docker, issue 28); an apply still
// records it, waiting for it.
func TestPlanGoesOnWithoutTheEngineIdentity(t *testing.T) {
	b := newBench(t)
	b.fake.Engine = "engine-1"
	b.write(`agent "a" { image = "alpine:3" }`)
	b.apply(planner.Options{})
	release := make(chan struct{})
	b.wrap = func(d drivers.Driver) drivers.Driver { return slowIdentity{d, release} }
	planned := make(chan string, 1)
	go func() {
		p, err := b.tryPlan(planner.Options{})
		if err == "" && p.Applyable() {
			err = "a plan with changes:\n" + p.String()
		}
		planned <- err
	}()
	select {
	case err := <-planned:
		if err != "" {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		close(release)
		t.Fatal("the plan waited for the engine's identity")
	}
	close(release)
	b.write(`agent "a" {
  image = "alpine:3"
  env   = { X = "1" }
}`)
	b.apply(planner.Options{})
	if got := b.records()["agent.a"].Engine; got != "engine-1" {
		t.Errorf("the record applied without waiting in the plan has engine %q, want engine-1", got)
	}
}

// slowIdentity answers EngineID only once release is closed.
type slowIdentity struct {
	drivers.Driver
	release chan struct{}
}

func (s slowIdentity) EngineID(ctx context.Context) (string, error) {
	<-s.release
	return s.Driver.(drivers.EngineIdentifier).EngineID(ctx)
}
