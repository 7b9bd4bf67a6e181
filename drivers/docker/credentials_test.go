package docker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/docker/docker/api/types/container"
	"github.com/zclconf/go-cty/cty"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/egress"
)

const testKey = "sk-test-value-0123456789"

func credentialWorkload(t *testing.T, value string) cty.Value {
	t.Helper()
	creds := cty.ListVal([]cty.Value{cty.ObjectVal(map[string]cty.Value{
		"name":   cty.StringVal("anthropic"),
		"host":   cty.StringVal("api.anthropic.com"),
		"port":   cty.NumberIntVal(443),
		"header": cty.StringVal("x-api-key"),
		"prefix": cty.StringVal(""),
		"value":  cty.StringVal(value).Mark("sensitive"),
		"env":    cty.StringVal("ANTHROPIC_API_KEY"),
	})})
	return drivers.MustWorkload(map[string]cty.Value{
		"image":       cty.StringVal("x:1"),
		"egress":      cty.ListVal([]cty.Value{cty.StringVal("api.anthropic.com:443")}),
		"credentials": creds,
	})
}

// TestPlanCredentials: the gateway records the credentials (the value
// sensitive, for the core to hash) and changes them in place; the agent
// container records the names and env only, so a rotated value leaves it
// as it was.
func TestPlanCredentials(t *testing.T) {
	d := egressDriver(t, listing(isolatingEngine()), nil)
	plan := func(value string) map[string]drivers.Object {
		return planObjects(t, d, drivers.AgentSpec{Addr: "agent.coder", Name: "coder", Workload: credentialWorkload(t, value)})
	}
	objs := plan(testKey)
	gw, agent := objs["agent.coder.gateway"], objs["agent.coder"]
	creds := gw.Attrs["credentials"]
	if creds == cty.NilVal || !creds.HasMarkDeep("sensitive") {
		t.Fatalf("gateway credentials %#v, want the list with the value marked sensitive", creds)
	}
	if !strings.Contains(strings.Join(gw.InPlace, ","), "credentials") {
		t.Errorf("gateway InPlace %v lacks credentials", gw.InPlace)
	}
	want := cty.MapVal(map[string]cty.Value{"anthropic": cty.StringVal("ANTHROPIC_API_KEY")})
	if got := agent.Attrs["credential_env"]; got == cty.NilVal || !got.RawEquals(want) {
		t.Errorf("agent credentials attribute %#v, want %#v", got, want)
	}
	for name, v := range agent.Attrs {
		if v != cty.NilVal && v.HasMarkDeep("sensitive") {
			t.Errorf("agent attribute %s is sensitive: the value reached the agent's object", name)
		}
	}
	// The hosts the bottle's CA is name-constrained to: a change of host
	// makes a new CA, and the agent that trusts it is a new one.
	if got := agent.Attrs["ca_hosts"]; got == cty.NilVal || !got.RawEquals(cty.ListVal([]cty.Value{cty.StringVal("api.anthropic.com")})) {
		t.Errorf("agent ca_hosts %#v, want [api.anthropic.com]", got)
	}
	rotated := plan("sk-rotated-9876543210")
	for _, attr := range []string{"credential_env", "ca_hosts"} {
		if a, b := agent.Attrs[attr], rotated["agent.coder"].Attrs[attr]; !a.RawEquals(b) {
			t.Errorf("a rotated value changed the agent's %s: %#v, then %#v", attr, a, b)
		}
	}

	// Without credentials, neither object has the attribute: their
	// configuration hashes stay what they were.
	plain := planObjects(t, d, drivers.AgentSpec{Addr: "agent.coder", Name: "coder", Workload: drivers.MustWorkload(map[string]cty.Value{
		"image": cty.StringVal("x:1"), "egress": cty.ListVal([]cty.Value{cty.StringVal("github.com")}),
	})})
	for _, addr := range []string{"agent.coder", "agent.coder.gateway"} {
		if _, ok := plain[addr].Attrs["credentials"]; ok {
			t.Errorf("%s without credentials has a credentials attribute", addr)
		}
		if _, ok := plain[addr].Attrs["credential_env"]; ok {
			t.Errorf("%s without credentials has a credentials attribute", addr)
		}
		if _, ok := plain[addr].Attrs["ca_hosts"]; ok {
			t.Errorf("%s without credentials has a ca_hosts attribute", addr)
		}
	}

	// A sidecar's credential block is refused: the bottle's gateway
	// injects for the agent.
	sc := credentialWorkload(t, testKey)
	_, err := d.Plan(t.Context(), drivers.PlanRequest{Agent: drivers.AgentSpec{Addr: "agent.coder", Name: "coder",
		Workload: credentialWorkload(t, testKey),
		Sidecars: []drivers.SidecarSpec{{Addr: "agent.coder.sidecar.web", Name: "web", Workload: sc}}}})
	if err == nil || !strings.Contains(err.Error(), "credential blocks go in the agent's egress block") {
		t.Errorf("sidecar with credentials: %v", err)
	}
}

