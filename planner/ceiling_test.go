package planner_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/bottlefile/bottlefile/planner"
	"github.com/bottlefile/bottlefile/policy"
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

// TestOperatorPolicyPlan: the operator's egress policy bounds every
// runtime, one declared without a ceiling too; a runtime's egress_ceiling
// only narrows it; refusals name the policy's file, on the rule at fault;
// the driver is given the effective ceiling.
func TestOperatorPolicyPlan(t *testing.T) {
	b := newBench(t)
	pol, diags := policy.Parse("/etc/bottlefile/policy.hcl", []byte(`egress_ceiling = ["*.anthropic.com:443", "github.com:443"]`))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	b.policy = pol

	// A runtime of the author's own, with no ceiling, does not escape it.
	b.write(`runtime "free" {
  driver = "docker"
}
agent "coder" {
  runtime = runtime.free
  image   = "alpine:3"
  egress {
    allow = [
      "api.anthropic.com:443",
      "0.0.0.0/0:443",
    ]
  }
}
`)
	_, err := b.tryPlan(planner.Options{})
	for _, want := range []string{
		"Egress rule outside the operator's egress policy",
		`egress rule "0.0.0.0/0:443" is outside the egress policy the operator set in /etc/bottlefile/policy.hcl`,
		"Bottlefile:10,",
	} {
		if !strings.Contains(err, want) {
			t.Errorf("plan error does not say %q:\n%s", want, err)
		}
	}
	if strings.Contains(err, `"api.anthropic.com:443" is`) {
		t.Errorf("plan refuses a rule inside the policy:\n%s", err)
	}

	// A runtime ceiling wider than the policy is refused at its rule.
	b.write(`runtime "wide" {
  driver         = "docker"
  egress_ceiling = [
    "github.com:443",
    "*.example.org:443",
  ]
}
agent "coder" {
  runtime = runtime.wide
  image   = "alpine:3"
  egress {
    allow = ["github.com:443"]
  }
}
`)
	_, err = b.tryPlan(planner.Options{})
	for _, want := range []string{
		"Runtime ceiling wider than the operator's egress policy",
		`egress_ceiling rule "*.example.org:443" lies outside the egress policy the operator set in /etc/bottlefile/policy.hcl`,
		"Bottlefile:5,",
	} {
		if !strings.Contains(err, want) {
			t.Errorf("plan error does not say %q:\n%s", want, err)
		}
	}

	// Within the policy: the driver gets the policy as the ceiling, or
	// the runtime's narrower one.
	for _, tt := range []struct {
		runtime string
		want    []string
	}{
		{`runtime "default" {
  driver = "docker"
}`, []string{"*.anthropic.com:443", "github.com:443"}},
		{`runtime "default" {
  driver         = "docker"
  egress_ceiling = ["github.com:443"]
}`, []string{"github.com:443"}},
	} {
		b.write(tt.runtime + `
agent "coder" {
  image = "alpine:3"
  egress {
    allow = ["github.com:443"]
  }
}
`)
		b.plan(planner.Options{})
		if got := b.fake.PlanRequest.Agent.EgressCeiling; !slices.Equal(got, tt.want) {
			t.Errorf("the driver was given the ceiling %q, want %q", got, tt.want)
		}
	}

	// No policy: no ceiling at all, as before.
	b.policy = nil
	b.write(`agent "coder" {
  image = "alpine:3"
  egress {
    allow = ["0.0.0.0/0:443"]
  }
}
`)
	b.plan(planner.Options{})
	if got := b.fake.PlanRequest.Agent.EgressCeiling; got != nil {
		t.Errorf("without a policy or runtime ceiling the driver was given %q", got)
	}
}
