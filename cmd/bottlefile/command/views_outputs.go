package command

import (
	"fmt"
	"io"

	"github.com/zclconf/go-cty/cty"

	"github.com/bottlefile/bottlefile/operations"
	"github.com/bottlefile/bottlefile/planner"
)

// renderOutputChanges shows how a plan changes the outputs, after the
// plan, as Terraform's "Changes to Outputs".
func renderOutputChanges(w io.Writer, changes []operations.OutputChange, color bool) {
	if len(changes) == 0 {
		return
	}
	paint := palette(color)
	fmt.Fprintln(w, "\nChanges to Outputs:")
	width := 0
	for _, c := range changes {
		width = max(width, len(c.Name))
	}
	for _, c := range changes {
		switch {
		case c.Before == cty.NilVal:
			fmt.Fprintf(w, "  %s %-*s = %s\n", paint.symbol("+"), width, c.Name, outputValue(c.After))
		case c.After == cty.NilVal:
			fmt.Fprintf(w, "  %s %-*s = %s %s\n", paint.symbol("-"), width, c.Name, outputValue(c.Before), paint.dim("-> null"))
		default:
			fmt.Fprintf(w, "  %s %-*s = %s -> %s\n", paint.symbol("~"), width, c.Name, outputValue(c.Before), outputValue(c.After))
		}
	}
}

// outputValue shows one output value as plan and apply do: JSON, a
// sensitive one redacted, one not known yet as (known after apply).
func outputValue(v cty.Value) string {
	if !v.IsWhollyKnown() {
		return "(known after apply)"
	}
	return planner.FormatJSON(planner.RedactedJSON(v))
}

// renderOutputs lists the outputs after an apply, as Terraform does.
func renderOutputs(w io.Writer, outputs []operations.Output) {
	if len(outputs) == 0 {
		return
	}
	fmt.Fprintln(w, "\nOutputs:")
	fmt.Fprintln(w)
	for _, o := range outputs {
		fmt.Fprintf(w, "%s = %s\n", o.Name, outputValue(o.Value))
	}
}
