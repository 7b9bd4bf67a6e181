package lang

import (
	"fmt"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
)

// staticValue evaluates an expression that must be a constant: no
// references and no function calls.
func staticValue(expr hcl.Expression, attr string) (cty.Value, hcl.Diagnostics) {
	if vars := expr.Variables(); len(vars) > 0 {
		return cty.DynamicVal, hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "References not allowed here",
			Detail:   fmt.Sprintf("The value of %q must be a constant; it cannot refer to %s or to anything else.", attr, traversalString(vars[0])),
			Subject:  vars[0].SourceRange().Ptr(),
		}}
	}
	return expr.Value(nil)
}

// staticString is a constant string attribute.
func staticString(attr *hcl.Attribute) (string, hcl.Diagnostics) {
	v, diags := staticTyped(attr, cty.String, "a string")
	if diags.HasErrors() || v.IsNull() {
		return "", diags
	}
	return v.AsString(), diags
}

// staticBool is a constant bool attribute.
func staticBool(attr *hcl.Attribute) (bool, hcl.Diagnostics) {
	v, diags := staticTyped(attr, cty.Bool, "true or false")
	if diags.HasErrors() || v.IsNull() {
		return false, diags
	}
	return v.True(), diags
}

func staticTyped(attr *hcl.Attribute, ty cty.Type, want string) (cty.Value, hcl.Diagnostics) {
	v, diags := staticValue(attr.Expr, attr.Name)
	if diags.HasErrors() {
		return cty.NullVal(ty), diags
	}
	cv, err := convert.Convert(v, ty)
	if err != nil || !cv.IsWhollyKnown() {
		diags = append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Incorrect attribute value type",
			Detail:   fmt.Sprintf("Inappropriate value for attribute %q: %s is required.", attr.Name, want),
			Subject:  attr.Expr.Range().Ptr(),
		})
		return cty.NullVal(ty), diags
	}
	return cv, diags
}

// traversalString renders a traversal the way it is written: var.x,
// agent.a.id, local.l[0].
func traversalString(t hcl.Traversal) string {
	var s string
	for _, step := range t {
		switch st := step.(type) {
		case hcl.TraverseRoot:
			s += st.Name
		case hcl.TraverseAttr:
			s += "." + st.Name
		case hcl.TraverseIndex:
			k := st.Key
			switch {
			case !k.IsKnown() || k.IsMarked() || k.IsNull():
				s += "[...]"
			case k.Type() == cty.String:
				s += fmt.Sprintf("[%q]", k.AsString())
			case k.Type() == cty.Number:
				s += "[" + k.AsBigFloat().Text('f', -1) + "]"
			default:
				s += "[...]"
			}
		case hcl.TraverseSplat:
			s += "[*]"
		}
	}
	return s
}
