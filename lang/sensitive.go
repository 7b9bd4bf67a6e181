package lang

import (
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
)

// valueMark is the type of the marks lang puts on cty values.
type valueMark string

// Sensitive marks a value that must never be shown: the value of a
// sensitive variable, and everything derived from one. Operations on marked
// values propagate the mark. Test with IsSensitive.
const Sensitive = valueMark("sensitive")

// IsSensitive reports whether v, or any value nested in it, carries the
// Sensitive mark.
func IsSensitive(v cty.Value) bool {
	return v.HasMarkDeep(Sensitive)
}

// Redacted is what a sensitive value is shown as.
const Redacted = "(sensitive value)"

// redactor hides sensitive strings that found their way into diagnostic
// text, such as a function's error quoting its argument.
type redactor struct {
	secrets []string        // the string leaves of sensitive values, longest first
	names   map[string]bool // quoted words that are never secrets: function and parameter names
}

// add remembers every string inside v, if v is sensitive.
func (r *redactor) add(v cty.Value) {
	if !IsSensitive(v) {
		return
	}
	v = unmarkDeep(v)
	_ = cty.Walk(v, func(_ cty.Path, x cty.Value) (bool, error) {
		if x.IsKnown() && !x.IsNull() && x.Type() == cty.String {
			s := x.AsString()
			if len(strings.TrimSpace(s)) >= 3 && !contains(r.secrets, s) {
				r.secrets = append(r.secrets, s)
				// Longest first, so that a secret containing another is
				// replaced whole.
				for i := len(r.secrets) - 1; i > 0 && len(r.secrets[i]) > len(r.secrets[i-1]); i-- {
					r.secrets[i], r.secrets[i-1] = r.secrets[i-1], r.secrets[i]
				}
			}
		}
		return true, nil
	})
}

// redact replaces known secrets in the diagnostics' text, and for a
// diagnostic about an expression that uses a sensitive value, the quoted
// strings in its detail, which may quote a value derived from a secret.
// It returns copies; the originals are not changed.
func (r *redactor) redact(diags hcl.Diagnostics) hcl.Diagnostics {
	if len(diags) == 0 {
		return diags
	}
	out := make(hcl.Diagnostics, len(diags))
	for i, d := range diags {
		c := *d
		for _, s := range r.secrets {
			c.Summary = strings.ReplaceAll(c.Summary, s, Redacted)
			c.Detail = strings.ReplaceAll(c.Detail, s, Redacted)
		}
		if usesSensitive(d) {
			c.Detail = redactQuoted(c.Detail, r.names)
		}
		out[i] = &c
	}
	return out
}

// usesSensitive reports whether a diagnostic's expression refers to a
// sensitive value in its evaluation context.
func usesSensitive(d *hcl.Diagnostic) bool {
	if d.Expression == nil || d.EvalContext == nil {
		return false
	}
	for _, t := range d.Expression.Variables() {
		v, diags := t.TraverseAbs(d.EvalContext)
		if !diags.HasErrors() && IsSensitive(v) {
			return true
		}
		// A reference that cannot be followed as a whole may still pass
		// through a sensitive value: check its root object.
		if root, ok := d.EvalContext.Variables[t.RootName()]; ok && diags.HasErrors() && IsSensitive(root) {
			return true
		}
	}
	return false
}

// redactQuoted replaces every double-quoted string in s but the names
// given.
func redactQuoted(s string, names map[string]bool) string {
	var b strings.Builder
	for {
		i := strings.IndexByte(s, '"')
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		j := i + 1
		for j < len(s) && s[j] != '"' {
			if s[j] == '\\' {
				j++
			}
			j++
		}
		if j >= len(s) {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:i])
		if names[s[i+1:j]] {
			b.WriteString(s[i : j+1])
		} else {
			b.WriteString(Redacted)
		}
		s = s[j+1:]
	}
}

// unmarkDeep removes every mark from v, without copying a value that has
// none.
func unmarkDeep(v cty.Value) cty.Value {
	if !v.ContainsMarked() {
		return v
	}
	v, _ = v.UnmarkDeep()
	return v
}
