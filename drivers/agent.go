package drivers

import (
	"errors"
	"fmt"

	"github.com/zclconf/go-cty/cty"
)

// AgentSpec is one evaluated agent block. Values are cty values so that
// unknowns (known after apply) and sensitive marks survive the boundary;
// drivers copy them into Object.Attrs and decode them with the helpers below.
type AgentSpec struct {
	Addr string // "agent.coder"
	Name string // "coder"

	Image      cty.Value // string, or null when Build is set
	Build      *BuildSpec
	Command    cty.Value // list of string, or null for the image's default
	Entrypoint cty.Value // list of string, or null
	Env        cty.Value // map of string, or null
	Workdir    cty.Value // string, or null
	User       cty.Value // string, or null
	CPUs       cty.Value // number, or null
	Memory     cty.Value // number of bytes, or null
	Labels     cty.Value // map of string, or null
	// Egress is the allowlist, a list of rule strings ("host",
	// "host:port", "*.suffix:port"); null when there is no egress block.
	// Null and empty both mean the agent reaches nothing outside its bottle.
	Egress cty.Value
	// Sidecars are helper workloads in the agent's bottle, reachable from
	// the agent by name, in declaration order.
	Sidecars []SidecarSpec
}

// SidecarSpec is one evaluated sidecar block; its address is
// "agent.AGENT.sidecar.NAME". Fields mean what they mean on AgentSpec.
type SidecarSpec struct {
	Addr, Name                                                            string
	Image                                                                 cty.Value
	Build                                                                 *BuildSpec
	Command, Entrypoint, Env, Workdir, User, CPUs, Memory, Labels, Egress cty.Value
}

// RuleError is a driver's complaint about one egress rule, so the planner
// can point the diagnostic at that rule in the Bottlefile.
type RuleError struct {
	Index int    // position in the allow list
	Rule  string // the rule as written
	Err   error
}

func (e *RuleError) Error() string { return fmt.Sprintf("egress rule %q: %v", e.Rule, e.Err) }
func (e *RuleError) Unwrap() error { return e.Err }

// BuildSpec is an image built from a local context directory. The driver
// hashes the context at plan time, so a change in it shows up in the plan.
type BuildSpec struct {
	Context    string // absolute path
	Dockerfile string // relative to Context; "Dockerfile" when empty
}

// Strings decodes a list of strings. Null gives nil.
func Strings(v cty.Value) ([]string, error) {
	v, _ = v.UnmarkDeep()
	if v.IsNull() {
		return nil, nil
	}
	if !v.IsWhollyKnown() {
		return nil, fmt.Errorf("value is not known yet")
	}
	if !v.CanIterateElements() {
		return nil, fmt.Errorf("want a list of strings, got %s", v.Type().FriendlyName())
	}
	var out []string
	for it := v.ElementIterator(); it.Next(); {
		_, e := it.Element()
		if e.IsNull() || e.Type() != cty.String {
			return nil, fmt.Errorf("want a list of strings")
		}
		out = append(out, e.AsString())
	}
	return out, nil
}

// StringMap decodes a map of strings. Null gives nil.
func StringMap(v cty.Value) (map[string]string, error) {
	v, _ = v.UnmarkDeep()
	if v.IsNull() {
		return nil, nil
	}
	if !v.IsWhollyKnown() {
		return nil, fmt.Errorf("value is not known yet")
	}
	if !v.CanIterateElements() {
		return nil, fmt.Errorf("want a map of strings, got %s", v.Type().FriendlyName())
	}
	out := map[string]string{}
	for it := v.ElementIterator(); it.Next(); {
		k, e := it.Element()
		if e.IsNull() || e.Type() != cty.String {
			return nil, fmt.Errorf("want a map of strings")
		}
		out[k.AsString()] = e.AsString()
	}
	return out, nil
}

// String decodes a string. Null gives "".
func String(v cty.Value) (string, error) {
	v, _ = v.UnmarkDeep()
	if v.IsNull() {
		return "", nil
	}
	if !v.IsKnown() {
		return "", fmt.Errorf("value is not known yet")
	}
	if v.Type() != cty.String {
		return "", fmt.Errorf("want a string, got %s", v.Type().FriendlyName())
	}
	return v.AsString(), nil
}

// Int decodes a whole number. Null gives 0.
func Int(v cty.Value) (int64, error) {
	v, _ = v.UnmarkDeep()
	if v.IsNull() {
		return 0, nil
	}
	if !v.IsKnown() {
		return 0, fmt.Errorf("value is not known yet")
	}
	if v.Type() != cty.Number {
		return 0, fmt.Errorf("want a number, got %s", v.Type().FriendlyName())
	}
	i, acc := v.AsBigFloat().Int64()
	if acc != 0 {
		return 0, fmt.Errorf("want a whole number")
	}
	return i, nil
}

// Float decodes a number. Null gives 0.
func Float(v cty.Value) (float64, error) {
	v, _ = v.UnmarkDeep()
	if v.IsNull() {
		return 0, nil
	}
	if !v.IsKnown() {
		return 0, fmt.Errorf("value is not known yet")
	}
	if v.Type() != cty.Number {
		return 0, fmt.Errorf("want a number, got %s", v.Type().FriendlyName())
	}
	f, _ := v.AsBigFloat().Float64()
	return f, nil
}

// ConfigString reads an optional string attribute of a decoded runtime
// block (ConfigureRequest.Config); a null block or attribute gives "".
func ConfigString(cfg cty.Value, name string) (string, error) {
	if cfg == cty.NilVal || cfg.IsNull() {
		return "", nil
	}
	if !cfg.IsKnown() {
		return "", errors.New("the runtime block is not known yet")
	}
	if !cfg.Type().IsObjectType() || !cfg.Type().HasAttribute(name) {
		return "", nil
	}
	return String(cfg.GetAttr(name))
}
