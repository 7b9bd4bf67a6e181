package lang

import (
	"github.com/hashicorp/hcl/v2"
)

// Output is an `output "NAME"` block: a value shown after apply and by
// `bottlefile output`.
type Output struct {
	Name        string
	Value       hcl.Expression
	Description string
	Sensitive   bool // the value is hidden in plan and apply output
	DeclRange   hcl.Range
}

// Addr is "output.NAME".
func (o *Output) Addr() string { return "output." + o.Name }

// References returns the addresses the output's value refers to,
// deduplicated and sorted.
func (o *Output) References() []string { return refAddrs(exprRefs(o.Value)) }

var outputSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "value", Required: true},
		{Name: "description"},
		{Name: "sensitive"},
	},
}

func decodeOutputBlock(block *hcl.Block) (*Output, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	o := &Output{Name: block.Labels[0], DeclRange: block.DefRange}
	diags = append(diags, checkName("output", o.Name, labelRange(block, 0))...)
	content, moreDiags := block.Body.Content(outputSchema)
	diags = append(diags, moreDiags...)
	if attr, ok := content.Attributes["value"]; ok {
		o.Value = attr.Expr
	}
	if attr, ok := content.Attributes["description"]; ok {
		s, moreDiags := staticString(attr)
		diags = append(diags, moreDiags...)
		o.Description = s
	}
	if attr, ok := content.Attributes["sensitive"]; ok {
		b, moreDiags := staticBool(attr)
		diags = append(diags, moreDiags...)
		o.Sensitive = b
	}
	return o, diags
}
