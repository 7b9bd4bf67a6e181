package planner_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/drivertest"
	"github.com/bottlefile/bottlefile/executor"
	"github.com/bottlefile/bottlefile/planner"
)

// intents is the state's intents by address.
func (b *bench) intents() map[string]string {
	b.t.Helper()
	s := b.open(true)
	defer s.Close()
	in, err := s.Intents()
	if err != nil {
		b.t.Fatal(err)
	}
	out := map[string]string{}
	for _, i := range in {
		out[i.Addr] = i.Kind + " " + i.Runtime
	}
	return out
}

// TestIntentsRecordedAndResolved: every create records its intent before
// the driver is called, and the record of its result clears it; a create
// that fails keeps it, and the next plan resolves it: the object the
// engine made of it is adopted, and applying that plan clears the intent.
func TestIntentsRecordedAndResolved(t *testing.T) {
	b := newBench(t)
	b.write(`agent "a" {
  image = "acme/agent:1"
}
`)
	b.apply(planner.Options{})
	if in := b.intents(); len(in) != 0 {
		t.Fatalf("intents left after a clean apply: %v", in)
	}

	// The create of agent.a fails after the engine made the container (a
	// process killed while its request was in flight leaves the same).
	b.write(`agent "a" {
  image   = "acme/agent:1"
  command = ["x"]
}
`)
	lineage := b.lineage()
	var made drivers.LiveObject
	b.fake.BeforeApply = func(_ context.Context, req drivers.ApplyRequest) error {
		if req.Op == drivers.OpCreate && req.Object.Addr == "agent.a" {
			made = drivers.LiveObject{Addr: "agent.a", Kind: drivertest.KindContainer, ID: "late1", Name: "a", Hash: req.Hash, Running: true}
			return errors.New("killed")
		}
		return nil
	}
	p := b.plan(planner.Options{})
	store := b.open(false)
	ex := &executor.Executor{State: store, Lineage: lineage, Runtimes: b.last.Runtimes, Parallelism: 1, Resolver: b.last}
	if _, diags := ex.Apply(context.Background(), p); !diags.HasErrors() {
		t.Fatal("the apply did not fail")
	}
	store.Close()
	if in := b.intents(); in["agent.a"] != "container default" || len(in) != 1 {
		t.Fatalf("after a create that failed, intents %v: want agent.a's", in)
	}
	b.fake.BeforeApply = nil
	b.fake.Put(lineage, made)

	p = b.plan(planner.Options{})
	if len(p.Intents) != 1 || p.Intents[0].Addr != "agent.a" {
		t.Fatalf("the plan did not read the intent: %+v", p.Intents)
	}
	c := change(p, "agent.a")
	if c == nil || c.Action != planner.Adopt || !strings.Contains(strings.Join(planner.ReasonTexts(c.Reasons), "; "), "not recorded") {
		t.Fatalf("what the interrupted create made is not adopted:\n%s", p)
	}
	b.apply(planner.Options{})
	if in := b.intents(); len(in) != 0 {
		t.Errorf("intents left after the apply that resolved them: %v", in)
	}
	if r := b.records()["agent.a"]; r.ID != "late1" {
		t.Errorf("agent.a recorded as %q, want the adopted late1", r.ID)
	}
	if p := b.plan(planner.Options{}); p.Applyable() {
		t.Errorf("not converged:\n%s", pending(p))
	}
}

// TestIntentWithNothingLive: an intent whose create the runtime shows no
// trace of is resolved by creating the address again, and the plan says
// why: a create still landing is taken over, not refused.
func TestIntentWithNothingLive(t *testing.T) {
	b := newBench(t)
	b.write(`agent "a" {
  image = "acme/agent:1"
}
`)
	b.fake.FailApply = map[string]error{"agent.a": errors.New("killed")}
	p := b.plan(planner.Options{})
	store := b.open(false)
	lineage, err := store.Init()
	if err != nil {
		t.Fatal(err)
	}
	ex := &executor.Executor{State: store, Lineage: lineage, Runtimes: b.last.Runtimes, Parallelism: 1, Resolver: b.last}
	ex.Apply(context.Background(), p)
	store.Close()
	b.fake.FailApply = nil

	p = b.plan(planner.Options{})
	c := change(p, "agent.a")
	if c == nil || c.Action != planner.Create || !strings.Contains(strings.Join(planner.ReasonTexts(c.Reasons), "; "), "cut off") {
		t.Fatalf("the plan does not say the create was cut off:\n%s", p)
	}
	b.apply(planner.Options{})
	if in := b.intents(); len(in) != 0 {
		t.Errorf("intents left: %v", in)
	}
}

// TestLeftoverRemoved: an object of the lineage that no record can be (an
// intermediate image a killed snapshot left) is removed by its id, with a
// reason, even when its address is recorded; then the plan is empty.
func TestLeftoverRemoved(t *testing.T) {
	b := newBench(t)
	b.write(`agent "a" {
  image = "acme/agent:1"
}
`)
	b.apply(planner.Options{})
	lineage := b.lineage()
	b.fake.Put(lineage, drivers.LiveObject{Addr: "agent.a.snapshot.9", Kind: drivers.KindSnapshot, ID: "sha256:inter", Name: "inter", Leftover: "the intermediate image of a snapshot"})
	p := b.plan(planner.Options{})
	var left *planner.Change
	for _, c := range p.Changes {
		if c.Addr == "agent.a.snapshot.9" {
			left = c
		}
	}
	if left == nil || left.Action != planner.Delete || !left.Twin || !strings.Contains(strings.Join(planner.ReasonTexts(left.Reasons), "; "), "the intermediate image of a snapshot") {
		t.Fatalf("the leftover is not removed by id with its reason:\n%s", p)
	}
	if change(p, "agent.a").Action != planner.NoOp {
		t.Errorf("the agent changes:\n%s", p)
	}
	b.apply(planner.Options{})
	if p := b.plan(planner.Options{}); p.Applyable() {
		t.Errorf("not converged:\n%s", pending(p))
	}
}
