package lang

import (
	"github.com/hashicorp/hcl/v2"
)

// RuleRange is the range of the i-th rule of the allow list when it is
// written as a list literal (native or JSON syntax), so a diagnostic can
// point at that rule; the whole expression's range otherwise, and the
// block's when there is no allow attribute.
func (e *Egress) RuleRange(i int) hcl.Range {
	if e.Allow == nil {
		return e.DeclRange
	}
	if exprs, diags := hcl.ExprList(e.Allow); !diags.HasErrors() && i >= 0 && i < len(exprs) {
		return exprs[i].Range()
	}
	return e.Allow.Range()
}
