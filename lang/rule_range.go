package lang

import (
	"github.com/hashicorp/hcl/v2"
)

// EgressRuleRange is the range of the i-th rule of the egress block's allow
// list when it is written as a list literal (native or JSON syntax), so a
// diagnostic can point at that rule; the whole expression's range
// otherwise, and the block's when there is no allow attribute. False
// without an egress block.
func (w *Workload) EgressRuleRange(i int) (hcl.Range, bool) {
	b := w.block("egress")
	if b == nil {
		return hcl.Range{}, false
	}
	allow := w.expr("egress", "allow")
	if allow == nil {
		return b.DefRange, true
	}
	if exprs, diags := hcl.ExprList(allow); !diags.HasErrors() && i >= 0 && i < len(exprs) {
		return exprs[i].Range(), true
	}
	return allow.Range(), true
}
