package lang

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hcldec"
	"github.com/zclconf/go-cty/cty"
)

// load loads a configuration from an in-memory filesystem, failing the test
// on any diagnostic.
func load(t *testing.T, files map[string]string) (*Parser, *Config) {
	t.Helper()
	fsys := fstest.MapFS{}
	for name, src := range files {
		fsys[name] = &fstest.MapFile{Data: []byte(src)}
	}
	p := NewParserFS(fsys)
	cfg, diags := p.LoadDir("proj")
	if len(diags) > 0 {
		t.Fatalf("LoadDir: %s", renderDiags(p, diags))
	}
	return p, cfg
}

func renderDiags(p *Parser, diags hcl.Diagnostics) string {
	var buf bytes.Buffer
	_ = WriteDiagnostics(&buf, p.Files(), diags, 0, false)
	return buf.String()
}

func TestLoadDirFS(t *testing.T) {
	_, cfg := load(t, map[string]string{
		"proj/Bottlefile": `
agent "coder" {
  image      = "alpine:3"
  depends_on = [agent.db]
}
`,
		"proj/db.bottle.hcl": `
agent "db" {
  build {
    context = "db"
  }
}
`,
		"proj/more.bottle.json": `{"agent": {"api": {"image": "acme/api:1"}}}`,
		"proj/ignored.hcl":      `this is not read`,
		"proj/sub/Bottlefile":   `neither is this`,
	})
	if cfg.Dir != "proj" {
		t.Errorf("Dir = %q", cfg.Dir)
	}
	if diff := cmp.Diff([]string{"api", "coder", "db"}, cfg.AgentNames()); diff != "" {
		t.Errorf("AgentNames (-want +got):\n%s", diff)
	}
	rt := cfg.Runtimes["default"]
	if rt == nil || rt.Driver != "docker" || !rt.Implicit || rt.Config == nil {
		t.Errorf("implicit runtime = %+v", rt)
	}
	coder := cfg.Agents["coder"]
	if coder.Addr() != "agent.coder" || coder.RuntimeName != "default" || !coder.Has("image") || coder.Has("build") {
		t.Errorf("coder = %+v", coder)
	}
	if len(coder.DependsOn) != 1 || traversalString(coder.DependsOn[0]) != "agent.db" {
		t.Errorf("DependsOn = %v", coder.DependsOn)
	}
	if db := cfg.Agents["db"]; !db.Has("build") || db.Has("image") || db.expr("build", "context") == nil || db.expr("build", "dockerfile") != nil {
		t.Errorf("db = %+v", db)
	}
	if got := coder.DeclRange.Filename; got != "proj/Bottlefile" {
		t.Errorf("DeclRange.Filename = %q", got)
	}
}

func TestLoadDirDeclaredRuntimeReplacesImplicit(t *testing.T) {
	_, cfg := load(t, map[string]string{"proj/Bottlefile": `
runtime "vm" {
  driver = "smolvm"
  cpus   = 2
}
agent "a" {
  runtime = runtime.vm
  image   = "alpine:3"
}
`})
	if _, ok := cfg.Runtimes["default"]; ok {
		t.Error("implicit default runtime present beside a declared one")
	}
	vm := cfg.Runtimes["vm"]
	if vm.Driver != "smolvm" || vm.Implicit {
		t.Errorf("vm = %+v", vm)
	}
	attrs, diags := vm.Config.JustAttributes()
	if diags.HasErrors() || len(attrs) != 1 || attrs["cpus"] == nil {
		t.Errorf("runtime Config attributes = %v, %v", attrs, diags)
	}
	if a := cfg.Agents["a"]; a.RuntimeName != "vm" || a.RuntimeRange.Start.Line != 7 {
		t.Errorf("agent runtime = %q at %v", a.RuntimeName, a.RuntimeRange)
	}
}

