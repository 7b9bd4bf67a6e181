package operations

import (
	"fmt"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/bottlefile/bottlefile/lang"
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
		o := op.Config.Outputs[n]
		v, moreDiags := op.Scope.EvalOutput(o)
		if name == "" && o.Sensitive && needsUnsetVariable(moreDiags) {
			// Listed, a sensitive output shows no value: the variable it
			// needs (the key, as a rule) need not be given to list the rest.
			out = append(out, Output{Name: n, Value: cty.DynamicVal.Mark(lang.Sensitive)})
			continue
		}
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

// needsUnsetVariable reports whether diags are only the error for an
// output that needs a variable given no value (a command that opens the
// configuration as status does: Request.Observe).
func needsUnsetVariable(diags hcl.Diagnostics) bool {
	if !diags.HasErrors() {
		return false
	}
	for _, d := range diags {
		if _, ok := d.Extra.(lang.UnsetVariables); !ok && d.Severity == hcl.DiagError {
			return false
		}
	}
	return true
}

// OutputChange is how one output's value changes under a plan, as
// Terraform's "Changes to Outputs" shows it. Before is the value against
// what the state records, After under the plan (unknown: known after
// apply); either is cty.NilVal when there is none.
type OutputChange struct {
	Name          string
	Before, After cty.Value
}

// outputValues evaluates every declared output against the scope as it
// is; an output that fails to evaluate has no value (cty.NilVal).
func (op *Operation) outputValues() map[string]cty.Value {
	vals := map[string]cty.Value{}
	if op.Config == nil || op.Scope == nil {
		return vals
	}
	for _, name := range op.Config.OutputNames() {
		v, diags := op.Scope.EvalOutput(op.Config.Outputs[name])
		if !diags.HasErrors() {
			vals[name] = v
		}
	}
	return vals
}

// outputChanges compares the outputs before a plan with those under it,
// in name order, leaving out those that do not change. In a destroy
// every output goes.
func outputChanges(names []string, before, after map[string]cty.Value, destroy bool) []OutputChange {
	var out []OutputChange
	for _, name := range names {
		b, a := before[name], after[name]
		if b != cty.NilVal && !b.IsWhollyKnown() {
			b = cty.NilVal // not applied yet: no value before
		}
		if destroy {
			a = cty.NilVal
		}
		switch {
		case b == cty.NilVal && a == cty.NilVal:
			continue
		case b != cty.NilVal && a != cty.NilVal && a.IsWhollyKnown() && b.RawEquals(a):
			continue
		}
		out = append(out, OutputChange{Name: name, Before: b, After: a})
	}
	return out
}
