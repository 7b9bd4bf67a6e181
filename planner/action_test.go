package planner

import (
	"encoding/json"
	"testing"
)

// TestActionsSurviveAPlanFile: a plan with one change of every action is
// saved, read back and rebuilt with the same actions. (A migration once
// made the saved plan unreadable: the plan file listed action names by
// hand.)
func TestActionsSurviveAPlanFile(t *testing.T) {
	p := &Plan{}
	for _, a := range Actions() {
		p.Changes = append(p.Changes, &Change{Addr: "agent." + a.String(), Kind: "container", Runtime: "default", Action: a})
	}
	data, err := json.Marshal(Save(p, map[string]string{"Bottlefile": "hash"}, nil))
	if err != nil {
		t.Fatal(err)
	}
	saved, err := DecodePlanFile(data)
	if err != nil {
		t.Fatalf("a saved plan does not read back: %v", err)
	}
	got := map[string]Action{}
	for _, c := range saved.Plan().Changes {
		got[c.Addr] = c.Action
	}
	for _, a := range Actions() {
		if got["agent."+a.String()] != a {
			t.Errorf("%s came back as %s", a, got["agent."+a.String()])
		}
	}
}

// TestActionNames: every action has its own name and symbol, and its name
// parses back to it.
func TestActionNames(t *testing.T) {
	names, symbols := map[string]bool{}, map[string]bool{}
	for _, a := range Actions() {
		if names[a.String()] || symbols[a.Symbol()] {
			t.Errorf("%s shares its name or symbol %q", a, a.Symbol())
		}
		names[a.String()], symbols[a.Symbol()] = true, true
		if back, ok := ParseAction(a.String()); !ok || back != a {
			t.Errorf("ParseAction(%q) = %v, %v", a.String(), back, ok)
		}
	}
	if _, ok := ParseAction("explode"); ok {
		t.Error("an unknown name parses")
	}
}

// TestActionRows: every action but NoOp says what it does, makes steps in
// the apply graph, and is counted by the plan's summary; a snapshot
// created is shown and counted as taken.
func TestActionRows(t *testing.T) {
	for _, a := range Actions() {
		c := &Change{Addr: "agent.x", Kind: "container", Runtime: "default", Action: a}
		if c.Headline() == "" {
			t.Errorf("%s has no headline", a)
		}
		p := &Plan{Changes: []*Change{c}}
		order, err := p.Graph().TopologicalOrder()
		if err != nil {
			t.Fatal(err)
		}
		steps := len(order)
		if s := p.Summary(); a == NoOp && (steps != 0 || s != (Summary{})) {
			t.Errorf("no-op makes %d steps and counts %+v", steps, s)
		} else if a != NoOp && (steps == 0 || s == (Summary{})) {
			t.Errorf("%s makes %d steps and counts %+v", a, steps, s)
		}
	}
	take := &Change{Addr: "agent.x.snapshot.1", Kind: "snapshot", Action: Create}
	if take.Symbol() != "@" || take.Headline() != "will be taken" || !take.Takes() {
		t.Errorf("a snapshot created shows as %q %q", take.Symbol(), take.Headline())
	}
	if s := (&Plan{Changes: []*Change{take}}).Summary(); s.Snapshot != 1 || s.Add != 0 {
		t.Errorf("a snapshot taken counts as %+v", s)
	}
	for _, op := range []StepOp{StepCreate, StepUpdate, StepStart, StepDelete, StepAdopt, StepRecord, StepForget, StepMove} {
		if begin, end, during := op.Progress(); begin == "" || end == "" || during == "" || begin == string(op)+"..." {
			t.Errorf("step %s has no progress words", op)
		}
	}
}