func TestEvalAgent(t *testing.T) {
	_, cfg := load(t, map[string]string{
		"proj/Bottlefile": `
variable "cmd" {
  type    = list(string)
  default = ["claude", "--yes"]
}
locals {
  hosts = ["api.anthropic.com:443"]
}
agent "coder" {
  image      = "ghcr.io/acme/agent:1.4"
  command    = var.cmd
  entrypoint = ["/init"]
  env        = { A = 1, B = "two" }
  workdir    = "/workspace"
  user       = "1000"
  cpus       = 1.5
  memory     = "512MiB"
  labels     = { team = "x" }
  resume     = false
  egress {
    allow = concat(local.hosts, ["github.com:443"])
  }
  sidecar "db" {
    build {
      context    = "db"
      dockerfile = "Dockerfile.db"
    }
    memory = 1048576
  }
  snapshot_policy {
    before    = ["destroy", "replace", "destroy"]
    keep_last = 2
    max_age   = "2d"
  }
}
agent "bare" {
  image = "alpine:3"
}
`})
	s, diags := cfg.NewScope(nil)
	if len(diags) > 0 {
		t.Fatal(diags)
	}
	av, diags := s.EvalAgent(cfg.Agents["coder"])
	if len(diags) > 0 {
		t.Fatal(diags)
	}
	want := map[string]cty.Value{
		"image":      cty.StringVal("ghcr.io/acme/agent:1.4"),
		"command":    cty.ListVal([]cty.Value{cty.StringVal("claude"), cty.StringVal("--yes")}),
		"entrypoint": cty.ListVal([]cty.Value{cty.StringVal("/init")}),
		"env":        cty.MapVal(map[string]cty.Value{"A": cty.StringVal("1"), "B": cty.StringVal("two")}),
		"workdir":    cty.StringVal("/workspace"),
		"user":       cty.StringVal("1000"),
		"cpus":       cty.NumberFloatVal(1.5),
		"memory":     cty.NumberIntVal(512 << 20),
		"labels":     cty.MapVal(map[string]cty.Value{"team": cty.StringVal("x")}),
		"egress":     cty.ListVal([]cty.Value{cty.StringVal("api.anthropic.com:443"), cty.StringVal("github.com:443")}),
	}
	got := map[string]cty.Value{
		"image": av.Workload.GetAttr("image"), "command": av.Workload.GetAttr("command"), "entrypoint": av.Workload.GetAttr("entrypoint"), "env": av.Workload.GetAttr("env"), "workdir": av.Workload.GetAttr("workdir"),
		"user": av.Workload.GetAttr("user"), "cpus": av.Workload.GetAttr("cpus"), "memory": av.Workload.GetAttr("memory"), "labels": av.Workload.GetAttr("labels"), "egress": av.Workload.GetAttr("egress"),
	}
	for k, w := range want {
		if !got[k].RawEquals(w) {
			t.Errorf("%s = %#v, want %#v", k, got[k], w)
		}
	}
	if av.Resume {
		t.Error("Resume = true, want false")
	}
	if diff := cmp.Diff(&SnapshotPolicyValue{Before: []string{"destroy", "replace"}, KeepLast: 2, MaxAge: 48 * time.Hour}, av.SnapshotPolicy); diff != "" {
		t.Errorf("SnapshotPolicy (-want +got):\n%s", diff)
	}
	if len(av.Sidecars) != 1 || av.Sidecars[0].Name != "db" {
		t.Fatalf("Sidecars = %+v", av.Sidecars)
	}
	sc := av.Sidecars[0]
	if want := buildVal("proj/db", "Dockerfile.db"); !sc.Workload.GetAttr("build").RawEquals(want) {
		t.Errorf("sidecar build = %#v, want %#v", sc.Workload.GetAttr("build"), want)
	}
	if !sc.Workload.GetAttr("memory").RawEquals(cty.NumberIntVal(1<<20)) || !sc.Workload.GetAttr("image").RawEquals(cty.NullVal(cty.String)) || !sc.Workload.GetAttr("egress").IsNull() {
		t.Errorf("sidecar = %+v", sc)
	}

	bare, diags := s.EvalAgent(cfg.Agents["bare"])
	if len(diags) > 0 {
		t.Fatal(diags)
	}
	nulls := map[string]struct {
		v  cty.Value
		ty cty.Type
	}{
		"command": {bare.Workload.GetAttr("command"), cty.List(cty.String)}, "env": {bare.Workload.GetAttr("env"), cty.Map(cty.String)},
		"cpus": {bare.Workload.GetAttr("cpus"), cty.Number}, "memory": {bare.Workload.GetAttr("memory"), cty.Number}, "egress": {bare.Workload.GetAttr("egress"), cty.List(cty.String)},
		"workdir": {bare.Workload.GetAttr("workdir"), cty.String}, "labels": {bare.Workload.GetAttr("labels"), cty.Map(cty.String)},
	}
	for k, n := range nulls {
		if !n.v.RawEquals(cty.NullVal(n.ty)) {
			t.Errorf("bare %s = %#v, want null %s", k, n.v, n.ty.FriendlyName())
		}
	}
	if !bare.Resume || !bare.Workload.GetAttr("build").IsNull() || bare.SnapshotPolicy != nil || bare.Sidecars != nil {
		t.Errorf("bare = %+v", bare)
	}
}

