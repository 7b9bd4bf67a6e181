package lang

import (
	"fmt"
	"path"
	"strings"

	"github.com/hashicorp/hcl/v2"
)

// evalWorkspace evaluates an agent's workspace: a list of absolute paths
// inside the workload, known when the plan is made (the plan says what is
// carried over). Each bad element is reported at its own range.
func (s *Scope) evalWorkspace(ctx *hcl.EvalContext, expr hcl.Expression) ([]string, hcl.Diagnostics) {
	v, diags := s.evalAttr(ctx, expr, "workspace", listOfString)
	if diags.HasErrors() {
		return nil, diags
	}
	v = unmarkDeep(v)
	if !v.IsWhollyKnown() {
		return nil, append(diags, s.mustBeKnown("workspace", expr)...)
	}
	if v.IsNull() {
		return nil, diags
	}
	ranges := elementRanges(expr, v.LengthInt())
	var out []string
	seen := map[string]bool{}
	i := -1
	for it := v.ElementIterator(); it.Next(); {
		i++
		_, e := it.Element()
		if e.IsNull() {
			diags = append(diags, workspaceDiag(ranges[i], "A workspace path cannot be null."))
			continue
		}
		p := e.AsString()
		switch clean := path.Clean(p); {
		case !strings.HasPrefix(p, "/"):
			diags = append(diags, workspaceDiag(ranges[i], fmt.Sprintf("%q is not an absolute path; a workspace path is a directory or file inside the workload, like \"/workspace\".", p)))
		case clean == "/":
			diags = append(diags, workspaceDiag(ranges[i], "The workspace cannot be the whole filesystem (\"/\"): name the directories that hold the agent's work, like \"/workspace\", so the new image's own files are used."))
		case clean != p && clean+"/" != p:
			diags = append(diags, workspaceDiag(ranges[i], fmt.Sprintf("%q is not a clean path; write %q.", p, clean)))
		case seen[clean]:
			diags = append(diags, workspaceDiag(ranges[i], fmt.Sprintf("%q is listed twice.", p)))
		default:
			seen[clean] = true
			out = append(out, clean)
		}
	}
	if diags.HasErrors() {
		return nil, diags
	}
	return out, diags
}

func workspaceDiag(subject hcl.Range, detail string) *hcl.Diagnostic {
	return &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  "Invalid workspace path",
		Detail:   detail,
		Subject:  subject.Ptr(),
	}
}
