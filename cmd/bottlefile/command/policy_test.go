package command

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPolicyCommand: policy shows the operator's egress policy and its
// file, says when there is none, and fails on one that does not parse,
// naming the file and line.
func TestPolicyCommand(t *testing.T) {
	w := newWorkspace(t)
	dir := t.TempDir()
	t.Setenv("HOME", dir)
	t.Setenv("XDG_CONFIG_HOME", "")
	t.Setenv("BOTTLEFILE_POLICY", "")
	if _, err := os.Stat("/etc/bottlefile/policy.hcl"); err == nil {
		t.Skip("this machine has a system policy")
	}
	out := w.must("policy")
	if !strings.Contains(out, "No egress policy: none found (looked for "+filepath.Join(dir, ".config/bottlefile/policy.hcl")+", then /etc/bottlefile/policy.hcl)") {
		t.Errorf("without a policy:\n%s", out)
	}

	path := filepath.Join(dir, ".config", "bottlefile", "policy.hcl")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(`egress_ceiling = ["GitHub.com:443", "*.anthropic.com:443"]`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out = w.must("policy")
	if !strings.Contains(out, "Egress policy: "+path+"\n") || !strings.Contains(out, "  github.com:443\n  *.anthropic.com:443\n") {
		t.Errorf("with a policy:\n%s", out)
	}
	if out := w.must("policy", "-json"); !strings.Contains(out, `"source":"`+path+`","egress_ceiling":["github.com:443","*.anthropic.com:443"]`) {
		t.Errorf("-json:\n%s", out)
	}

	if err := os.WriteFile(path, []byte("egress_ceiling = [\n  \"github.com:443\",\n  \"*\",\n]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errs := w.run("policy")
	if code != 1 || !strings.Contains(errs, "Invalid egress policy") || !strings.Contains(errs, "on "+path+" line 3") {
		t.Errorf("a broken policy: exit %d\n%s", code, errs)
	}
}