func TestBuildContextIsAbsolute(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "Bottlefile"), `
agent "rel" {
  build {
    context = "./agent"
  }
}
agent "abs" {
  build {
    context = "/srv/ctx"
  }
}
`)
	p := NewParser()
	cfg, diags := p.LoadDir(dir)
	if len(diags) > 0 {
		t.Fatal(renderDiags(p, diags))
	}
	s, _ := cfg.NewScope(nil)
	rel, _ := s.EvalAgent(cfg.Agents["rel"])
	abs, _ := s.EvalAgent(cfg.Agents["abs"])
	if want := buildVal(filepath.Join(dir, "agent"), "Dockerfile"); !rel.Workload.GetAttr("build").RawEquals(want) {
		t.Errorf("rel build = %#v, want %#v", rel.Workload.GetAttr("build"), want)
	}
	if want := buildVal("/srv/ctx", "Dockerfile"); !abs.Workload.GetAttr("build").RawEquals(want) {
		t.Errorf("abs build = %#v", abs.Workload.GetAttr("build"))
	}
}

func TestSetAgent(t *testing.T) {
	_, cfg := load(t, map[string]string{"proj/Bottlefile": `
locals {
  db_url = "postgres://${agent.db.name}:5432"
}
agent "db" {
  image = "postgres:16"
  sidecar "backup" {
    image = "acme/backup:1"
  }
}
agent "app" {
  image = "acme/app:1"
  env   = { DB = local.db_url, DB_ID = agent.db.id, BACKUP = agent.db.sidecar.backup.id }
}
`})
	s, diags := cfg.NewScope(nil)
	if len(diags) > 0 {
		t.Fatal(diags)
	}
	app := cfg.Agents["app"]
	av, diags := s.EvalAgent(app)
	if len(diags) > 0 {
		t.Fatal(diags)
	}
	if av.Workload.GetAttr("env").IsWhollyKnown() {
		t.Errorf("env before the db exists = %#v, want unknown parts", av.Workload.GetAttr("env"))
	}

	s.SetAgent("db", cty.ObjectVal(map[string]cty.Value{
		"id":   cty.StringVal("c0ffee"),
		"name": cty.StringVal("bf-db"),
		"sidecar": cty.ObjectVal(map[string]cty.Value{
			"backup": cty.ObjectVal(map[string]cty.Value{"id": cty.StringVal("b4ck")}),
		}),
	}))
	av, diags = s.EvalAgent(app)
	if len(diags) > 0 {
		t.Fatal(diags)
	}
	want := cty.MapVal(map[string]cty.Value{
		"DB":     cty.StringVal("postgres://bf-db:5432"),
		"DB_ID":  cty.StringVal("c0ffee"),
		"BACKUP": cty.StringVal("b4ck"),
	})
	if !av.Workload.GetAttr("env").RawEquals(want) {
		t.Errorf("env = %#v, want %#v", av.Workload.GetAttr("env"), want)
	}
}

func TestReferences(t *testing.T) {
	_, cfg := load(t, map[string]string{"proj/Bottlefile": `
variable "image" {
  default = "alpine:3"
}
variable "unused" {
  default = 1
}
locals {
  hosts = ["a.example.com:443"]
}
runtime "vm" {
  driver = "smolvm"
  image  = var.image
}
agent "db" {
  runtime = runtime.vm
  image   = "postgres:16"
}
agent "coder" {
  runtime       = runtime.vm
  image         = var.image
  env           = { DB = agent.db.id, SEED = snapshot.seed.image }
  depends_on    = [agent.db]
  from_snapshot = snapshot.mine
  egress {
    allow = local.hosts
  }
  sidecar "s" {
    image = var.image
    env   = { X = local.hosts[0] }
  }
}
snapshot "seed" {
  agent    = agent.db
  triggers = { image = var.image }
}
snapshot "mine" {
  agent = agent.coder
}
output "o" {
  value = [agent.coder.id, local.hosts]
}
`})
	tests := []struct {
		name string
		got  []string
		want []string
	}{
		{"agent.coder", cfg.Agents["coder"].References(), []string{"agent.db", "local.hosts", "runtime.vm", "snapshot.seed", "var.image"}},
		{"agent.db", cfg.Agents["db"].References(), []string{"runtime.vm"}},
		{"snapshot.seed", cfg.Snapshots["seed"].References(), []string{"agent.db", "var.image"}},
		{"snapshot.mine", cfg.Snapshots["mine"].References(), []string{"agent.coder"}},
		{"output.o", cfg.Outputs["o"].References(), []string{"agent.coder", "local.hosts"}},
		{"local.hosts", cfg.Locals["hosts"].References(), nil},
		{"runtime.vm", cfg.Runtimes["vm"].References(), []string{"var.image"}},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, tt.got); diff != "" {
			t.Errorf("%s References (-want +got):\n%s", tt.name, diff)
		}
	}
	if got := cfg.Agents["coder"].FromSnapshot; got != "snapshot.mine" {
		t.Errorf("FromSnapshot = %q", got)
	}
}

