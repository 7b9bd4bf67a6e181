package command

import (
	"fmt"

	"github.com/bottlefile/bottlefile/operations"
	"github.com/bottlefile/bottlefile/planner"
)

// applyPlan applies a plan the snapshot commands made, with apply's
// progress lines and summary, and returns the exit code.
func applyPlan(m *Meta, op *operations.Operation, p *planner.Plan, v *applyView, destroy bool) int {
	if !p.Applyable() {
		return 0
	}
	fmt.Fprintln(m.Stdout)
	res, diags := op.Apply(m.Ctx, p, operations.ApplyOptions{Hook: newProgressHook(v.events), Abandon: m.Abandon})
	failed := v.diags(op.Files(), diags) || m.Ctx.Err() != nil
	v.summary(res, destroy, failed)
	if failed {
		return 1
	}
	return 0
}
