package command

import (
	"encoding/json"
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

// outputsView renders the output command: name = value lines for people
// (one output's value alone, as a script reads it), or JSON.
type outputsView interface {
	// Outputs shows outputs; byName, when not "", is the one asked for.
	Outputs(outputs []operations.Output, byName string)
}

func newOutputsView(asJSON bool, w io.Writer) outputsView {
	if asJSON {
		return jsonOutputsView{w}
	}
	return humanOutputsView{w}
}

type humanOutputsView struct{ w io.Writer }

func (v humanOutputsView) Outputs(outputs []operations.Output, byName string) {
	switch {
	case byName != "":
		fmt.Fprintln(v.w, rawOutput(outputs[0].Value))
	case len(outputs) == 0:
		fmt.Fprintln(v.w, "The Bottlefile declares no outputs.")
	default:
		for _, o := range outputs {
			fmt.Fprintf(v.w, "%s = %s\n", o.Name, planner.FormatJSON(planner.RedactedJSON(o.Value)))
		}
	}
}

// jsonOutputsView prints one JSON object of every output, or the value of
// the one asked for; a sensitive value redacted.
type jsonOutputsView struct{ w io.Writer }

func (v jsonOutputsView) Outputs(outputs []operations.Output, byName string) {
	values := map[string]json.RawMessage{}
	for _, o := range outputs {
		values[o.Name] = planner.RedactedJSON(o.Value)
	}
	data := values[byName]
	if byName == "" {
		data, _ = json.MarshalIndent(values, "", "  ")
	}
	fmt.Fprintln(v.w, string(data))
}

// rawOutput prints a string as it is and anything else as HCL would.
func rawOutput(v cty.Value) string {
	if v.Type() == cty.String && !v.IsNull() {
		return v.AsString()
	}
	return planner.FormatJSON(planner.RedactedJSON(v))
}