func TestCheckCyclesNamesEveryMember(t *testing.T) {
	fsys := fstest.MapFS{"proj/Bottlefile": {Data: []byte(`
locals {
  x = agent.c.id
}
agent "a" {
  image = "alpine:3"
  env   = { B = agent.b.id }
}
agent "b" {
  image = local.x
}
agent "c" {
  image      = "alpine:3"
  depends_on = [agent.a]
}
agent "d" {
  image      = "alpine:3"
  depends_on = [agent.d]
}
`)}}
	p := NewParserFS(fsys)
	_, diags := p.LoadDir("proj")
	if len(diags) != 2 {
		t.Fatalf("want 2 cycle errors, got:\n%s", renderDiags(p, diags))
	}
	first := diags[0].Detail
	for _, member := range []string{"agent.a", "agent.b", "agent.c", "local.x"} {
		if !strings.Contains(first, member) {
			t.Errorf("cycle detail %q does not name %s", first, member)
		}
	}
	if !strings.Contains(first, "agent.a → agent.b → local.x → agent.c → agent.a") {
		t.Errorf("cycle detail %q lacks the path", first)
	}
	if !strings.Contains(diags[1].Detail, "agent.d refers to itself") {
		t.Errorf("second cycle = %q", diags[1].Detail)
	}
}

func TestFunctionsFileAndTemplate(t *testing.T) {
	_, cfg := load(t, map[string]string{
		"proj/Bottlefile": `
agent "a" {
  image = "alpine:3"
  env = {
    PROMPT = file("prompt.txt")
    CONFIG = templatefile("tmpl/config.tpl", { name = "x", hosts = ["h1", "h2"] })
    HAS    = fileexists("prompt.txt") ? "yes" : "no"
    HASNOT = fileexists("nope.txt") ? "yes" : "no"
    LEN    = length("héllo")
  }
}
`,
		"proj/prompt.txt":      "be careful\n",
		"proj/tmpl/config.tpl": "name=${name}\n%{ for h in hosts }${h};%{ endfor }",
	})
	s, _ := cfg.NewScope(nil)
	av, diags := s.EvalAgent(cfg.Agents["a"])
	if len(diags) > 0 {
		t.Fatal(diags)
	}
	want := cty.MapVal(map[string]cty.Value{
		"PROMPT": cty.StringVal("be careful\n"),
		"CONFIG": cty.StringVal("name=x\nh1;h2;"),
		"HAS":    cty.StringVal("yes"),
		"HASNOT": cty.StringVal("no"),
		"LEN":    cty.StringVal("5"),
	})
	if !av.Workload.GetAttr("env").RawEquals(want) {
		t.Errorf("env = %#v", av.Workload.GetAttr("env"))
	}
}

func TestNoEnvironmentFunctions(t *testing.T) {
	funcs := functions("/", nil)
	for _, name := range []string{"env", "timestamp", "uuid", "abspath"} {
		if _, ok := funcs[name]; ok {
			t.Errorf("function %s should not exist", name)
		}
	}
	for _, name := range []string{"concat", "merge", "format", "lower", "jsonencode", "csvdecode", "file", "templatefile", "max", "setunion"} {
		if _, ok := funcs[name]; !ok {
			t.Errorf("function %s missing", name)
		}
	}
}

func TestVariableValuesPrecedence(t *testing.T) {
	p, cfg := load(t, map[string]string{
		"proj/Bottlefile": `
variable "a" {
  type    = string
  default = "default"
}
variable "b" {
  type    = string
  default = "default"
}
variable "c" {
  type    = string
  default = "default"
}
variable "d" {
  type    = string
  default = "default"
}
variable "n" {
  type    = number
  default = 0
}
variable "hosts" {
  type    = list(string)
  default = []
}
variable "any" {
  type    = any
  default = null
}
agent "x" {
  image = "alpine:3"
}
`,
		"proj/one.tfvars":  "a = \"file1\"\nb = \"file1\"\n",
		"proj/two.json":    `{"a": "file2"}`,
		"proj/unused.json": `{}`,
	})
	vals, diags := p.VariableValues(cfg, VarInputs{
		Vars:     []string{"a=cli1", "a=cli2", "n=42", `hosts=["x.example.com:443", "y"]`, `any={k = 1}`},
		VarFiles: []string{"proj/one.tfvars", "proj/two.json"},
		Env: map[string]string{
			"BOTTLEFILE_VAR_a":       "env",
			"BOTTLEFILE_VAR_b":       "env",
			"BOTTLEFILE_VAR_c":       "env",
			"BOTTLEFILE_VAR_nothere": "ignored",
			"PATH":                   "/bin",
		},
	})
	if len(diags) > 0 {
		t.Fatal(renderDiags(p, diags))
	}
	s, diags := cfg.NewScope(vals)
	if len(diags) > 0 {
		t.Fatal(diags)
	}
	want := map[string]cty.Value{
		"a":     cty.StringVal("cli2"),
		"b":     cty.StringVal("file1"),
		"c":     cty.StringVal("env"),
		"d":     cty.StringVal("default"),
		"n":     cty.NumberIntVal(42),
		"hosts": cty.ListVal([]cty.Value{cty.StringVal("x.example.com:443"), cty.StringVal("y")}),
		"any":   cty.ObjectVal(map[string]cty.Value{"k": cty.NumberIntVal(1)}),
	}
	got := s.Variables()
	for k, w := range want {
		if !got[k].RawEquals(w) {
			t.Errorf("var.%s = %#v, want %#v", k, got[k], w)
		}
	}
}

