package command

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"

	"github.com/bottlefile/bottlefile/lang"
)

// inputs are where variable values come from for one command.
type inputs struct {
	Vars     []string // -var name=value, in order
	VarFiles []string // -var-file=FILE, in order
	// Saved are the non-sensitive values a saved plan was made with; they
	// override everything else.
	Saved map[string]json.RawMessage
}

// registerInputs adds -var and -var-file to a command's flags.
func registerInputs(fs *flag.FlagSet) *inputs {
	in := &inputs{}
	fs.Var((*stringList)(&in.Vars), "var", "")
	fs.Var((*stringList)(&in.VarFiles), "var-file", "")
	return in
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
func variableValues(p *lang.Parser, cfg *lang.Config, in inputs) (map[string]cty.Value, hcl.Diagnostics) {
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
		decl, ok := cfg.Variables[name]
		if !ok || decl.Sensitive || lang.IsSensitive(v) {
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
