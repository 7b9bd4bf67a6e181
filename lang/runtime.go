package lang

import (
	"fmt"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"

	"github.com/bottlefile/bottlefile/addrs"
)

// DefaultRuntime is the name of the runtime an agent without a `runtime`
// attribute runs on. Without any runtime block, the configuration has an
// implicit one of this name with the docker driver.
const DefaultRuntime = "default"

// DefaultDriver is the driver of the implicit runtime.
const DefaultDriver = "docker"

// Runtime is a `runtime "NAME"` block: where agents run.
type Runtime struct {
	Name     string
	Driver   string // "docker", "smolvm"
	Implicit bool   // not declared: the implicit "default" docker runtime
	// Config is the rest of the block, the driver-specific attributes, to be
	// decoded with the driver's hcldec spec (Scope.EvalRuntime).
	Config hcl.Body
	// EgressCeiling is the egress_ceiling attribute, whatever the driver:
	// the egress rules no agent on the runtime may reach beyond (see
	// Scope.EvalEgressCeiling); nil when the runtime has none.
	EgressCeiling *hcl.Attribute

	DeclRange   hcl.Range
	DriverRange hcl.Range
}

// Addr is "runtime.NAME".
func (r *Runtime) Addr() string { return addrs.Runtime(r.Name).String() }

// References returns the addresses the runtime's attributes refer to
// (variables and locals only), deduplicated and sorted.
func (r *Runtime) References() []string { return refAddrs(r.refs()) }

func (r *Runtime) refs() []*reference {
	var refs []*reference
	for _, t := range r.variables() {
		// Only variables and locals are allowed; others are reported by
		// checkReferences and are no dependencies.
		if ref, _ := parseReference(t); ref != nil && contains(runtimeKinds, ref.kind) {
			refs = append(refs, ref)
		}
	}
	return refs
}

// variables is every traversal in the runtime's attributes but driver:
// the driver's attributes and egress_ceiling.
func (r *Runtime) variables() []hcl.Traversal {
	vars := bodyVariables(r.Config)
	if _, native := r.Config.(*hclsyntax.Body); !native && r.EgressCeiling != nil {
		// A native body's attributes are all walked, those lang took
		// too; other syntaxes hide them.
		vars = append(vars, r.EgressCeiling.Expr.Variables()...)
	}
	return vars
}

var runtimeSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "driver", Required: true},
		{Name: "egress_ceiling"},
	},
}

func implicitRuntime() *Runtime {
	return &Runtime{Name: DefaultRuntime, Driver: DefaultDriver, Implicit: true, Config: hcl.EmptyBody()}
}

func decodeRuntimeBlock(block *hcl.Block) (*Runtime, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	r := &Runtime{Name: block.Labels[0], DeclRange: block.DefRange}
	diags = append(diags, checkName("runtime", r.Name, labelRange(block, 0))...)

	content, remain, moreDiags := block.Body.PartialContent(runtimeSchema)
	diags = append(diags, moreDiags...)
	r.Config = remain
	r.EgressCeiling = content.Attributes["egress_ceiling"]
	if attr, ok := content.Attributes["driver"]; ok {
		r.DriverRange = attr.Expr.Range()
		s, moreDiags := staticString(attr)
		diags = append(diags, moreDiags...)
		r.Driver = s
		if !moreDiags.HasErrors() && !ValidName(s) {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Invalid driver name",
				Detail:   fmt.Sprintf("%q is not a driver name; drivers are named like \"docker\" or \"smolvm\".", s),
				Subject:  attr.Expr.Range().Ptr(),
			})
		}
	}
	return r, diags
}

// bodyVariables is every traversal in a body whose schema lang does not
// know: all attributes of a native-syntax body, nested blocks included; for
// other syntaxes, the body's top-level attributes.
func bodyVariables(body hcl.Body) []hcl.Traversal {
	if body == nil {
		return nil
	}
	if sb, ok := body.(*hclsyntax.Body); ok {
		var vars []hcl.Traversal
		var walk func(b *hclsyntax.Body)
		walk = func(b *hclsyntax.Body) {
			for _, name := range sortedKeys(b.Attributes) {
				vars = append(vars, b.Attributes[name].Expr.Variables()...)
			}
			for _, blk := range b.Blocks {
				walk(blk.Body)
			}
		}
		walk(sb)
		return vars
	}
	attrs, _ := body.JustAttributes()
	var vars []hcl.Traversal
	for _, name := range sortedKeys(attrs) {
		vars = append(vars, attrs[name].Expr.Variables()...)
	}
	return vars
}

// EvalEgressCeiling evaluates a runtime's egress_ceiling: a list of egress
// rules (the allow grammar), each checked. It is null when the runtime has
// none, and may be unknown (validate, with variables unknown). The rules
// bound every agent's and sidecar's allow list on the runtime; the planner
// and validate refuse a rule outside them (egress.Covered), whatever the
// driver.
func (s *Scope) EvalEgressCeiling(r *Runtime) (cty.Value, hcl.Diagnostics) {
	if r.EgressCeiling == nil {
		return cty.NullVal(listOfString), nil
	}
	var diags hcl.Diagnostics
	s.mu.Lock()
	defer s.mu.Unlock()
	expr := r.EgressCeiling.Expr
	ctx, moreDiags := s.evalContext(exprRefs(expr), nil)
	diags = append(diags, moreDiags...)
	v, moreDiags := s.evalAttr(ctx, expr, "egress_ceiling", listOfString)
	diags = append(diags, moreDiags...)
	if !moreDiags.HasErrors() {
		diags = append(diags, checkElements(v, expr, "egress_ceiling", nil)...)
		diags = append(diags, checkEgressRules(v, expr)...)
	}
	if diags.HasErrors() {
		v = cty.UnknownVal(listOfString)
	}
	return v, s.redact.redact(diags)
}

// AttrRange is the range of the expression of one of the runtime block's
// driver attributes; false when the block does not set it.
func (r *Runtime) AttrRange(name string) (hcl.Range, bool) {
	if r.Config == nil {
		return hcl.Range{}, false
	}
	content, _, _ := r.Config.PartialContent(&hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: name}}})
	if content == nil {
		return hcl.Range{}, false
	}
	a, ok := content.Attributes[name]
	if !ok {
		return hcl.Range{}, false
	}
	return a.Expr.Range(), true
}