func TestVariableErrors(t *testing.T) {
	files := map[string]string{
		"proj/Bottlefile": `
variable "required" {
  type = string
}
variable "port" {
  type    = number
  default = 80
  validation {
    condition     = var.port > 0 && var.port < 65536
    error_message = "The port must be from 1 to 65535."
  }
}
variable "hosts" {
  type    = list(string)
  default = []
}
agent "x" {
  image = var.required
}
`,
		"proj/bad.json": `{"nope": 1}`,
	}
	p, cfg := load(t, files)
	tests := []struct {
		name    string
		in      VarInputs
		summary []string
	}{
		{"undeclared -var", VarInputs{Vars: []string{"required=x", "nope=1"}}, []string{"Value for undeclared variable"}},
		{"undeclared in file", VarInputs{Vars: []string{"required=x"}, VarFiles: []string{"proj/bad.json"}}, []string{"Value for undeclared variable"}},
		{"malformed -var", VarInputs{Vars: []string{"required"}}, []string{"Invalid -var option"}},
		{"wrong type", VarInputs{Vars: []string{"required=x", "port=eighty"}}, []string{"Invalid value for input variable"}},
		{"bad HCL for list", VarInputs{Vars: []string{"required=x", "hosts=[a"}}, []string{"Unterminated tuple constructor expression"}},
		{"missing file", VarInputs{VarFiles: []string{"proj/none.tfvars"}}, []string{"Failed to read file"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, diags := p.VariableValues(cfg, tt.in)
			var got []string
			for _, d := range diags {
				got = append(got, d.Summary)
			}
			if diff := cmp.Diff(tt.summary, got); diff != "" {
				t.Errorf("summaries (-want +got):\n%s", diff)
			}
		})
	}

	if _, diags := cfg.NewScope(nil); len(diags) != 1 || diags[0].Summary != "No value for required variable" || diags[0].Subject.Start.Line != 2 {
		t.Errorf("missing required: %v", diags)
	}
	_, diags := cfg.NewScope(map[string]cty.Value{"required": cty.StringVal("x"), "port": cty.NumberIntVal(70000)})
	if len(diags) != 1 || diags[0].Summary != "Invalid value for variable" || !strings.Contains(diags[0].Detail, "The port must be from 1 to 65535.") {
		t.Errorf("failing validation: %v", diags)
	}
	if _, diags := cfg.NewScope(map[string]cty.Value{"required": cty.StringVal("x"), "other": cty.True}); len(diags) != 1 || diags[0].Summary != "Value for undeclared variable" {
		t.Errorf("undeclared in NewScope: %v", diags)
	}
}

