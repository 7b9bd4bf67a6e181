package command

import (
	"io"

	"github.com/bottlefile/bottlefile/operations"
	"github.com/bottlefile/bottlefile/planner"
)

// planView renders a plan, as plan and show print it: for people, as one
// JSON document, or as Markdown for a pull request. Commands pick one from
// their flags (newPlanView) and hand it the plan.
type planView interface {
	Plan(p *planner.Plan) error
	// Outputs shows how the plan changes the outputs, after it.
	Outputs(changes []operations.OutputChange)
}

// planFormat is the form a plan is printed in.
type planFormat int

const (
	formatHuman planFormat = iota
	formatJSON
	formatMarkdown
)

func newPlanView(f planFormat, w io.Writer, color bool) planView {
	switch f {
	case formatJSON:
		return jsonPlanView{w}
	case formatMarkdown:
		return markdownPlanView{w}
	}
	return humanPlanView{w, color}
}

type humanPlanView struct {
	w     io.Writer
	color bool
}

func (v humanPlanView) Plan(p *planner.Plan) error { renderPlan(v.w, p, v.color); return nil }
func (v humanPlanView) Outputs(changes []operations.OutputChange) {
	renderOutputChanges(v.w, changes, v.color)
}

type jsonPlanView struct{ w io.Writer }

func (v jsonPlanView) Plan(p *planner.Plan) error { return writePlanJSON(v.w, p) }

// Outputs: the JSON plan document has no outputs.
func (jsonPlanView) Outputs([]operations.OutputChange) {}

type markdownPlanView struct{ w io.Writer }

func (v markdownPlanView) Plan(p *planner.Plan) error { renderPlanMarkdown(v.w, p); return nil }

// Outputs: a pull request's comment is about the bottles.
func (markdownPlanView) Outputs([]operations.OutputChange) {}
