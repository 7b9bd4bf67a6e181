package lang

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestEvalKnownAtPlanTime: resume, the snapshot_policy numbers and
// durations and the idle durations must be known when the plan is made.
// Validation lets an unknown one pass (the load below succeeds); the plan
// reports each, in the order written, at its own line.
func TestEvalKnownAtPlanTime(t *testing.T) {
	_, cfg := load(t, map[string]string{"proj/Bottlefile": `
agent "other" {
  image = "alpine:3"
}
agent "coder" {
  image  = "alpine:3"
  resume = agent.other.id != ""
  snapshot_policy {
    keep_last      = length(agent.other.id)
    max_age        = agent.other.id
    max_total_size = agent.other.id
    every          = agent.other.id
  }
  idle {
    stop_after = agent.other.id
  }
}
`})
	s, diags := cfg.NewScope(nil)
	if len(diags) > 0 {
		t.Fatal(diags)
	}
	_, diags = s.EvalAgent(cfg.Agents["coder"])
	type diag struct {
		Summary string
		Line    int
	}
	var got []diag
	for _, d := range diags {
		line := 0
		if d.Subject != nil {
			line = d.Subject.Start.Line
		}
		got = append(got, diag{d.Summary, line})
	}
	want := []diag{
		{"Value of resume not known at plan time", 7},
		{"Value of keep_last not known at plan time", 9},
		{"Value of max_age not known at plan time", 10},
		{"Value of max_total_size not known at plan time", 11},
		{"Value of every not known at plan time", 12},
		{"Value of stop_after not known at plan time", 15},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("diagnostics (-want +got):\n%s", diff)
	}
}