func TestSensitive(t *testing.T) {
	const secret = "hunter2-very-secret"
	p, cfg := load(t, map[string]string{"proj/Bottlefile": `
variable "token" {
  type      = string
  sensitive = true
}
variable "plain" {
  type    = string
  default = "visible"
}
locals {
  header = "Bearer ${var.token}"
  both   = { token = var.token, plain = var.plain }
}
agent "a" {
  image  = "alpine:3"
  env    = { AUTH = local.header, PLAIN = var.plain, UP = upper(var.token) }
  labels = local.both
}
agent "b" {
  image = "alpine:3"
  cpus  = length(var.token) > 3 ? 1 : 2
}
output "token" {
  value     = local.header
  sensitive = true
}
`})
	vals, diags := p.VariableValues(cfg, VarInputs{Env: map[string]string{"BOTTLEFILE_VAR_token": secret}})
	if len(diags) > 0 {
		t.Fatal(diags)
	}
	if !IsSensitive(vals["token"]) {
		t.Error("VariableValues did not mark the sensitive value")
	}
	s, diags := cfg.NewScope(vals)
	if len(diags) > 0 {
		t.Fatal(diags)
	}
	av, diags := s.EvalAgent(cfg.Agents["a"])
	if len(diags) > 0 {
		t.Fatal(diags)
	}
	if !IsSensitive(av.Workload.GetAttr("env")) || !IsSensitive(av.Workload.GetAttr("labels")) {
		t.Errorf("derived values lost the mark: env %#v labels %#v", av.Workload.GetAttr("env"), av.Workload.GetAttr("labels"))
	}
	env, _ := av.Workload.GetAttr("env").Unmark()
	if IsSensitive(env.Index(cty.StringVal("PLAIN"))) {
		t.Error("PLAIN is marked though it does not depend on the secret")
	}
	if !IsSensitive(env.Index(cty.StringVal("AUTH"))) || !IsSensitive(env.Index(cty.StringVal("UP"))) {
		t.Error("AUTH or UP is not marked")
	}
	bv, _ := s.EvalAgent(cfg.Agents["b"])
	if !IsSensitive(bv.Workload.GetAttr("cpus")) {
		t.Error("a value computed from a secret is not marked")
	}
	out, diags := s.EvalOutput(cfg.Outputs["token"])
	if len(diags) > 0 || !out.HasMark(Sensitive) {
		t.Errorf("sensitive output = %#v, %v", out, diags)
	}
}

func TestSensitiveValuesStayOutOfDiagnostics(t *testing.T) {
	const secret = "s3cr3t-value-xyz"
	p, cfg := load(t, map[string]string{"proj/Bottlefile": `
variable "token" {
  type      = string
  sensitive = true
}
variable "size" {
  type      = string
  sensitive = true
}
variable "list" {
  type      = list(string)
  sensitive = true
}
agent "a" {
  image   = "alpine:3"
  cpus    = tonumber(var.token)
  memory  = var.size
  workdir = var.token
  egress {
    allow = var.list
  }
}
agent "b" {
  image = "alpine:3"
  env   = { X = jsondecode(var.token) }
}
`})
	vals, diags := p.VariableValues(cfg, VarInputs{
		Vars: []string{"token=" + secret, "size=" + secret + "GiB", `list=["` + secret + `"]`},
	})
	if len(diags) > 0 {
		t.Fatal(renderDiags(p, diags))
	}
	s, diags := cfg.NewScope(vals)
	if len(diags) > 0 {
		t.Fatal(diags)
	}
	_, diags = s.EvalAgent(cfg.Agents["a"])
	_, moreDiags := s.EvalAgent(cfg.Agents["b"])
	diags = append(diags, moreDiags...)
	if len(diags) < 4 {
		t.Fatalf("want errors for cpus, memory, workdir, egress and env, got:\n%s", renderDiags(p, diags))
	}
	var human bytes.Buffer
	_ = WriteDiagnostics(&human, p.Files(), diags, 78, true)
	js, _ := DiagnosticsJSON(p.Files(), diags)
	for name, out := range map[string]string{"human": human.String(), "json": string(js)} {
		if strings.Contains(out, secret) || strings.Contains(out, "s3cr3t") {
			t.Errorf("%s diagnostics show the secret:\n%s", name, out)
		}
	}

	// A -var value that does not parse for a sensitive list is not echoed.
	_, diags = p.VariableValues(cfg, VarInputs{Vars: []string{`list=["` + secret}})
	human.Reset()
	_ = WriteDiagnostics(&human, p.Files(), diags, 78, false)
	if !diags.HasErrors() || strings.Contains(human.String(), secret) {
		t.Errorf("bad sensitive -var: %s", human.String())
	}
}

func TestOutputOfSensitiveValueNeedsFlag(t *testing.T) {
	fsys := fstest.MapFS{"proj/Bottlefile": {Data: []byte(`
variable "t" {
  sensitive = true
  default   = "x"
}
agent "a" {
  image = "alpine:3"
}
output "o" {
  value = { v = var.t }
}
`)}}
	p := NewParserFS(fsys)
	_, diags := p.LoadDir("proj")
	if len(diags) != 1 || diags[0].Summary != "Output refers to sensitive values" {
		t.Errorf("diags = %s", renderDiags(p, diags))
	}
}

