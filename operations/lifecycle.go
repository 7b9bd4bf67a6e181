package operations

import (
	"context"
	"fmt"

	"github.com/hashicorp/hcl/v2"

	"github.com/bottlefile/bottlefile/addrs"
	"github.com/bottlefile/bottlefile/planner"
)

// PlanStop plans bottlefile stop: the workloads of each agent (its own,
// its sidecars', its gateway's) stopped and recorded as stopped on
// purpose, and nothing else.
func (op *Operation) PlanStop(ctx context.Context, agents []string) (*planner.Plan, hcl.Diagnostics) {
	return op.planLifecycle(ctx, "stop", planner.Options{Stop: agents}, agents)
}

// PlanStart plans bottlefile start: the stopped workloads of each agent
// started again, and nothing else.
func (op *Operation) PlanStart(ctx context.Context, agents []string) (*planner.Plan, hcl.Diagnostics) {
	return op.planLifecycle(ctx, "start", planner.Options{Start: agents}, agents)
}

func (op *Operation) planLifecycle(ctx context.Context, verb string, opts planner.Options, agents []string) (*planner.Plan, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	for _, a := range agents {
		if addr, err := addrs.Parse(a); err != nil || !addr.IsAgent() {
			return nil, append(diags, errorDiag("Invalid agent address", fmt.Sprintf("%s %s: an agent address is agent.NAME (or agent.NAME[\"KEY\"]); a sidecar or gateway stops, starts and is archived with its agent.", verb, a)))
		}
	}
	p, moreDiags := op.Plan(ctx, opts)
	diags = append(diags, moreDiags...)
	if diags.HasErrors() {
		return nil, diags
	}
	// It is applied without asking: refuse a plan that would do anything
	// else.
	for _, c := range p.Changes {
		if !lifecycleChange(verb, c) {
			return nil, append(diags, errorDiag("Cannot "+verb, fmt.Sprintf("The plan for it would also %s %s; %s changes nothing else. Run plan to see why.", c.Action, c.Addr, verb)))
		}
	}
	return p, diags
}
