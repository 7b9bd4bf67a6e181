package planner_test

import (
	"strings"
	"testing"

	"github.com/bottlefile/bottlefile/planner"
)

// TestEgressCeilingPlan: plan refuses an allow rule outside the runtime's
// egress_ceiling, on that rule; a ceiling changed later re-checks the
// agents already applied.
func TestEgressCeilingPlan(t *testing.T) {
	b := newBench(t)
	src := func(ceiling string) string {
		return `runtime "default" {
  driver         = "docker"
  egress_ceiling = ` + ceiling + `
}
agent "coder" {
  image = "alpine:3"
  egress {
    allow = [
      "api.anthropic.com:443",
      "github.com:443",
    ]
  }
}
agent "other" {
  image = "alpine:3"
  egress {
    allow = ["files.pythonhosted.org:443"]
  }
}
`
	}
	b.write(src(`["*.anthropic.com:443", "github.com:443", "*.pythonhosted.org:443"]`))
	b.apply(planner.Options{})

	// The ceiling narrows: github.com goes. The agent's configuration has
	// not changed, and its plan fails at the rule.
	b.write(src(`["*.anthropic.com:443", "*.pythonhosted.org:443"]`))
	_, err := b.tryPlan(planner.Options{})
	for _, want := range []string{
		"Egress rule outside the runtime's ceiling",
		`egress rule "github.com:443" is outside the runtime's egress_ceiling`,
		"Bottlefile:10,",
	} {
		if !strings.Contains(err, want) {
			t.Errorf("plan error does not say %q:\n%s", want, err)
		}
	}
	if strings.Contains(err, "agent.other") || strings.Contains(err, `"api.anthropic.com:443" is`) {
		t.Errorf("plan refuses a rule inside the ceiling:\n%s", err)
	}
}