func TestFormat(t *testing.T) {
	in := "agent \"a\" {\nimage=\"x\"\n    cpus =   2\n}\n"
	want := "agent \"a\" {\n  image = \"x\"\n  cpus  = 2\n}\n"
	if got := string(Format([]byte(in))); got != want {
		t.Errorf("Format = %q, want %q", got, want)
	}
	if _, diags := FormatFile([]byte("agent \"a\" {"), "Bottlefile"); !diags.HasErrors() {
		t.Error("FormatFile accepted a broken file")
	}
	if got, diags := FormatFile([]byte(want), "Bottlefile"); diags.HasErrors() || string(got) != want {
		t.Errorf("FormatFile changed formatted source: %q %v", got, diags)
	}
}

func TestParseDuration(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"720h", 720 * time.Hour, true},
		{"30d", 30 * 24 * time.Hour, true},
		{"1h30m", 90 * time.Minute, true},
		{"0s", 0, false},
		{"-1h", 0, false},
		{"soon", 0, false},
		{"1.5d", 0, false},
	}
	for _, tt := range tests {
		got, err := ParseDuration(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v, ok %v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}

func TestCheckEgressRule(t *testing.T) {
	good := []string{"github.com", "github.com:443", "*.pythonhosted.org:443", "*.npmjs.org", "10.0.0.1:5432", "[2001:db8::1]:443", "[::1]", "localhost:8080", "2001:db8::1"}
	bad := []string{"", "https://github.com", "github.com:0", "github.com:65536", "github.com:", "api.*.com", "*", "*.:443", "a..b", "github.com/path", "[::1", "[::1]x", "git hub.com", "user@host"}
	for _, r := range good {
		if msg := CheckEgressRule(r); msg != "" {
			t.Errorf("CheckEgressRule(%q) = %q, want ok", r, msg)
		}
	}
	for _, r := range bad {
		if msg := CheckEgressRule(r); msg == "" {
			t.Errorf("CheckEgressRule(%q) accepted a bad rule", r)
		}
	}
}

func TestValidName(t *testing.T) {
	for _, n := range []string{"a", "coder", "git-gate", "a_b", "A1"} {
		if !ValidName(n) {
			t.Errorf("ValidName(%q) = false", n)
		}
	}
	for _, n := range []string{"", "1a", "-a", "_a", "a b", "a.b", "é"} {
		if ValidName(n) {
			t.Errorf("ValidName(%q) = true", n)
		}
	}
}

func TestWriteDiagnosticsCaret(t *testing.T) {
	fsys := fstest.MapFS{"proj/Bottlefile": {Data: []byte("agent \"a\" {\n\timage = \"alpine:3\"\n\tcpus  = \"many\"\n}\n")}}
	p := NewParserFS(fsys)
	_, diags := p.LoadDir("proj")
	var buf bytes.Buffer
	if err := WriteDiagnostics(&buf, p.Files(), diags, 0, false); err != nil {
		t.Fatal(err)
	}
	want := "Error: Incorrect attribute value type\n\n" +
		"  on proj/Bottlefile line 3, in agent \"a\":\n" +
		"   3: \tcpus  = \"many\"\n" +
		"      \t        ^^^^^^\n\n" +
		"Inappropriate value for attribute \"cpus\": a number is required.\n\n"
	if diff := cmp.Diff(want, buf.String()); diff != "" {
		t.Errorf("rendering (-want +got):\n%s", diff)
	}
}

func TestLoadDirErrors(t *testing.T) {
	p := NewParserFS(fstest.MapFS{"proj/README": {Data: []byte("x")}})
	if _, diags := p.LoadDir("proj"); len(diags) != 1 || diags[0].Summary != "No configuration files" {
		t.Errorf("empty dir: %v", diags)
	}
	if _, diags := p.LoadDir("missing"); len(diags) != 1 || diags[0].Summary != "Failed to read configuration directory" {
		t.Errorf("missing dir: %v", diags)
	}
	// Loading twice reports parse errors twice.
	p = NewParserFS(fstest.MapFS{"proj/Bottlefile": {Data: []byte("agent {")}})
	_, d1 := p.LoadDir("proj")
	_, d2 := p.LoadDir("proj")
	if !d1.HasErrors() || len(d1) != len(d2) {
		t.Errorf("second load: %v vs %v", d1, d2)
	}
}

func writeFile(t *testing.T, path, src string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestScopeConcurrentUse(t *testing.T) {
	var b strings.Builder
	b.WriteString("locals {\n  first = agent.root.id\n}\nagent \"root\" {\n  image = \"alpine:3\"\n}\n")
	for i := 0; i < 20; i++ {
		fmt.Fprintf(&b, "agent \"a%d\" {\n  image = \"alpine:3\"\n  env   = { FIRST = local.first }\n}\n", i)
	}
	_, cfg := load(t, map[string]string{"proj/Bottlefile": b.String()})
	s, diags := cfg.NewScope(nil)
	if len(diags) > 0 {
		t.Fatal(diags)
	}
	var wg sync.WaitGroup
	for _, name := range cfg.AgentNames() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if name == "root" {
				s.SetAgent(name, cty.ObjectVal(map[string]cty.Value{"id": cty.StringVal("id-" + name)}))
			}
			if _, diags := s.EvalAgent(cfg.Agents[name]); len(diags) > 0 {
				t.Error(diags)
			}
			_, _ = s.EvalContext()
		}()
	}
	wg.Wait()
	av, _ := s.EvalAgent(cfg.Agents["a5"])
	if want := cty.MapVal(map[string]cty.Value{"FIRST": cty.StringVal("id-root")}); !av.Workload.GetAttr("env").RawEquals(want) {
		t.Errorf("env = %#v", av.Workload.GetAttr("env"))
	}
}

