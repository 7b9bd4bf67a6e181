package kubernetes

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2/hcldec"
	"github.com/zclconf/go-cty/cty"

	"github.com/bottlefile/bottlefile/drivers"
)

// runtimeConfig is a runtime block decoded against the driver's schema:
// the attributes given, the others null.
func runtimeConfig(attrs map[string]cty.Value) cty.Value {
	ty := hcldec.ImpliedType(configSpec())
	vals := map[string]cty.Value{}
	for name, aty := range ty.AttributeTypes() {
		vals[name] = cty.NullVal(aty)
		if v, ok := attrs[name]; ok {
			vals[name] = v
		}
	}
	return cty.ObjectVal(vals)
}

const kubeconfig = `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "https://127.0.0.1:6443", insecure-skip-tls-verify: true}
- name: other
  cluster: {server: "https://10.1.2.3:6443", insecure-skip-tls-verify: true}
users:
- name: u
  user: {token: "t"}
contexts:
- name: main
  context: {cluster: c, user: u}
- name: second
  context: {cluster: other, user: u}
current-context: main
`

// TestDeclaration: what the driver refuses is refused by the generic
// check, naming the driver: a build block (nothing on a cluster builds),
// pids (no per-Pod setting).
func TestDeclaration(t *testing.T) {
	caps := Declaration().Capabilities
	a := drivers.AgentSpec{Addr: "agent.a", Name: "a", Workload: workload(map[string]cty.Value{
		"build": cty.ObjectVal(map[string]cty.Value{"context": cty.StringVal("/src"), "dockerfile": cty.StringVal("Dockerfile")}),
		"pids":  cty.NumberIntVal(64),
	})}
	refusals := drivers.CheckAgent("kubernetes", caps, a)
	var blocks, attrs []string
	for _, r := range refusals {
		if !strings.Contains(r.Message, "kubernetes") {
			t.Errorf("refusal %q does not name the driver", r.Message)
		}
		blocks = append(blocks, r.Block)
		attrs = append(attrs, r.Attr)
	}
	if strings.Join(blocks, ",") != "build," || strings.Join(attrs, ",") != ",pids" {
		t.Errorf("refused blocks %q and attributes %q; want build and pids", blocks, attrs)
	}
	ok := drivers.AgentSpec{Addr: "agent.a", Name: "a", Workload: workload(map[string]cty.Value{
		"image": cty.StringVal("busybox"), "cpus": cty.NumberFloatVal(0.5), "memory": cty.NumberIntVal(64 << 20),
		"egress": strs("github.com", "*.pythonhosted.org", "10.0.0.0/8", "github.com:22"),
	}), Sidecars: []drivers.SidecarSpec{{Name: "db", Workload: workload(map[string]cty.Value{"image": cty.StringVal("postgres")})}}}
	if r := drivers.CheckAgent("kubernetes", caps, ok); len(r) > 0 {
		t.Errorf("refused what the driver does: %v", r)
	}
}

// TestCheckRuntime: each attribute's error names it, without contacting
// anything.
func TestCheckRuntime(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "kc"), []byte(kubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name  string
		attrs map[string]cty.Value
		want  string // "attr: part of the message", "" for none
	}{
		{"defaults", nil, ""},
		{"relative kubeconfig", map[string]cty.Value{attrKubeconfig: cty.StringVal("kc")}, ""},
		{"missing kubeconfig", map[string]cty.Value{attrKubeconfig: cty.StringVal("nope")}, "kubeconfig: cannot read the kubeconfig"},
		{"prefix upper", map[string]cty.Value{attrNamespacePrefix: cty.StringVal("Agents-")}, "namespace_prefix: \"Agents-\" cannot begin a namespace name"},
		{"prefix long", map[string]cty.Value{attrNamespacePrefix: cty.StringVal(strings.Repeat("a", 21))}, "namespace_prefix: \"aaaaaaaaaaaaaaaaaaaaa\" is longer than 20"},
		{"registry scheme", map[string]cty.Value{attrRegistry: cty.StringVal("http://r:5000")}, "registry: \"http://r:5000\" has a scheme"},
		{"containerd tcp", map[string]cty.Value{attrNodeContainerd: cty.MapVal(map[string]cty.Value{"n1": cty.StringVal("tcp://1.2.3.4:1")})}, "node_containerd: node \"n1\": \"tcp://1.2.3.4:1\" is not a containerd address"},
		{"containerd ok", map[string]cty.Value{attrNodeContainerd: cty.MapVal(map[string]cty.Value{"n1": cty.StringVal("unix:///run/k/containerd.sock")})}, ""},
		{"unknown skipped", map[string]cty.Value{attrRegistry: cty.UnknownVal(cty.String)}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			errs := checkRuntime(drivers.ConfigureRequest{Runtime: "k", Config: runtimeConfig(tt.attrs), Dir: dir})
			switch {
			case tt.want == "" && len(errs) > 0:
				t.Errorf("errors %v, want none", errs)
			case tt.want != "" && (len(errs) != 1 || !strings.HasPrefix(errs[0].Error(), tt.want)):
				t.Errorf("errors %v, want one starting %q", errs, tt.want)
			}
		})
	}
}

