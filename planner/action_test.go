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