func TestEvalRuntimeAndSnapshot(t *testing.T) {
	_, cfg := load(t, map[string]string{"proj/Bottlefile": `
variable "host" {
  type    = string
  default = "unix:///var/run/docker.sock"
}
locals {
  prefix = "bf"
}
runtime "local" {
  driver = "docker"
  host   = var.host
  prefix = local.prefix
}
agent "a" {
  runtime = runtime.local
  image   = "alpine:3"
}
snapshot "s" {
  agent       = agent.a
  description = "taken from ${var.host}"
  triggers    = { n = 1 }
}
`})
	s, diags := cfg.NewScope(map[string]cty.Value{"host": cty.StringVal("tcp://10.0.0.1:2375")})
	if len(diags) > 0 {
		t.Fatal(diags)
	}
	spec := &hcldec.ObjectSpec{
		"host":   &hcldec.AttrSpec{Name: "host", Type: cty.String},
		"prefix": &hcldec.AttrSpec{Name: "prefix", Type: cty.String},
	}
	v, diags := s.EvalRuntime(cfg.Runtimes["local"], spec)
	if len(diags) > 0 {
		t.Fatal(diags)
	}
	want := cty.ObjectVal(map[string]cty.Value{"host": cty.StringVal("tcp://10.0.0.1:2375"), "prefix": cty.StringVal("bf")})
	if !v.RawEquals(want) {
		t.Errorf("runtime config = %#v", v)
	}
	// A spec without an attribute the block sets: the driver's schema is
	// what decides, so this is an error.
	_, diags = s.EvalRuntime(cfg.Runtimes["local"], &hcldec.ObjectSpec{"host": &hcldec.AttrSpec{Name: "host", Type: cty.String}})
	if len(diags) != 1 || diags[0].Summary != "Unsupported argument" {
		t.Errorf("diags = %v", diags)
	}

	sv, diags := s.EvalSnapshot(cfg.Snapshots["s"])
	if len(diags) > 0 {
		t.Fatal(diags)
	}
	if !sv.Description.RawEquals(cty.StringVal("taken from tcp://10.0.0.1:2375")) || !sv.Triggers.RawEquals(cty.MapVal(map[string]cty.Value{"n": cty.StringVal("1")})) {
		t.Errorf("snapshot = %#v", sv)
	}
}

func TestEgressRuleRange(t *testing.T) {
	_, cfg := load(t, map[string]string{
		"proj/Bottlefile":       "agent \"a\" {\n  image = \"alpine:3\"\n  egress {\n    allow = [\n      \"a.example.com\",\n      \"b.example.com\",\n    ]\n  }\n}\nagent \"c\" {\n  image = \"alpine:3\"\n  egress {\n    allow = concat([\"x.example.com\"], [])\n  }\n}\n",
		"proj/more.bottle.json": "{\"agent\": {\"b\": {\"image\": \"alpine:3\", \"egress\": {\"allow\": [\n\"a.example.com\",\n\"b.example.com\"]}}}}",
	})
	if got := ruleLine(cfg.Agents["a"], 1); got != 6 {
		t.Errorf("native rule 1 on line %d, want 6", got)
	}
	if got := ruleLine(cfg.Agents["b"], 1); got != 3 {
		t.Errorf("JSON rule 1 on line %d, want 3", got)
	}
	if got := ruleLine(cfg.Agents["c"], 0); got != 13 {
		t.Errorf("computed list rule on line %d, want the expression's line 13", got)
	}
}

func ruleLine(a *Agent, i int) int {
	rng, _ := a.EgressRuleRange(i)
	return rng.Start.Line
}

func buildVal(context, dockerfile string) cty.Value {
	return cty.ObjectVal(map[string]cty.Value{"context": cty.StringVal(context), "dockerfile": cty.StringVal(dockerfile)})
}
