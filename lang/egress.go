package lang

import (
	"errors"
	"fmt"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/bottlefile/bottlefile/egress"
)

// CheckEgressRule checks one egress allow rule with the egress package's
// parser, the one the drivers and the gateway use, so validate accepts
// exactly what runs. It returns a sentence saying what is wrong, or "".
func CheckEgressRule(rule string) string {
	if _, err := egress.ParseRule(rule); err != nil {
		return sentence(errors.Unwrap(err).Error())
	}
	return ""
}

// sentence makes a parser's error a sentence: a capital first letter and a
// closing period.
func sentence(msg string) string {
	if msg == "" {
		return msg
	}
	msg = strings.ToUpper(msg[:1]) + msg[1:]
	if !strings.HasSuffix(msg, ".") {
		msg += "."
	}
	return msg
}

// checkEgressRules checks every known rule of an allow list.
func checkEgressRules(v cty.Value, expr hcl.Expression) hcl.Diagnostics {
	var diags hcl.Diagnostics
	sensitive := IsSensitive(v)
	v = unmarkDeep(v)
	if !v.IsKnown() || v.IsNull() {
		return nil
	}
	ranges := elementRanges(expr, v.LengthInt())
	for i, e := range v.AsValueSlice() {
		if !e.IsKnown() || e.IsNull() {
			continue
		}
		if msg := CheckEgressRule(e.AsString()); msg != "" {
			// The parser's words may quote the rule.
			detail := "A sensitive egress rule is not valid; its value is not shown."
			if !sensitive {
				detail = fmt.Sprintf("%q is not a valid egress rule. %s", e.AsString(), msg)
			}
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Invalid egress rule",
				Detail:   detail,
				Subject:  ranges[i].Ptr(),
			})
		}
	}
	return diags
}
