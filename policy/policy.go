package policy

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"

	"github.com/bottlefile/bottlefile/egress"
)

// EnvVar names the policy file, ahead of every other place.
const EnvVar = "BOTTLEFILE_POLICY"

// SystemPath is where an operator puts the policy of every user of the
// machine.
const SystemPath = "/etc/bottlefile/policy.hcl"

// Policy is the operator's egress policy.
type Policy struct {
	// Source is the file the policy was read from.
	Source string
	// Ceiling bounds every agent's and sidecar's egress rules on every
	// runtime, and every runtime's own egress_ceiling: a rule it does not
	// cover (egress.Covered) is refused. nil when the file sets no
	// egress_ceiling; empty when it allows nothing.
	Ceiling []egress.Rule
	// Ranges are the ceiling rules' places in the file, for messages.
	Ranges []hcl.Range
}

// HasCeiling reports whether the policy bounds egress at all.
func (p *Policy) HasCeiling() bool { return p != nil && p.Ceiling != nil }

// CeilingStrings is the ceiling in canonical form; nil without one.
func (p *Policy) CeilingStrings() []string {
	if !p.HasCeiling() {
		return nil
	}
	out := make([]string, len(p.Ceiling))
	for i, r := range p.Ceiling {
		out[i] = r.String()
	}
	return out
}

// Locate finds the policy file: the path $BOTTLEFILE_POLICY names (which
// must exist: a policy the operator names and bottlefile misses would
// leave every runtime unbounded), else the first of the user's config
// directory and SystemPath that exists. It returns "" when there is none.
// getenv and stat are os.Getenv and os.Stat outside tests.
func Locate(getenv func(string) string, stat func(string) (fs.FileInfo, error)) (string, error) {
	if p := getenv(EnvVar); p != "" {
		if _, err := stat(p); err != nil {
			return "", fmt.Errorf("the egress policy %s=%s cannot be read: %w", EnvVar, p, errors.Unwrap(err))
		}
		return p, nil
	}
	for _, c := range SearchPath(getenv) {
		_, err := stat(c)
		if err == nil {
			return c, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			// There, but unreadable: never silently skipped for a wider one.
			return "", fmt.Errorf("the egress policy %s cannot be read: %w", c, errors.Unwrap(err))
		}
	}
	return "", nil
}

// SearchPath is where Locate looks, in order, when $BOTTLEFILE_POLICY is
// not set: the user's config directory, then SystemPath.
func SearchPath(getenv func(string) string) []string {
	var candidates []string
	if dir := getenv("XDG_CONFIG_HOME"); dir != "" && filepath.IsAbs(dir) {
		candidates = append(candidates, filepath.Join(dir, "bottlefile", "policy.hcl"))
	} else if home := getenv("HOME"); home != "" {
		candidates = append(candidates, filepath.Join(home, ".config", "bottlefile", "policy.hcl"))
	}
	return append(candidates, SystemPath)
}

// Load finds (Locate) and reads the policy of this process's environment:
// nil, with no diagnostics, when there is none.
func Load() (*Policy, hcl.Diagnostics) {
	path, err := Locate(os.Getenv, os.Stat)
	if err != nil {
		return nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Cannot read the egress policy", Detail: err.Error() + "."}}
	}
	if path == "" {
		return nil, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Cannot read the egress policy", Detail: fmt.Sprintf("The egress policy %s cannot be read: %v.", path, err)}}
	}
	return Parse(path, data)
}

// Parse reads a policy file's content; path names it in messages and
// decides the syntax (JSON for .json, HCL otherwise). Every diagnostic
// has a subject in the file.
func Parse(path string, data []byte) (*Policy, hcl.Diagnostics) {
	p := hclparse.NewParser()
	var f *hcl.File
	var diags hcl.Diagnostics
	if strings.HasSuffix(path, ".json") {
		f, diags = p.ParseJSON(data, path)
	} else {
		f, diags = p.ParseHCL(data, path)
	}
	if diags.HasErrors() {
		return nil, name(diags, path)
	}
	content, moreDiags := f.Body.Content(&hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "egress_ceiling"}}})
	diags = append(diags, moreDiags...)
	if diags.HasErrors() {
		return nil, name(diags, path)
	}
	pol := &Policy{Source: path}
	attr, ok := content.Attributes["egress_ceiling"]
	if !ok {
		return pol, name(diags, path)
	}
	v, moreDiags := attr.Expr.Value(nil)
	diags = append(diags, moreDiags...)
	if moreDiags.HasErrors() {
		return nil, name(diags, path)
	}
	bad := func(detail string, subject hcl.Range) (*Policy, hcl.Diagnostics) {
		return nil, name(append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid egress policy", Detail: detail, Subject: subject.Ptr()}), path)
	}
	if v.IsNull() {
		return pol, name(diags, path)
	}
	list, err := convert.Convert(v, cty.List(cty.String))
	if err != nil || !list.IsWhollyKnown() {
		return bad("egress_ceiling must be a list of egress rules, such as [\"api.anthropic.com:443\", \"*.github.com:443\"].", attr.Expr.Range())
	}
	ranges := elementRanges(attr.Expr, list.LengthInt())
	pol.Ceiling = []egress.Rule{}
	seen := map[egress.Rule]bool{}
	for i, e := range list.AsValueSlice() {
		if e.IsNull() {
			return bad("An egress rule of egress_ceiling is null.", ranges[i])
		}
		r, err := egress.ParseRule(e.AsString())
		if err != nil {
			return bad(err.Error()+".", ranges[i])
		}
		if !seen[r] {
			seen[r] = true
			pol.Ceiling = append(pol.Ceiling, r)
			pol.Ranges = append(pol.Ranges, ranges[i])
		}
	}
	if diags.HasErrors() {
		return nil, name(diags, path)
	}
	return pol, diags
}

// name makes each diagnostic say which file it is about: a policy is not
// part of the configuration, and its snippet alone would not say so.
func name(diags hcl.Diagnostics, path string) hcl.Diagnostics {
	for _, d := range diags {
		if d.Subject == nil {
			d.Subject = &hcl.Range{Filename: path}
		}
		if !strings.Contains(d.Detail, path) {
			d.Detail = strings.TrimSpace(d.Detail + " (in the egress policy " + path + ")")
		}
	}
	return diags
}

func elementRanges(expr hcl.Expression, n int) []hcl.Range {
	ranges := make([]hcl.Range, n)
	exprs, diags := hcl.ExprList(expr)
	for i := range ranges {
		ranges[i] = expr.Range()
		if !diags.HasErrors() && len(exprs) == n {
			ranges[i] = exprs[i].Range()
		}
	}
	return ranges
}

// Uncovered is the rules of rules the policy's ceiling does not cover
// (egress.Covered), in order: nil without a ceiling.
func (p *Policy) Uncovered(rules []egress.Rule) []egress.Rule {
	if !p.HasCeiling() {
		return nil
	}
	return egress.Uncovered(p.Ceiling, rules)
}
