package lang

import (
	"fmt"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
)

// BackendPG is the one backend type: the state in a PostgreSQL database.
const BackendPG = "pg"

// Backend is the `backend "pg"` block: the state kept in a PostgreSQL
// database, shared by every directory that names it, instead of in
// .bottlefile/state.db. At most one per configuration.
type Backend struct {
	Type string
	// ConnStr is the conn_str expression, which may refer to variables
	// only (the state is opened before anything else is evaluated); nil
	// when the block has none, and the connection comes from the
	// environment.
	ConnStr hcl.Expression
	// Name is the state's name in the database ("" for the default):
	// directories naming the same database and name share one state.
	Name string

	DeclRange hcl.Range
}

var backendKinds = []string{refVar}

// refersTo reports whether conn_str refers to variable name: its value
// is then treated as sensitive. b may be nil.
func (b *Backend) refersTo(name string) bool {
	if b == nil {
		return false
	}
	for _, ref := range exprRefs(b.ConnStr) {
		if ref.kind == refVar && ref.name == name {
			return true
		}
	}
	return false
}

var backendSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "conn_str"},
		{Name: "name"},
	},
}

func decodeBackendBlock(block *hcl.Block) (*Backend, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	b := &Backend{Type: block.Labels[0], DeclRange: block.DefRange}
	if b.Type != BackendPG {
		diags = append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Unsupported backend type",
			Detail:   fmt.Sprintf("There is no backend %q: the backends are %q (PostgreSQL). Without a backend block the state is the file .bottlefile/state.db.", b.Type, BackendPG),
			Subject:  labelRange(block, 0).Ptr(),
		})
		return nil, diags
	}
	content, moreDiags := block.Body.Content(backendSchema)
	diags = append(diags, moreDiags...)
	if attr, ok := content.Attributes["conn_str"]; ok {
		b.ConnStr = attr.Expr
	}
	if attr, ok := content.Attributes["name"]; ok {
		s, moreDiags := staticString(attr)
		diags = append(diags, moreDiags...)
		b.Name = s
		if !moreDiags.HasErrors() && !ValidName(s) {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Invalid backend state name",
				Detail:   fmt.Sprintf("%q is not a valid state name: a name starts with a letter and holds letters, digits, underscores and dashes.", s),
				Subject:  attr.Expr.Range().Ptr(),
			})
		}
	}
	return b, diags
}

// decodeBackend sets the configuration's backend, refusing a second.
func (c *Config) decodeBackend(block *hcl.Block) hcl.Diagnostics {
	b, diags := decodeBackendBlock(block)
	if b == nil {
		return diags
	}
	if c.Backend != nil {
		return append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Duplicate backend block",
			Detail:   fmt.Sprintf("A backend was already declared at %s. The state is kept in one place: a configuration has at most one backend block.", c.Backend.DeclRange),
			Subject:  block.DefRange.Ptr(),
		})
	}
	c.Backend = b
	return diags
}

// backendFileSchema is what LoadBackend reads of each file.
var backendFileSchema = &hcl.BodySchema{
	Blocks: []hcl.BlockHeaderSchema{
		{Type: "variable", LabelNames: []string{"name"}},
		{Type: "backend", LabelNames: []string{"type"}},
	},
}

// LoadBackend reads only what opening the state needs of a directory's
// configuration: its backend block and the variables conn_str may refer
// to. Commands that work on the state alone (state list, pull, push...)
// use it, so that they work whatever else the configuration holds. A
// directory without configuration files has no backend, and no error.
func (p *Parser) LoadBackend(dir string) (*Config, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	cfg := newConfig(dir, p.absDir(dir), p.fsys)
	names, err := p.configFileNames(dir)
	if err != nil {
		return cfg, hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Failed to read configuration directory",
			Detail:   fmt.Sprintf("Cannot read the directory %q: %s.", dir, errText(err)),
		}}
	}
	for _, name := range names {
		f, moreDiags := p.parseFile(p.join(dir, name))
		diags = append(diags, moreDiags...)
		if f == nil || moreDiags.HasErrors() {
			continue
		}
		content, _, moreDiags := f.Body.PartialContent(backendFileSchema)
		diags = append(diags, moreDiags...)
		for _, block := range content.Blocks {
			switch block.Type {
			case "variable":
				if v, moreDiags := decodeVariableBlock(block); v != nil && !moreDiags.HasErrors() {
					cfg.Variables[v.Name] = v
				}
			case "backend":
				diags = append(diags, cfg.decodeBackend(block)...)
			}
		}
	}
	if cfg.Backend != nil {
		diags = append(diags, cfg.checkRefs("in a backend block (it may refer to variables only)", backendKinds, cfg.Backend.ConnStr)...)
	}
	return cfg, diags
}

// EvalBackendConnStr is the backend's conn_str: "" when the block has
// none. It is sensitive whatever the variable it comes from says (it may
// hold a password), so diagnostics never show it; a variable without a
// value is an error naming how to give one.
func (s *Scope) EvalBackendConnStr(b *Backend) (string, hcl.Diagnostics) {
	if b == nil || b.ConnStr == nil {
		return "", nil
	}
	if s.cfg.invalid[b.ConnStr.Range()] {
		return "", hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Invalid backend conn_str", Subject: b.ConnStr.Range().Ptr()}}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ctx, diags := s.evalContext(exprRefs(b.ConnStr), nil)
	v, moreDiags := s.evalAttr(ctx, b.ConnStr, "conn_str", cty.String)
	diags = append(diags, moreDiags...)
	if diags.HasErrors() {
		return "", s.redact.redact(diags)
	}
	v, _ = v.UnmarkDeep()
	if !v.IsKnown() {
		names := make([]string, len(s.unset))
		for i, n := range s.unset {
			names[i] = "var." + n
		}
		return "", hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "No value for a variable the backend needs",
			Detail: fmt.Sprintf("The backend's conn_str comes from a variable that was given no value (%s); the state cannot be opened without it. Give it with the environment variable %sNAME (or -var / -var-file where the command takes them), or leave conn_str out to take the connection from BOTTLEFILE_PG_CONN_STR or the PG* environment.",
				strings.Join(names, ", "), EnvVarPrefix),
			Subject: b.ConnStr.Range().Ptr(),
		}}
	}
	if v.IsNull() {
		return "", nil
	}
	s.redact.add(v.Mark(Sensitive))
	return v.AsString(), nil
}

// SensitiveVariable reports whether variable name's value is sensitive:
// declared so, or the backend's conn_str refers to it.
func (c *Config) SensitiveVariable(name string) bool {
	v, ok := c.Variables[name]
	return ok && (v.Sensitive || c.Backend.refersTo(name))
}