// TestBottleCAFollowsHosts: the bottle's CA is kept while its credential
// hosts stay, and made anew, constrained to the new hosts, when they
// change.
func TestBottleCAFollowsHosts(t *testing.T) {
	d := egressDriver(t, listing(isolatingEngine()), nil)
	d.stateDir = t.TempDir()
	first, _, err := d.bottleCA("lin", "agent.coder", []string{"api.example.com"})
	if err != nil {
		t.Fatal(err)
	}
	again, _, err := d.bottleCA("lin", "agent.coder", []string{"API.example.com"})
	if err != nil || !bytes.Equal(first, again) {
		t.Fatalf("the same hosts made another CA (%v)", err)
	}
	moved, _, err := d.bottleCA("lin", "agent.coder", []string{"api.example.com", "10.0.0.5"})
	if err != nil || bytes.Equal(first, moved) || !egress.CAConstrainedTo(moved, []string{"10.0.0.5", "api.example.com"}) {
		t.Fatalf("other hosts kept the CA, or the new one is not constrained to them (%v)", err)
	}
}

// TestForgetBottle: forgetting a bottle removes its CA, key included, and
// the lineage's directory with its last bottle; another bottle's CA stays
// until it is forgotten; a bottle with no CA, or an address that would
// leave the state directory, is no error and removes nothing.
func TestForgetBottle(t *testing.T) {
	d := egressDriver(t, listing(isolatingEngine()), nil)
	d.stateDir = t.TempDir()
	for _, agent := range []string{"agent.coder", "agent.reviewer"} {
		if _, _, err := d.bottleCA("lin", agent, []string{"api.example.com"}); err != nil {
			t.Fatal(err)
		}
	}
	lineageDir := filepath.Join(d.stateDir, "credentials", "lin")
	exists := func(p string) bool { _, err := os.Stat(p); return err == nil }

	for _, agent := range []string{"agent.never", "../lin", "agent.coder/.."} {
		if err := d.ForgetBottle("lin", agent); err != nil || !exists(filepath.Join(lineageDir, "agent.coder", "ca.key")) {
			t.Errorf("ForgetBottle(%q) = %v, or it removed another bottle's CA", agent, err)
		}
	}
	if err := d.ForgetBottle("lin", "agent.coder"); err != nil {
		t.Fatal(err)
	}
	if exists(filepath.Join(lineageDir, "agent.coder")) || !exists(filepath.Join(lineageDir, "agent.reviewer", "ca.key")) {
		t.Errorf("after forgetting agent.coder: its CA kept %v, agent.reviewer's kept %v", exists(filepath.Join(lineageDir, "agent.coder")), exists(filepath.Join(lineageDir, "agent.reviewer", "ca.key")))
	}
	if err := d.ForgetBottle("lin", "agent.reviewer"); err != nil {
		t.Fatal(err)
	}
	if exists(lineageDir) {
		t.Errorf("the lineage's credentials directory stays after its last bottle")
	}
}

