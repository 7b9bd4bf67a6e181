package operations

import (
	"fmt"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/bottlefile/bottlefile/planner"
)

// Output is one output value, evaluated against what the state records.
type Output struct {
	Name  string
	Value cty.Value // wholly known; sensitive values keep their mark
}

// Outputs evaluates the configuration's outputs against what the state
// records: every one in name order, or with name only that one, unmarked
// (asked for by name, a sensitive value is revealed). An output the
// configuration does not declare, or one that is not known before an
// apply, is an error.
func (op *Operation) Outputs(name string) ([]Output, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	records, err := op.Store.Records()
	if err != nil {
		return nil, hcl.Diagnostics{errorDiag("Cannot read state", err.Error())}
	}
	planner.SetKnown(op.Scope, records)
	names := op.Config.OutputNames()
	if name != "" {
		if _, ok := op.Config.Outputs[name]; !ok {
			return nil, hcl.Diagnostics{errorDiag("No such output", fmt.Sprintf("the configuration declares no output %q", name))}
		}
		names = []string{name}
	}
	out := make([]Output, 0, len(names))
	for _, n := range names {
		v, moreDiags := op.Scope.EvalOutput(op.Config.Outputs[n])
		diags = append(diags, moreDiags...)
		if moreDiags.HasErrors() {
			return nil, diags
		}
		if name != "" {
			v, _ = v.UnmarkDeep()
		}
		if !v.IsWhollyKnown() {
			return nil, append(diags, errorDiag("Output not known yet", fmt.Sprintf("output %q depends on values known only after apply; run apply first", n)))
		}
		out = append(out, Output{Name: n, Value: v})
	}
	return out, diags
}
