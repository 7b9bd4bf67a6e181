package lang

import (
	"github.com/hashicorp/hcl/v2"
)

// validateValues evaluates every expression once with all input variables
// unknown: what does not depend on a variable's value is checked now,
// before any plan, as `terraform validate` does. Defaults are checked
// against their variable's validation rules.
func (c *Config) validateValues() hcl.Diagnostics {
	var diags hcl.Diagnostics
	s := c.validationScope()
	for _, name := range c.VariableNames() {
		v := c.Variables[name]
		if !v.Required() && v.Default.IsWhollyKnown() {
			diags = append(diags, s.checkValidations(v, v.Default, v.DefaultRange, "Invalid default value for variable")...)
		}
	}
	for _, name := range sortedKeys(c.Locals) {
		_, moreDiags := s.Local(name)
		diags = append(diags, moreDiags...)
	}
	for _, name := range c.AgentNames() {
		a := c.Agents[name]
		diags = append(diags, s.checkKeys("agent", name, a.Instances)...)
		_, moreDiags := s.EvalAgent(a)
		diags = append(diags, moreDiags...)
	}
	for _, name := range c.SnapshotNames() {
		sn := c.Snapshots[name]
		diags = append(diags, s.checkKeys("snapshot", name, sn.Instances)...)
		_, moreDiags := s.EvalSnapshot(sn)
		diags = append(diags, moreDiags...)
	}
	for _, name := range c.OutputNames() {
		_, moreDiags := s.EvalOutput(c.Outputs[name])
		diags = append(diags, moreDiags...)
	}
	return diags
}

// ValidationScope is a scope where every input variable is unknown, as
// validate evaluates: for checks beyond lang's own (a driver's schema and
// capabilities) that need no values.
func (c *Config) ValidationScope() *Scope { return c.validationScope() }