// TestCredentialsFile: the gateway's file holds the value, the bottle's
// CA and the placeholder; the CA is made once and kept in the state
// directory (the key readable by its owner only); the agent's env gets
// the placeholder and the trust variables, never the value.
func TestCredentialsFile(t *testing.T) {
	d := egressDriver(t, listing(isolatingEngine()), nil)
	d.stateDir = t.TempDir()
	gw := drivers.Object{Addr: "agent.coder.gateway", Attrs: map[string]cty.Value{"credentials": drivers.WorkloadAttr(credentialWorkload(t, testKey), "credentials")}}
	f, err := d.credentialsFile("lin", "agent.coder", gw)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Credentials) != 1 || f.Credentials[0].Value != testKey || f.CACert == "" || f.CAKey == "" || f.Version == "" {
		t.Fatalf("credentials file %+v", f)
	}
	ph := placeholder("lin", "agent.coder", "anthropic")
	if f.Credentials[0].Placeholder != ph || strings.Contains(ph, testKey) {
		t.Errorf("placeholder %q", f.Credentials[0].Placeholder)
	}
	again, err := d.credentialsFile("lin", "agent.coder", gw)
	if err != nil {
		t.Fatal(err)
	}
	if again.CACert != f.CACert || again.Version == f.Version {
		t.Errorf("a second file has another CA, or the same version")
	}
	st, err := os.Stat(filepath.Join(d.stateDir, "credentials", "lin", "agent.coder", "ca.key"))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("CA key: %v, mode %v", err, st.Mode())
	}
	// The gateway takes it.
	g := &egress.Gateway{}
	if err := g.SetCredentials(f); err != nil {
		t.Fatalf("the gateway refuses the file: %v", err)
	}
	tf, err := credentialsTarFile(f)
	if err != nil || tf.mode != 0o444 {
		t.Errorf("tar entry %+v, %v", tf, err)
	}
	var back egress.CredentialsFile
	if err := json.Unmarshal(tf.data, &back); err != nil || back.Credentials[0].Value != testKey {
		t.Errorf("tar entry does not hold the file: %v", err)
	}

	agent := drivers.Object{Addr: "agent.coder", Attrs: map[string]cty.Value{"credential_env": cty.MapVal(map[string]cty.Value{"anthropic": cty.StringVal("ANTHROPIC_API_KEY")})}}
	cfg := &container.Config{Env: []string{"GIT_SSL_CAINFO=/mine.pem"}}
	with, err := wireCredentials(drivers.ApplyRequest{Lineage: "lin", Object: agent}, cfg)
	if err != nil || !with {
		t.Fatalf("wireCredentials: %v %v", with, err)
	}
	env := strings.Join(cfg.Env, "\n")
	for _, want := range []string{"ANTHROPIC_API_KEY=" + ph, "SSL_CERT_FILE=" + agentCABundle, "REQUESTS_CA_BUNDLE=" + agentCABundle, "NODE_EXTRA_CA_CERTS=" + agentCAFile, "GIT_SSL_CAINFO=/mine.pem"} {
		if !strings.Contains(env, want) {
			t.Errorf("env lacks %s:\n%s", want, env)
		}
	}
	if strings.Contains(env, "GIT_SSL_CAINFO="+agentCABundle) || strings.Contains(env, testKey) {
		t.Errorf("env overrides the configuration's variable, or holds the value:\n%s", env)
	}
	if cfg.Labels[labelBottleCA] != "1" {
		t.Errorf("the container is not labelled as given the bottle's CA: %v", cfg.Labels)
	}

	// A moved agent (agent.coder renamed agent.writer, its objects still
	// named after agent.coder) made again gets the placeholder its
	// gateway's file has, which is agent.coder's.
	moved := drivers.Object{Addr: "agent.writer", Attrs: agent.Attrs}
	cfg = &container.Config{}
	if _, err := wireCredentials(drivers.ApplyRequest{Lineage: "lin", Object: moved, NameAddr: "agent.coder"}, cfg); err != nil {
		t.Fatal(err)
	}
	if env := strings.Join(cfg.Env, "\n"); !strings.Contains(env, "ANTHROPIC_API_KEY="+ph) {
		t.Errorf("a moved agent's placeholder is not its gateway's %s:\n%s", ph, env)
	}
}

// TestWrittenLeavesOutTheCA: what an agent given the bottle's CA wrote
// leaves out the CA files, as they are now; a container without the label
// is not looked into.
func TestWrittenLeavesOutTheCA(t *testing.T) {
	sizes := map[string]int64{agentCAFile: 704, agentCABundle: 220_000}
	api := &fakeAPI{ContainerStatPathFn: func(id, path string) (container.PathStat, error) {
		if n, ok := sizes[path]; ok {
			return container.PathStat{Name: path, Size: n, Mode: 0o644}, nil
		}
		return container.PathStat{}, errors.New("no such file")
	}}
	ca := map[string]string{labelBottleCA: "1"}
	for _, tc := range []struct {
		labels         map[string]string
		sizeRw, want   int64
		statsContainer bool
	}{
		{ca, 220_704, 0, true},     // fresh: only the CA files
		{ca, 225_704, 5_000, true}, // and 5 kB of its own
		{ca, 100, 0, true},         // the bundle deleted or shrunk: never below 0
		{nil, 220_704, 220_704, false},
	} {
		api.Calls = nil
		if got := written(context.Background(), api, "c1", tc.labels, tc.sizeRw); got != tc.want {
			t.Errorf("%v SizeRw %d: written %d, want %d", tc.labels, tc.sizeRw, got, tc.want)
		}
		if stats := slices.Contains(api.Calls, "ContainerStatPath"); stats != tc.statsContainer {
			t.Errorf("%v: ContainerStatPath called: %v", tc.labels, stats)
		}
	}
}
