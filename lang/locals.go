package lang

import (
	"github.com/hashicorp/hcl/v2"
)

// Local is one attribute of a `locals` block: a named expression.
type Local struct {
	Name      string
	Expr      hcl.Expression
	NameRange hcl.Range
	DeclRange hcl.Range // the whole `name = expr` attribute
}

// Addr is "local.NAME".
func (l *Local) Addr() string { return "local." + l.Name }

// References returns the addresses the local's expression refers to,
// deduplicated and sorted.
func (l *Local) References() []string { return refAddrs(exprRefs(l.Expr)) }

func decodeLocalsBlock(block *hcl.Block) ([]*Local, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	attrs, moreDiags := block.Body.JustAttributes()
	diags = append(diags, moreDiags...)
	var locals []*Local
	for _, name := range sortedKeys(attrs) {
		attr := attrs[name]
		diags = append(diags, checkName("local value", name, attr.NameRange)...)
		locals = append(locals, &Local{
			Name:      name,
			Expr:      attr.Expr,
			NameRange: attr.NameRange,
			DeclRange: attr.Range,
		})
	}
	return locals, diags
}
