package operations

import (
	"context"
	"fmt"

	"github.com/hashicorp/hcl/v2"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/executor"
	"github.com/bottlefile/bottlefile/planner"
)

// Opener opens the configuration as an Operation: read-only (a shared
// lock on the state, as plan takes) or for writing (the state lock, as
// apply takes).
type Opener func(ctx context.Context, readOnly bool) (*Operation, hcl.Diagnostics)

// TickResult is what one tick found and did.
type TickResult struct {
	// Due is when each time policy is due, as the last plan found it;
	// those with Now set were due at the tick.
	Due []planner.Due
	// Plan is the plan applied; nil when nothing was due.
	Plan *planner.Plan
	// Result is what the apply did.
	Result executor.Result
	// Files are the configuration's files, for diagnostics with snippets.
	Files map[string]*hcl.File
}

// TickOptions tune Tick.
type TickOptions struct {
	ApplyOptions
	// Planned, when set, is called with the plan about to be applied.
	Planned func(*planner.Plan)
}

// Tick makes one pass of every time policy due now (bottlefile tick): it
// plans with the state read under a shared lock, as plan does, and only
// when an action is due opens the state for writing, plans again (the
// state may have moved meanwhile) and applies, holding the lock only
// while it acts. With nothing due it changes nothing, so it is safe to run
// as often as cron or a timer likes. The actions are planned ones (a
// snapshot as snapshot take takes it, a stop, an archive): a tick cut off
// converges as an apply does, at the next tick.
func Tick(ctx context.Context, open Opener, o TickOptions) (TickResult, hcl.Diagnostics) {
	var res TickResult
	p, files, diags := planTick(ctx, open, true)
	res.Files = files
	if diags.HasErrors() {
		return res, diags
	}
	res.Due = p.Due
	if !p.Applyable() {
		return res, diags
	}

	op, moreDiags := open(ctx, false)
	defer op.Close()
	res.Files = op.Files()
	diags = append(diags, moreDiags...)
	if diags.HasErrors() {
		return res, diags
	}
	p, moreDiags = op.PlanTick(ctx)
	diags = append(diags, moreDiags...)
	if diags.HasErrors() {
		return res, diags
	}
	res.Due = p.Due
	if !p.Applyable() {
		return res, diags // another tick acted first
	}
	res.Plan = p
	if o.Planned != nil {
		o.Planned(p)
	}
	r, moreDiags := op.Apply(ctx, p, o.ApplyOptions)
	res.Result = r
	return res, append(diags, moreDiags...)
}

// planTick opens the operation and plans a tick.
func planTick(ctx context.Context, open Opener, readOnly bool) (*planner.Plan, map[string]*hcl.File, hcl.Diagnostics) {
	op, diags := open(ctx, readOnly)
	defer op.Close()
	if diags.HasErrors() {
		return nil, op.Files(), diags
	}
	p, moreDiags := op.PlanTick(ctx)
	return p, op.Files(), append(diags, moreDiags...)
}

// PlanTick plans the actions of the time policies due now, and nothing
// else: it refuses a plan that would do anything a tick does not.
func (op *Operation) PlanTick(ctx context.Context) (*planner.Plan, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	if op.Lineage() == "" {
		// Nothing applied: nothing can be due.
		return &planner.Plan{Options: planner.Options{Tick: true}}, diags
	}
	p, moreDiags := op.Plan(ctx, planner.Options{Tick: true})
	diags = append(diags, moreDiags...)
	if diags.HasErrors() {
		return nil, diags
	}
	for _, c := range p.Changes {
		if !TickAction(c) {
			return nil, append(diags, errorDiag("Cannot tick", fmt.Sprintf("The plan for it would also %s %s, which no time policy does. Run plan to see why.", c.Action, c.Addr)))
		}
	}
	return p, diags
}

// TickAction reports whether a change is one a tick plans: a snapshot
// taken or pruned, a workload stopped, an agent's objects archived.
func TickAction(c *planner.Change) bool {
	switch c.Action {
	case planner.NoOp, planner.Stop, planner.Archive:
		return true
	case planner.Create, planner.Delete:
		return c.Kind == drivers.KindSnapshot
	}
	return false
}