// TestConfigure: the kubeconfig named, relative to the Bottlefile, with
// the context named; else KUBECONFIG. Nothing is contacted.
func TestConfigure(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "kc")
	if err := os.WriteFile(path, []byte(kubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	d, _ := New(nil)
	kd := d.(*Driver)
	cfg := runtimeConfig(map[string]cty.Value{attrKubeconfig: cty.StringVal("kc"), attrContext: cty.StringVal("second"), attrRegistry: cty.StringVal("r:5000")})
	if err := d.Configure(t.Context(), drivers.ConfigureRequest{Runtime: "k", Config: cfg, Dir: dir}); err != nil {
		t.Fatal(err)
	}
	if kd.rest.Host != "https://10.1.2.3:6443" || kd.cfg.registry != "r:5000" || kd.cfg.prefix != defaultPrefix {
		t.Errorf("configured host %q, registry %q, prefix %q", kd.rest.Host, kd.cfg.registry, kd.cfg.prefix)
	}
	if kd.rest.QPS < 50 || kd.rest.Burst < 100 {
		t.Errorf("client rate limit %v QPS, burst %d: client-go's default throttle", kd.rest.QPS, kd.rest.Burst)
	}

	t.Setenv("KUBECONFIG", path)
	if err := d.Configure(t.Context(), drivers.ConfigureRequest{Runtime: "k", Config: runtimeConfig(nil)}); err != nil {
		t.Fatal(err)
	}
	if kd.rest.Host != "https://127.0.0.1:6443" {
		t.Errorf("with KUBECONFIG: host %q, want its current context's", kd.rest.Host)
	}
	err := d.Configure(t.Context(), drivers.ConfigureRequest{Runtime: "k", Config: runtimeConfig(map[string]cty.Value{attrContext: cty.StringVal("gone")})})
	if err == nil || !strings.Contains(err.Error(), `runtime "k"`) || !strings.Contains(err.Error(), "gone") {
		t.Errorf("an unknown context: %v, want an error naming the runtime and the context", err)
	}
}

// TestUnreachable: an API server nobody answers at is one
// *drivers.UnreachableError naming the runtime and the server, so the
// planner reports it once for the runtime.
func TestUnreachable(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "kc")
	kc := strings.Replace(kubeconfig, "https://127.0.0.1:6443", "https://127.0.0.1:1", 1)
	if err := os.WriteFile(path, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	d, _ := New(nil)
	if err := d.Configure(t.Context(), drivers.ConfigureRequest{Runtime: "k", Config: runtimeConfig(map[string]cty.Value{attrKubeconfig: cty.StringVal(path)})}); err != nil {
		t.Fatal(err)
	}
	_, err := d.Read(t.Context(), drivers.ReadRequest{Lineage: "0f3a9c2e-1111-4222-8333-444455556666"})
	var ue *drivers.UnreachableError
	if !errors.As(err, &ue) || ue.Runtime != "k" || !strings.Contains(ue.Address, "https://127.0.0.1:1") {
		t.Fatalf("Read of an API server nobody answers at: %v, want an UnreachableError naming runtime k and the server", err)
	}
}
