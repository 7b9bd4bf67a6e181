package main

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/docker/dockertest"
)

// TestE2ECodingAgentsExample walks examples/coding-agents as its README
// does, on the real engine: validate, plan, apply (images built from the
// example's context, no registry), status, exec (a sidecar reached by
// name, an exit code passed through), a no-op plan,
// a change whose plan takes a snapshot first, and a destroy that leaves
// nothing carrying the lineage. The allowlisted hosts are never contacted.
func TestE2ECodingAgentsExample(t *testing.T) {
	cli := dockertest.Client(t)
	dir := copyExampleTree(t, "coding-agents")
	stage := exec.Command(filepath.Join("..", "..", "scripts", "quickstart-rootfs.sh"), filepath.Join(dir, "image", "rootfs"))
	if out, err := stage.CombinedOutput(); err != nil {
		t.Fatalf("staging the example's rootfs: %v\n%s", err, out)
	}
	const claudeKey, codexKey = "sk-ant-e2e-never-shown", "sk-oai-e2e-never-shown"
	t.Setenv("BOTTLEFILE_VAR_anthropic_api_key", claudeKey)
	t.Setenv("BOTTLEFILE_VAR_openai_api_key", codexKey)
	noSecrets := func(what, out string) {
		t.Helper()
		if strings.Contains(out, claudeKey) || strings.Contains(out, codexKey) {
			t.Errorf("%s shows an API key:\n%s", what, out)
		}
	}
	fullHash := regexp.MustCompile(`"[0-9a-f]{64}"`)

	mustRun(t, dir, "validate")
	r := mustRun(t, dir, "plan")
	wantAll(t, "plan", r.stdout,
		"+ agent.claude.sidecar.mcp (container)", "+ agent.codex.sidecar.cache (container)",
		`"api.anthropic.com:443"`, `"registry.npmjs.org:443"`, `"files.pythonhosted.org:443"`,
		"ANTHROPIC_API_KEY = (sensitive value)", "memory     = 1 GiB",
		"@ snapshot.claude_base (snapshot)", `+ image   = "snapshot.claude_base"`,
		"Plan: 16 to add, 0 to change, 0 to destroy, 1 to snapshot.")
	noSecrets("plan", r.stdout)
	// Gateways show their version, not the binary's SHA-256.
	if !strings.Contains(r.stdout, "+ version        = ") {
		t.Errorf("the gateways' plan shows no version:\n%s", r.stdout)
	}
	for _, line := range strings.Split(r.stdout, "\n") {
		if strings.Contains(line, "version") && fullHash.MatchString(line) {
			t.Errorf("a gateway diff shows a full hash: %s", line)
		}
	}

	// Building and starting 8 workloads takes minutes on a loaded machine:
	// more than bottlefile's 3-minute cap for one command.
	r = bottlefileWithin(t, 10*time.Minute, dir, "apply", "-auto-approve")
	lineage := lineageOf(t, cli, dir) // cleanup by label, whatever happens next
	if r.code != 0 {
		t.Fatalf("apply: %s", r)
	}
	wantAll(t, "apply", r.stdout, "Apply complete! Objects: 16 added, 0 changed, 0 destroyed, 1 snapshot taken.")
	noSecrets("apply", r.stdout+r.stderr)
	running := map[string]string{}
	for _, c := range containersWith(t, cli, drivers.LabelLineage+"="+lineage) {
		if c.State == "running" {
			running[c.Labels[drivers.LabelAddress]] = c.ID
		}
	}
	for _, addr := range []string{
		"agent.claude", "agent.claude.sidecar.mcp", "agent.claude.gateway",
		"agent.codex", "agent.codex.sidecar.cache", "agent.codex.gateway",
		"agent.reviewer", "agent.reviewer.gateway",
	} {
		if running[addr] == "" {
			t.Errorf("%s is not running after apply (running: %v)", addr, running)
		}
	}
	// exec, as the README does: the agent reaches its sidecar by name,
	// inside its bottle, and a command's exit code comes through.
	if r := mustRun(t, dir, "exec", "agent.claude", "--", "wget", "-Y", "off", "-qO-", "http://mcp:8080/"); !strings.Contains(r.stdout, "sidecar ready") {
		t.Errorf("agent.claude cannot reach its sidecar mcp: %s", r)
	}
	if r := bottlefile(t, dir, "exec", "agent.codex.sidecar.cache", "--", "sh", "-c", "exit 3"); r.code != 3 {
		t.Errorf("exec in a sidecar: want exit 3, got %s", r)
	}

	if r := mustRun(t, dir, "plan"); !strings.Contains(r.stdout, "No changes.") {
		t.Errorf("a second plan is not empty:\n%s", r.stdout)
	}

	// status: every bottle up, the fork booted from claude's snapshot.
	r = mustRun(t, dir, "status")
	for _, line := range strings.Split(r.stdout, "\n") {
		// The bottle's line, not its workloads' (indented).
		if strings.HasPrefix(line, "agent.reviewer ") && !strings.Contains(line, "snapshot snapshot.claude_base") {
			t.Errorf("status does not say the fork booted from snapshot.claude_base: %q", line)
		}
	}
	wantAll(t, "status", r.stdout, "agent.claude", "agent.claude.sidecar.mcp", "agent.codex.gateway", "agent.reviewer")
	if strings.Contains(r.stdout, "exited") || strings.Contains(r.stdout, "not created") {
		t.Errorf("status after apply shows a workload down:\n%s", r.stdout)
	}

	// The README's change: a new command replaces claude, its policy takes
	// a snapshot first, and the fork and codex are left alone.
	src, err := os.ReadFile(filepath.Join(dir, "Bottlefile"))
	if err != nil {
		t.Fatal(err)
	}
	changed := strings.Replace(string(src), `"echo claude ready; exec sleep 86400"`, `"echo claude ready, v2; exec sleep 86400"`, 1)
	if changed == string(src) {
		t.Fatal("the README's change no longer applies to the Bottlefile")
	}
	if err := os.WriteFile(filepath.Join(dir, "Bottlefile"), []byte(changed), 0o644); err != nil {
		t.Fatal(err)
	}
	r = mustRun(t, dir, "plan")
	wantAll(t, "plan after the change", r.stdout,
		"@ agent.claude.snapshot.1 (snapshot)", "-/+ agent.claude (container)",
		"Plan: 1 to add, 0 to change, 1 to destroy, 1 to snapshot.")
	for _, untouched := range []string{"agent.codex ", "agent.reviewer ", "agent.claude.gateway "} {
		if strings.Contains(r.stdout, "# "+untouched) {
			t.Errorf("the change touches %s:\n%s", untouched, r.stdout)
		}
	}

	r = bottlefileWithin(t, 10*time.Minute, dir, "destroy", "-auto-approve", "-include-snapshots")
	if r.code != 0 {
		t.Fatalf("destroy: %s", r)
	}
	wantAll(t, "destroy", r.stdout, "Destroy complete!")
	if left := containersWith(t, cli, drivers.LabelLineage+"="+lineage); len(left) != 0 {
		t.Errorf("containers left after destroy: %d", len(left))
	}
	if left := networksWith(t, cli, drivers.LabelLineage+"="+lineage); len(left) != 0 {
		t.Errorf("networks left after destroy: %d", len(left))
	}
}

// bottlefileWithin runs the binary in dir as bottlefile does, given up to
// timeout.
func bottlefileWithin(t *testing.T, timeout time.Duration, dir string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, append([]string{"-chdir=" + dir}, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.Env = append(os.Environ(), "NO_COLOR=1")
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String()}
	var exitErr *exec.ExitError
	switch {
	case errors.As(err, &exitErr):
		r.code = exitErr.ExitCode()
	case err != nil:
		t.Fatalf("running bottlefile %v: %v", args, err)
	}
	return r
}

// copyExampleTree copies examples/NAME, subdirectories included, into a
// fresh directory.
func copyExampleTree(t *testing.T, name string) string {
	t.Helper()
	dst := t.TempDir()
	src := filepath.Join("..", "..", "examples", name)
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == "rootfs" || d.Name() == ".bottlefile" {
				return filepath.SkipDir
			}
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}
