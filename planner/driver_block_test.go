package planner_test

import (
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2/hcldec"
	"github.com/zclconf/go-cty/cty"

	"github.com/bottlefile/bottlefile/drivers/drivertest"
	"github.com/bottlefile/bottlefile/planner"
)

// The planner decodes an agent's driver block against the per-agent
// schema its runtime's driver declares and hands the value to the
// driver's Plan; a driver that declares none refuses the block before
// it plans.
func TestDriverBlockReachesPlan(t *testing.T) {
	b := newBench(t)
	decl := drivertest.FakeDeclaration()
	decl.Schema.Agent = hcldec.ObjectSpec{"placement": &hcldec.AttrSpec{Name: "placement", Type: cty.List(cty.String)}}
	b.fake.DeclareResponse = &decl
	b.write(`
agent "coder" {
  image = "alpine:3"
  driver {
    placement = ["node.labels.pool==agents"]
  }
}
`)
	b.plan(planner.Options{})
	got := b.fake.PlanRequest.Agent.Driver
	want := cty.ObjectVal(map[string]cty.Value{"placement": cty.ListVal([]cty.Value{cty.StringVal("node.labels.pool==agents")})})
	if got == cty.NilVal || !got.RawEquals(want) {
		t.Fatalf("Plan got driver settings %#v, want %#v", got, want)
	}

	b.fake.DeclareResponse = nil // the fake's own declaration has no per-agent settings
	b.fake.PlanCalled = false
	_, err := b.tryPlan(planner.Options{})
	if !strings.Contains(err, "Unsupported driver block") || b.fake.PlanCalled {
		t.Fatalf("plan error %q, driver planned: %v", err, b.fake.PlanCalled)
	}
}
