package lang

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
)

// CheckEgressRule checks the form of one egress allow rule: host,
// host:port, *.suffix or *.suffix:port, where host is a DNS name or an IP
// address ([v6] with a port). It returns a sentence saying what is wrong,
// or "". The egress package owns the meaning of rules; this catches what
// cannot be one before anything runs.
func CheckEgressRule(rule string) string {
	if rule == "" {
		return "A rule cannot be empty."
	}
	if strings.Contains(rule, "://") {
		return "A rule is a host or host:port, not a URL; write \"github.com:443\" rather than \"https://github.com\"."
	}
	if strings.ContainsAny(rule, " \t\r\n/?#@") {
		return "A rule is a host or host:port; it cannot contain spaces, paths, queries or user names."
	}
	host, port := rule, ""
	if strings.HasPrefix(rule, "[") {
		end := strings.Index(rule, "]")
		if end < 0 {
			return "An IPv6 address in brackets needs its closing \"]\"."
		}
		host, port = rule[1:end], strings.TrimPrefix(rule[end+1:], ":")
		if rule[end+1:] != "" && !strings.HasPrefix(rule[end+1:], ":") {
			return "After an IPv6 address in brackets comes \":port\" or nothing."
		}
	} else if i := strings.LastIndex(rule, ":"); i >= 0 {
		if strings.Count(rule, ":") > 1 {
			return "Write an IPv6 address in brackets, like \"[2001:db8::1]:443\"."
		}
		host, port = rule[:i], rule[i+1:]
		if port == "" {
			return "A \":\" must be followed by a port number."
		}
	}
	if port != "" {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 {
			return fmt.Sprintf("%q is not a port; ports are numbers from 1 to 65535.", port)
		}
	}
	if strings.HasPrefix(rule, "[") {
		return ""
	}
	name := strings.TrimPrefix(host, "*.")
	if strings.Contains(name, "*") {
		return "A wildcard may only start a rule, as in \"*.example.com:443\"."
	}
	if name == "" {
		return "A rule needs a host name."
	}
	for _, label := range strings.Split(name, ".") {
		if label == "" {
			return fmt.Sprintf("%q is not a valid host name.", host)
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
				return fmt.Sprintf("%q is not a valid host name.", host)
			}
		}
	}
	return ""
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
			detail := msg
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
