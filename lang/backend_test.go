package lang

import (
	"strings"
	"testing"
	"testing/fstest"
)

// LoadBackend reads the backend block and the variables conn_str refers
// to, whatever else the configuration holds; conn_str's value comes from
// the variables (BOTTLEFILE_VAR_ here) and is never shown in diagnostics.
func TestLoadBackend(t *testing.T) {
	const withBackend = `
variable "pg" {
  type = string
}
backend "pg" {
  conn_str = var.pg
  name     = "team"
}
agent "broken" {
  image = 42 + "x"
  nonsense = true
}
`
	for _, tc := range []struct {
		name      string
		files     map[string]string
		env       map[string]string
		wantType  string // "" for no backend
		wantName  string
		wantConn  string
		wantError string
	}{
		{"from a variable", map[string]string{"proj/Bottlefile": withBackend}, map[string]string{"BOTTLEFILE_VAR_pg": "host=/tmp/s password=hunter2"}, "pg", "team", "host=/tmp/s password=hunter2", ""},
		{"variable without a value", map[string]string{"proj/Bottlefile": withBackend}, nil, "pg", "team", "", "No value for a variable the backend needs"},
		{"no conn_str", map[string]string{"proj/Bottlefile": `backend "pg" {}`}, nil, "pg", "", "", ""},
		{"no backend", map[string]string{"proj/Bottlefile": `agent "a" { image = "x" }`}, nil, "", "", "", ""},
		{"no configuration", map[string]string{"proj/README": "x"}, nil, "", "", "", ""},
		{"not pg", map[string]string{"proj/Bottlefile": `backend "s3" {}`}, nil, "", "", "", "Unsupported backend type"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fsys := fstest.MapFS{}
			for name, src := range tc.files {
				fsys[name] = &fstest.MapFile{Data: []byte(src)}
			}
			p := NewParserFS(fsys)
			cfg, diags := p.LoadBackend("proj")
			var conn string
			if !diags.HasErrors() {
				vals, moreDiags := p.VariableValues(cfg, VarInputs{Env: tc.env})
				diags = append(diags, moreDiags...)
				scope, moreDiags := cfg.NewPartialScope(vals)
				diags = append(diags, moreDiags...)
				if !diags.HasErrors() {
					conn, moreDiags = scope.EvalBackendConnStr(cfg.Backend)
					diags = append(diags, moreDiags...)
				}
			}
			rendered := renderDiags(p, diags)
			if tc.wantError == "" && diags.HasErrors() {
				t.Fatalf("unexpected diagnostics:\n%s", rendered)
			}
			if tc.wantError != "" && !strings.Contains(rendered, tc.wantError) {
				t.Fatalf("diagnostics do not say %q:\n%s", tc.wantError, rendered)
			}
			if strings.Contains(rendered, "hunter2") {
				t.Errorf("diagnostics show the connection string:\n%s", rendered)
			}
			if tc.wantError != "" {
				return
			}
			gotType, gotName := "", ""
			if cfg.Backend != nil {
				gotType, gotName = cfg.Backend.Type, cfg.Backend.Name
			}
			if gotType != tc.wantType || gotName != tc.wantName || conn != tc.wantConn {
				t.Errorf("backend %q name %q conn %q; want %q %q %q", gotType, gotName, conn, tc.wantType, tc.wantName, tc.wantConn)
			}
		})
	}
}

// A variable conn_str refers to is sensitive even when not declared so:
// the connection string may hold a password.
func TestBackendVariableIsSensitive(t *testing.T) {
	fsys := fstest.MapFS{"proj/Bottlefile": &fstest.MapFile{Data: []byte(`
variable "pg" {
  type    = string
  default = "host=db password=hunter2"
}
variable "role" {
  default = "x"
}
backend "pg" {
  conn_str = var.pg
}
output "conn" {
  value = var.pg
}
`)}}
	p := NewParserFS(fsys)
	cfg, diags := p.LoadDir("proj")
	if !diags.HasErrors() || !strings.Contains(diags.Error(), "Output refers to sensitive values") {
		t.Errorf("an output of the connection string: %v", diags)
	}
	if strings.Contains(renderDiags(p, diags), "hunter2") {
		t.Errorf("diagnostics show the connection string:\n%s", renderDiags(p, diags))
	}
	if !cfg.SensitiveVariable("pg") || cfg.SensitiveVariable("role") {
		t.Errorf("SensitiveVariable: pg %v, role %v; want true, false", cfg.SensitiveVariable("pg"), cfg.SensitiveVariable("role"))
	}
}
