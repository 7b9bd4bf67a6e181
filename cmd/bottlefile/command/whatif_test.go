package command

import (
	"bytes"
	"strings"
	"testing"

	"github.com/bottlefile/bottlefile/planner"
)

// TestPlanShowsWhatIf: the plan of an allowlist change shows, under the
// gateway's change, which denied destinations the new rules would allow
// and which in use they would deny, in the human plan and in plan -json.
func TestPlanShowsWhatIf(t *testing.T) {
	lines := []string{
		"of the destinations denied in the last 24 hours, the new allowlist would allow pypi.org:443 (2 requests)",
		"of the destinations in use in the last 24 hours, the new allowlist would deny github.com:443 (5 requests)",
	}
	p := &planner.Plan{Changes: []*planner.Change{{Addr: "agent.coder.gateway", Kind: "gateway", Action: planner.Update, WhatIf: lines}}}
	var out bytes.Buffer
	renderPlan(&out, p, false)
	for _, l := range lines {
		if !strings.Contains(out.String(), "  # (what-if: "+l+")\n") {
			t.Errorf("plan lacks the what-if line %q:\n%s", l, out.String())
		}
	}
	doc := planDocument(p)
	if len(doc.ResourceChanges) != 1 || len(doc.ResourceChanges[0].WhatIf) != 2 {
		t.Errorf("plan -json lacks what_if: %+v", doc)
	}
}
