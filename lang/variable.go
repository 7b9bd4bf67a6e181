package lang

import (
	"fmt"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/ext/typeexpr"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
)

// Variable is a `variable "NAME"` block: an input of the configuration.
type Variable struct {
	Name        string
	Description string
	Type        cty.Type  // cty.DynamicPseudoType when no type is given
	Default     cty.Value // cty.NilVal when the variable is required; converted to Type
	Sensitive   bool
	Validations []*VariableValidation

	DeclRange    hcl.Range // the `variable "NAME"` header
	TypeRange    hcl.Range // the type expression; zero without one
	DefaultRange hcl.Range // the default expression; zero without one

	typeDefaults *typeexpr.Defaults // optional(..., default) attributes of Type
}

// VariableValidation is a `validation` block inside a variable.
type VariableValidation struct {
	Condition    hcl.Expression // must be true; may refer only to its own variable
	ErrorMessage hcl.Expression // a string, shown when Condition is false
	DeclRange    hcl.Range
}

// Addr is "var.NAME".
func (v *Variable) Addr() string { return "var." + v.Name }

// Required reports whether the variable has no default.
func (v *Variable) Required() bool { return v.Default == cty.NilVal }

var variableSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "type"},
		{Name: "default"},
		{Name: "description"},
		{Name: "sensitive"},
	},
	Blocks: []hcl.BlockHeaderSchema{
		{Type: "validation"},
	},
}

var validationSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "condition", Required: true},
		{Name: "error_message", Required: true},
	},
}

func decodeVariableBlock(block *hcl.Block) (*Variable, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	v := &Variable{
		Name:      block.Labels[0],
		Type:      cty.DynamicPseudoType,
		DeclRange: block.DefRange,
	}
	diags = append(diags, checkName("variable", v.Name, labelRange(block, 0))...)

	content, moreDiags := block.Body.Content(variableSchema)
	diags = append(diags, moreDiags...)

	if attr, ok := content.Attributes["description"]; ok {
		s, moreDiags := staticString(attr)
		diags = append(diags, moreDiags...)
		v.Description = s
	}
	if attr, ok := content.Attributes["sensitive"]; ok {
		b, moreDiags := staticBool(attr)
		diags = append(diags, moreDiags...)
		v.Sensitive = b
	}
	if attr, ok := content.Attributes["type"]; ok {
		ty, defaults, moreDiags := typeexpr.TypeConstraintWithDefaults(attr.Expr)
		diags = append(diags, moreDiags...)
		if !moreDiags.HasErrors() {
			v.Type = ty
			v.typeDefaults = defaults
		}
		v.TypeRange = attr.Expr.Range()
	}
	if attr, ok := content.Attributes["default"]; ok {
		v.DefaultRange = attr.Expr.Range()
		val, moreDiags := staticValue(attr.Expr, "default")
		diags = append(diags, moreDiags...)
		if !moreDiags.HasErrors() {
			cv, err := v.convert(val)
			if err != nil {
				diags = append(diags, &hcl.Diagnostic{
					Severity: hcl.DiagError,
					Summary:  "Invalid default value for variable",
					Detail:   fmt.Sprintf("The default value of variable %q does not match its type: %s.", v.Name, convertErrText(err)),
					Subject:  attr.Expr.Range().Ptr(),
				})
				cv = cty.UnknownVal(v.Type)
			}
			v.Default = cv
		}
	}

	for _, b := range content.Blocks {
		val, moreDiags := decodeValidationBlock(v.Name, b)
		diags = append(diags, moreDiags...)
		if val != nil {
			v.Validations = append(v.Validations, val)
		}
	}
	return v, diags
}

func decodeValidationBlock(varName string, block *hcl.Block) (*VariableValidation, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	vv := &VariableValidation{DeclRange: block.DefRange}
	content, moreDiags := block.Body.Content(validationSchema)
	diags = append(diags, moreDiags...)

	if attr, ok := content.Attributes["condition"]; ok {
		vv.Condition = attr.Expr
		hasSelf := false
		for _, t := range attr.Expr.Variables() {
			ref, moreDiags := parseReference(t)
			diags = append(diags, moreDiags...)
			if ref == nil {
				continue
			}
			if ref.kind == "var" && ref.name == varName {
				hasSelf = true
				continue
			}
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Invalid reference in variable validation",
				Detail:   fmt.Sprintf("The condition for variable %q can refer only to var.%s, not to %s.", varName, varName, ref.addr),
				Subject:  t.SourceRange().Ptr(),
			})
		}
		if diags.HasErrors() {
			// Evaluating it would only repeat the errors in other words.
			vv.Condition = nil
		} else if !hasSelf {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Invalid variable validation condition",
				Detail:   fmt.Sprintf("The condition for variable %q must refer to var.%s in order to test incoming values.", varName, varName),
				Subject:  attr.Expr.Range().Ptr(),
			})
		}
	}
	if attr, ok := content.Attributes["error_message"]; ok {
		vv.ErrorMessage = attr.Expr
		for _, t := range attr.Expr.Variables() {
			ref, moreDiags := parseReference(t)
			diags = append(diags, moreDiags...)
			if ref != nil && !(ref.kind == "var" && ref.name == varName) {
				diags = append(diags, &hcl.Diagnostic{
					Severity: hcl.DiagError,
					Summary:  "Invalid reference in variable validation",
					Detail:   fmt.Sprintf("The error message for variable %q can refer only to var.%s, not to %s.", varName, varName, ref.addr),
					Subject:  t.SourceRange().Ptr(),
				})
			}
		}
		if len(attr.Expr.Variables()) == 0 {
			msg, moreDiags := attr.Expr.Value(nil)
			if !moreDiags.HasErrors() && msg.Type() == cty.String && msg.IsKnown() && !msg.IsNull() && msg.AsString() == "" {
				diags = append(diags, &hcl.Diagnostic{
					Severity: hcl.DiagError,
					Summary:  "Empty validation error message",
					Detail:   "The error_message must say what is wrong with the value, for the operator who gave it.",
					Subject:  attr.Expr.Range().Ptr(),
				})
			}
		}
	}
	return vv, diags
}

// convert converts a value given for the variable to its type, applying the
// defaults of optional object attributes.
func (v *Variable) convert(val cty.Value) (cty.Value, error) {
	if v.typeDefaults != nil && !val.IsNull() {
		val = v.typeDefaults.Apply(val)
	}
	return convert.Convert(val, v.Type)
}

// convertErrText is a conversion error as a clause: "a string is required".
func convertErrText(err error) string {
	if pe, ok := err.(cty.PathError); ok && len(pe.Path) > 0 {
		return fmt.Sprintf("%s: %s", pathString(pe.Path), pe.Error())
	}
	return err.Error()
}

// pathString renders a cty.Path as an attribute path: .a[0]["k"]
func pathString(p cty.Path) string {
	var s string
	for _, step := range p {
		switch st := step.(type) {
		case cty.GetAttrStep:
			s += "." + st.Name
		case cty.IndexStep:
			k := st.Key
			switch {
			case !k.IsKnown() || k.IsNull():
				s += "[...]"
			case k.Type() == cty.String:
				s += fmt.Sprintf("[%q]", k.AsString())
			case k.Type() == cty.Number:
				s += "[" + k.AsBigFloat().Text('f', -1) + "]"
			default:
				s += "[...]"
			}
		}
	}
	if s == "" {
		return "value"
	}
	if s[0] == '.' {
		return "attribute " + s[1:]
	}
	return "element " + s
}
