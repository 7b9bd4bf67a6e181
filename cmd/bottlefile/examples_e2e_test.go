package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/docker/dockertest"
)

// TestE2ECodingAgentsExample walks examples/coding-agents as its README
// does, on the real engine: validate (the runtime's egress_ceiling refuses
// a rule outside it), plan, apply (images built from the example's
// context, no registry; the agent started once its sidecar is healthy),
// status, exec (a sidecar reached by name, an exit code passed through,
// the API key's placeholder in the agent's env), a no-op plan, a rotated
// key (only the gateways change, in place), a change whose plan takes a
// snapshot first, a destroy that keeps the policy's snapshots, an apply
// that resumes from them, and a destroy -include-snapshots that leaves
// nothing carrying the lineage. No container of the lineage ever holds a
// byte of a key in its docker inspect. The allowlisted hosts are never
// contacted.
func TestE2ECodingAgentsExample(t *testing.T) {
	parallel(t)
	cli := dockertest.Client(t)
	ctx := context.Background()
	dir := copyExampleTree(t, "coding-agents")
	stage := exec.Command(filepath.Join("..", "..", "scripts", "quickstart-rootfs.sh"), filepath.Join(dir, "image", "rootfs"))
	if out, err := stage.CombinedOutput(); err != nil {
		t.Fatalf("staging the example's rootfs: %v\n%s", err, out)
	}
	const claudeKey, codexKey, rotatedKey = "sk-ant-e2e-never-shown", "sk-oai-e2e-never-shown", "sk-ant-e2e-rotated"
	keys := []string{claudeKey, codexKey, rotatedKey}
	setDirEnv(t, dir, "BOTTLEFILE_VAR_anthropic_api_key="+claudeKey, "BOTTLEFILE_VAR_openai_api_key="+codexKey)
	noSecrets := func(what, out string) {
		t.Helper()
		for _, k := range keys {
			if strings.Contains(out, k) {
				t.Errorf("%s shows an API key:\n%s", what, out)
			}
		}
	}
	fullHash := regexp.MustCompile(`"[0-9a-f]{64}"`)
	src, err := os.ReadFile(filepath.Join(dir, "Bottlefile"))
	if err != nil {
		t.Fatal(err)
	}
	edit := func(what, from, to string) {
		t.Helper()
		changed := strings.Replace(string(src), from, to, 1)
		if changed == string(src) {
			t.Fatalf("the README's %s no longer applies to the Bottlefile", what)
		}
		if err := os.WriteFile(filepath.Join(dir, "Bottlefile"), []byte(changed), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	restore := func() {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, "Bottlefile"), src, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	mustRun(t, dir, "validate")
	// The runtime's ceiling: a rule outside it is refused before anything runs.
	edit("rule outside the ceiling", `allow = ["api.anthropic.com:443", "github.com:443"]`, `allow = ["api.anthropic.com:443", "github.com:443", "pastebin.com:443"]`)
	if r := bottlefile(t, dir, "validate"); r.code == 0 || !strings.Contains(r.stderr, "Egress rule outside the runtime's ceiling") || !strings.Contains(r.stderr, `egress rule "pastebin.com:443" is outside`) {
		t.Errorf("validate of a rule outside the ceiling: %s", r)
	}
	restore()

	r := mustRun(t, dir, "plan")
	wantAll(t, "plan", r.stdout,
		"+ agent.claude.sidecar.mcp (container)", "+ agent.codex.sidecar.cache (container)",
		`"api.anthropic.com:443"`, `"registry.npmjs.org:443"`, `"files.pythonhosted.org:443"`,
		`+ credential_env = { anthropic = "ANTHROPIC_API_KEY" }`, `+ credential_env = { openai = "OPENAI_API_KEY" }`,
		`host = "api.anthropic.com", name = "anthropic", port = 443, prefix = "", value = (sensitive value)`,
		`header = "authorization", host = "api.openai.com", name = "openai", port = 443, prefix = "Bearer ", value = (sensitive value)`,
		`+ env            = { MCP_URL = "http://mcp:8080" }`,
		`+ healthcheck = { command = ["wget", "-Y", "off", "-q", "-O", "/dev/null", "http://127.0.0.1:8080/"], interval = "1s"`,
		"memory         = 1 GiB",
		"@ snapshot.claude_base (snapshot)", `+ image          = "snapshot.claude_base"`,
		"Plan: 16 to add, 0 to change, 0 to destroy, 1 to snapshot.")
	noSecrets("plan", r.stdout+r.stderr)
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
	bottles := []string{
		"agent.claude", "agent.claude.sidecar.mcp", "agent.claude.gateway",
		"agent.codex", "agent.codex.sidecar.cache", "agent.codex.gateway",
		"agent.reviewer", "agent.reviewer.gateway",
	}
	// running is each workload's running container, and checks that every
	// one is, and that no container of the lineage holds a key.
	running := func(when string) map[string]string {
		t.Helper()
		ids := map[string]string{}
		for _, c := range containersWith(t, cli, drivers.LabelLineage+"="+lineage) {
			if c.State == "running" {
				ids[c.Labels[drivers.LabelAddress]] = c.ID
			}
			_, raw, err := cli.ContainerInspectWithRaw(ctx, c.ID, false)
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range keys {
				if bytes.Contains(raw, []byte(k)) {
					t.Errorf("%s: docker inspect of %s holds an API key", when, c.Labels[drivers.LabelAddress])
				}
			}
		}
		for _, addr := range bottles {
			if ids[addr] == "" {
				t.Errorf("%s: %s is not running (running: %v)", when, addr, ids)
			}
		}
		return ids
	}
	ids := running("after apply")
	// The agent started once its sidecar answered its healthcheck.
	if info, err := cli.ContainerInspect(ctx, ids["agent.claude.sidecar.mcp"]); err != nil || info.State.Health == nil || info.State.Health.Status != "healthy" {
		t.Errorf("agent.claude.sidecar.mcp is not healthy after apply: %v %+v", err, info.State)
	}
	// exec, as the README does: the agent holds the key's placeholder, not
	// the key; it reaches its sidecar by name, inside its bottle; and a
	// command's exit code comes through.
	placeholders := map[string]string{}
	for agent, env := range map[string]string{"agent.claude": "ANTHROPIC_API_KEY", "agent.codex": "OPENAI_API_KEY", "agent.reviewer": "ANTHROPIC_API_KEY"} {
		r := mustRun(t, dir, "exec", agent, "--", "sh", "-c", "echo $"+env)
		noSecrets("exec "+agent, r.stdout)
		if !strings.HasPrefix(r.stdout, "bottlefile-placeholder-") {
			t.Errorf("%s's %s is %q, want its placeholder", agent, env, r.stdout)
		}
		placeholders[agent] = r.stdout
	}
	if placeholders["agent.claude"] == placeholders["agent.reviewer"] {
		t.Errorf("claude and its fork hold the same placeholder %q", placeholders["agent.claude"])
	}
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
	// The agents wrote nothing: the bottle's CA files bottlefile gave them
	// are not counted. An engine that would read every file to tell
	// (drivers/docker/sizes.go) is not asked: no size.
	var st struct {
		Bottles []struct {
			Workloads []struct {
				Address      string `json:"address"`
				WrittenBytes *int64 `json:"written_bytes"`
			} `json:"workloads"`
		} `json:"bottles"`
	}
	measured, _ := engineMeasuresWrites(t, cli)
	r = mustRun(t, dir, "status", "-json")
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil {
		t.Fatalf("status -json: %v\n%s", err, r.stdout)
	}
	for _, b := range st.Bottles {
		for _, w := range b.Workloads {
			if w.Address == "agent.claude" || w.Address == "agent.reviewer" {
				if !measured && w.WrittenBytes != nil {
					t.Errorf("%s wrote %d bytes, want no size from an engine that does not measure", w.Address, *w.WrittenBytes)
				}
				if measured && (w.WrittenBytes == nil || *w.WrittenBytes != 0) {
					t.Errorf("%s wrote %v bytes, want 0 (the CA files are bottlefile's)", w.Address, w.WrittenBytes)
				}
			}
		}
	}

	// The README's rotation: a new key changes the two gateways that
	// inject it, in place; the agents are not touched.
	setDirEnv(t, dir, "BOTTLEFILE_VAR_anthropic_api_key="+rotatedKey)
	r = mustRun(t, dir, "plan")
	wantAll(t, "plan of a rotated key", r.stdout, "~ agent.claude.gateway (gateway)", "~ agent.reviewer.gateway (gateway)",
		"Plan: 0 to add, 2 to change, 0 to destroy.")
	noSecrets("plan of a rotated key", r.stdout+r.stderr)
	r = mustRun(t, dir, "apply", "-auto-approve")
	wantAll(t, "apply of a rotated key", r.stdout, "Apply complete! Objects: 0 added, 2 changed, 0 destroyed.")
	rotated := running("after the rotation")
	for _, addr := range bottles {
		if rotated[addr] != ids[addr] {
			t.Errorf("the rotation replaced %s (%.12s, was %.12s)", addr, rotated[addr], ids[addr])
		}
	}

	// The README's change: a new command replaces claude, its policy takes
	// a snapshot first, and the fork and codex are left alone.
	edit("change", `"echo claude ready; exec sleep 86400"`, `"echo claude ready, v2; exec sleep 86400"`)
	r = mustRun(t, dir, "plan")
	wantAll(t, "plan after the change", r.stdout,
		"@ agent.claude.snapshot.1 (snapshot)", "-/+ agent.claude (container)",
		"Plan: 1 to add, 0 to change, 1 to destroy, 1 to snapshot.")
	for _, untouched := range []string{"agent.codex ", "agent.reviewer ", "agent.claude.gateway "} {
		if strings.Contains(r.stdout, "# "+untouched) {
			t.Errorf("the change touches %s:\n%s", untouched, r.stdout)
		}
	}
	restore()

	// The README's upgrade: the agent, as its own user, writes its
	// workdir and its home; a new CLI in the Dockerfile boots the new
	// image with both carried over from the snapshot taken first.
	r = mustRun(t, dir, "exec", "agent.claude", "--", "sh", "-c",
		`id -u; echo draft > /workspace/notes.md; mkdir -p ~/.claude && echo "{}" > ~/.claude/settings.json && ln -s notes.md /workspace/latest`)
	if r.stdout != "1000\n" {
		t.Errorf("the agent writing its workdir and home: %s", r)
	}
	dockerfile, err := os.ReadFile(filepath.Join(dir, "image", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "image", "Dockerfile"), append(dockerfile, "ENV AGENT_CLI_VERSION=2\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	r = mustRun(t, dir, "plan")
	wantAll(t, "plan of the upgrade", r.stdout,
		"it boots the image built from ./image with /workspace, /home/agent from agent.claude.snapshot.1, taken just before",
		"it boots the image built from ./image with /workspace, /home/agent from agent.codex.snapshot.1, taken just before",
		"-/+ agent.claude (container)", "-/+ agent.codex (container)")
	if strings.Contains(r.stdout, "# agent.reviewer ") {
		t.Errorf("the upgrade touches the fork:\n%s", r.stdout)
	}
	r = bottlefileWithin(t, 10*time.Minute, dir, "apply", "-auto-approve", "-wait=0")
	if r.code != 0 {
		t.Fatalf("apply of the upgrade: %s", r)
	}
	noSecrets("apply of the upgrade", r.stdout+r.stderr)
	r = mustRun(t, dir, "exec", "agent.claude", "--", "sh", "-c",
		`echo $AGENT_CLI_VERSION; stat -c "%U %a" /workspace/notes.md ~/.claude/settings.json; cat ~/.claude/settings.json; readlink /workspace/latest; touch /workspace/after ~/after`)
	if want := "2\nagent 644\nagent 644\n{}\nnotes.md\n"; r.stdout != want {
		t.Errorf("claude after the upgrade: %q, want %q\n%s", r.stdout, want, r)
	}

	// destroy commits each agent with a policy and keeps those snapshots;
	// the next apply resumes from them.
	r = bottlefileWithin(t, 10*time.Minute, dir, "destroy", "-auto-approve")
	if r.code != 0 {
		t.Fatalf("destroy: %s", r)
	}
	wantAll(t, "destroy", r.stdout, "# kept: agent.claude.snapshot.2, taken by this plan", "# kept: agent.codex.snapshot.2, taken by this plan",
		"Destroy complete! Objects: 0 added, 0 changed, 17 destroyed, 2 snapshots taken")
	if measured && strings.Contains(r.stdout, "written inside it") {
		t.Errorf("destroy says it discards what the fork wrote, which is only its CA files:\n%s", r.stdout)
	} else if !measured && !strings.Contains(r.stdout, "this destroy discards whatever was written inside it since ") {
		t.Errorf("destroy, on an engine that does not measure writes, does not warn that the fork's are discarded:\n%s", r.stdout)
	}
	if left := containersWith(t, cli, drivers.LabelLineage+"="+lineage); len(left) != 0 {
		t.Errorf("containers left after destroy: %d", len(left))
	}
	// -wait=0: the workloads are not watched for an early
	// exit (the first apply was), which keeps this test shorter.
	r = bottlefileWithin(t, 10*time.Minute, dir, "apply", "-auto-approve", "-wait=0")
	if r.code != 0 {
		t.Fatalf("apply after destroy: %s", r)
	}
	wantAll(t, "apply after destroy", r.stdout, "it resumes from agent.claude.snapshot.2", "it resumes from agent.codex.snapshot.2",
		"Apply complete! Objects: 16 added, 0 changed, 0 destroyed, 1 snapshot taken.")
	noSecrets("apply after destroy", r.stdout+r.stderr)
	running("after the apply that resumed")
	r = mustRun(t, dir, "status")
	for _, line := range strings.Split(r.stdout, "\n") {
		if strings.HasPrefix(line, "agent.claude ") && !strings.Contains(line, "snapshot agent.claude.snapshot.2") {
			t.Errorf("status does not say claude resumed from agent.claude.snapshot.2: %q", line)
		}
	}

	r = bottlefileWithin(t, 10*time.Minute, dir, "destroy", "-auto-approve", "-include-snapshots")
	if r.code != 0 {
		t.Fatalf("destroy -include-snapshots: %s", r)
	}
	wantAll(t, "destroy -include-snapshots", r.stdout, "Destroy complete!")
	if left := containersWith(t, cli, drivers.LabelLineage+"="+lineage); len(left) != 0 {
		t.Errorf("containers left after destroy: %d", len(left))
	}
	if left := networksWith(t, cli, drivers.LabelLineage+"="+lineage); len(left) != 0 {
		t.Errorf("networks left after destroy: %d", len(left))
	}
	imgs, err := cli.ImageList(ctx, image.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", drivers.LabelLineage+"="+lineage))})
	if err != nil {
		t.Fatal(err)
	}
	if len(imgs) != 0 {
		t.Errorf("images left after destroy -include-snapshots: %d", len(imgs))
	}
	// The state directory keeps no key either.
	filepath.WalkDir(filepath.Join(dir, ".bottlefile"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if b, err := os.ReadFile(p); err == nil {
				for _, k := range keys {
					if bytes.Contains(b, []byte(k)) {
						t.Errorf("%s holds an API key", p)
					}
				}
			}
		}
		return nil
	})
}

// bottlefileWithin runs the binary in dir as bottlefile does, given up to
// timeout.
func bottlefileWithin(t *testing.T, timeout time.Duration, dir string, args ...string) result {
	t.Helper()
	r, _, err := runBinary(timeout, dir, nil, args...)
	if err != nil {
		t.Fatalf("running bottlefile %v: %v", args, err)
	}
	return r
}

// runBinary runs the binary in dir with extra environment, given up to
// timeout. It does not touch a test, so goroutines may call it; err is set
// only when the binary could not be run, timedOut when it ran over.
func runBinary(timeout time.Duration, dir string, env []string, args ...string) (r result, timedOut bool, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, append([]string{"-chdir=" + dir}, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.Env = append(append(append(os.Environ(), "NO_COLOR=1"), envFor(dir)...), env...)
	err = cmd.Run()
	r = result{stdout: out.String(), stderr: errb.String()}
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		r.code, err = exitErr.ExitCode(), nil
	}
	return r, ctx.Err() != nil, err
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
