package lang

import (
	"strings"
	"testing"
	"testing/fstest"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
)

const credentialSrc = `
variable "key" {
  type      = string
  sensitive = true
}
agent "coder" {
  image = "alpine:3"
  egress {
    allow = ["API.example.com:443"]
    credential "api" {
      host   = "API.example.com"
      header = "Authorization"
      prefix = "Bearer "
      value  = var.key
      env    = "API_KEY"
    }
  }
}
`

// TestCredentialValue: the evaluated credential is canonical (host and
// header lower case, port 443) and its value sensitive.
func TestCredentialValue(t *testing.T) {
	_, cfg := load(t, map[string]string{"proj/Bottlefile": credentialSrc})
	s, diags := cfg.NewScope(map[string]cty.Value{"key": cty.StringVal("sk-123456")})
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	av, diags := s.EvalAgent(cfg.Agents["coder"])
	if len(diags) > 0 {
		t.Fatal(diags.Error())
	}
	creds := av.Workload.GetAttr("credentials")
	if creds.LengthInt() != 1 {
		t.Fatalf("credentials %#v", creds)
	}
	c := creds.Index(cty.NumberIntVal(0))
	if !IsSensitive(c.GetAttr("value")) {
		t.Errorf("the value is not sensitive")
	}
	for attr, want := range map[string]cty.Value{"name": cty.StringVal("api"), "host": cty.StringVal("api.example.com"), "port": cty.NumberIntVal(443),
		"header": cty.StringVal("authorization"), "prefix": cty.StringVal("Bearer "), "env": cty.StringVal("API_KEY")} {
		if got := c.GetAttr(attr); !got.RawEquals(want) {
			t.Errorf("%s = %#v, want %#v", attr, got, want)
		}
	}
	if IsSensitive(c.GetAttr("host")) || IsSensitive(c.GetAttr("env")) {
		t.Errorf("where a credential goes is marked sensitive")
	}
}

// TestCredentialLiteralWarns: a value that is not from a sensitive
// variable is a warning on it, and still sensitive from there on.
func TestCredentialLiteralWarns(t *testing.T) {
	src := strings.Replace(credentialSrc, "value  = var.key", `value  = "sk-literal-123"`, 1)
	p := NewParserFS(fstest.MapFS{"proj/Bottlefile": &fstest.MapFile{Data: []byte(src)}})
	cfg, diags := p.LoadDir("proj")
	if diags.HasErrors() || len(diags) != 1 || diags[0].Severity != hcl.DiagWarning || diags[0].Summary != "Credential value not from a sensitive variable" {
		t.Fatalf("diagnostics: %s", renderDiags(p, diags))
	}
	if strings.Contains(diags[0].Detail, "sk-literal-123") {
		t.Errorf("the warning quotes the value")
	}
	s, _ := cfg.NewScope(map[string]cty.Value{"key": cty.StringVal("x")})
	av, _ := s.EvalAgent(cfg.Agents["coder"])
	if !IsSensitive(av.Workload.GetAttr("credentials").Index(cty.NumberIntVal(0)).GetAttr("value")) {
		t.Errorf("a literal value is not made sensitive")
	}
}
