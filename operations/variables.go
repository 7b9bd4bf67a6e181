package operations

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"

	"github.com/bottlefile/bottlefile/lang"
	"github.com/bottlefile/bottlefile/planner"
)

// Inputs are where the values of the input variables come from for one
// command: its -var and -var-file flags, the BOTTLEFILE_VAR_ environment,
// and a saved plan's values.
type Inputs struct {
	Vars     []string // -var name=value, in order
	VarFiles []string // -var-file=FILE, in order
	// Saved are the non-sensitive values a saved plan was made with; they
	// override everything else.
	Saved map[string]json.RawMessage
}

// environment returns the BOTTLEFILE_VAR_ entries of the process
// environment: the only environment bottlefile's language sees.
func environment() map[string]string {
	out := map[string]string{}
	for _, kv := range os.Environ() {
		if k, v, ok := strings.Cut(kv, "="); ok && strings.HasPrefix(k, lang.EnvVarPrefix) {
			out[k] = v
		}
	}
	return out
}

// variableValues resolves every input variable in precedence order.
func variableValues(p *lang.Parser, cfg *lang.Config, in Inputs) (map[string]cty.Value, hcl.Diagnostics) {
	vals, diags := p.VariableValues(cfg, lang.VarInputs{Vars: in.Vars, VarFiles: in.VarFiles, Env: environment()})
	for name, raw := range in.Saved {
		v, err := decodeSavedValue(raw)
		if err != nil {
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid saved plan", Detail: fmt.Sprintf("The value saved for variable %q cannot be read: %v.", name, err)})
			continue
		}
		vals[name] = v
	}
	return vals, diags
}

// savedValue is a variable value as a plan file keeps it: typed JSON.
type savedValue struct {
	Type  json.RawMessage `json:"type"`
	Value json.RawMessage `json:"value"`
}

// saveValues keeps the given values of non-sensitive variables; sensitive
// ones never enter a plan file and are read again at apply.
func saveValues(cfg *lang.Config, vals map[string]cty.Value) map[string]json.RawMessage {
	out := map[string]json.RawMessage{}
	for name, v := range vals {
		if _, ok := cfg.Variables[name]; !ok || cfg.SensitiveVariable(name) || lang.IsSensitive(v) {
			continue
		}
		v, _ = v.UnmarkDeep()
		ty, err := ctyjson.MarshalType(v.Type())
		if err != nil {
			continue
		}
		val, err := ctyjson.Marshal(v, v.Type())
		if err != nil {
			continue
		}
		data, _ := json.Marshal(savedValue{Type: ty, Value: val})
		out[name] = data
	}
	return out
}

func decodeSavedValue(raw json.RawMessage) (cty.Value, error) {
	var sv savedValue
	if err := json.Unmarshal(raw, &sv); err != nil {
		return cty.NilVal, err
	}
	ty, err := ctyjson.UnmarshalType(sv.Type)
	if err != nil {
		return cty.NilVal, err
	}
	return ctyjson.Unmarshal(sv.Value, ty)
}

// SavePlan writes p to path as a plan file: with the hashes of the
// configuration's files and the values of its non-sensitive variables, so
// that apply can perform exactly it, or refuse it once stale.
func (op *Operation) SavePlan(p *planner.Plan, path string) error {
	return planner.Save(p, op.ConfigHashes(), saveValues(op.Config, op.Vars)).WriteFile(path)
}

// PlanSaved plans again with a saved plan's options (the operation opened
// with its values as Inputs.Saved) and refuses the plan, as stale, when
// anything it was made from has changed since: the configuration, the
// state, or what is live. What it returns is the plan to apply.
func (op *Operation) PlanSaved(ctx context.Context, saved *planner.SavedPlan) (*planner.Plan, hcl.Diagnostics) {
	stale := func(diags hcl.Diagnostics, err error) (*planner.Plan, hcl.Diagnostics) {
		return nil, append(diags, errorDiag("Saved plan is stale", fmt.Sprintf("%v; run plan again", err)))
	}
	if err := saved.CheckConfig(op.ConfigHashes()); err != nil {
		return stale(nil, err)
	}
	if err := saved.CheckState(op.Store.Lineage(), op.Store.Serial()); err != nil {
		return stale(nil, err)
	}
	p, diags := op.Plan(ctx, saved.Options)
	if diags.HasErrors() {
		return nil, diags
	}
	if err := saved.CheckFresh(p); err != nil {
		return stale(diags, err)
	}
	return p, diags
}
