package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/docker/dockertest"
)

// refactorBottlefile is what a team writes: a built agent whose workspace
// is its work, a sidecar, a sensitive variable in its env, egress with a
// credential, and a policy that snapshots before a replace or destroy.
// %[1]s is the runtime block (or none), %[2]s the agent's name, %[3]s its
// runtime attribute (or none), %[4]s a moved block (or none), %[5]q the
// sidecar's image. The credential's host is never contacted.
const refactorBottlefile = `
variable "key" {
  type      = string
  sensitive = true
}
%[1]s
agent %[2]q {
  %[3]s
  build {
    context = "./agent"
  }
  command   = ["sleep", "3600"]
  env       = { API_TOKEN = var.key }
  workdir   = "/workspace"
  workspace = ["/workspace"]

  egress {
    allow = ["api.refactor.test:443"]
    credential "api" {
      host   = "api.refactor.test"
      header = "x-api-key"
      value  = var.key
      env    = "API_KEY"
    }
  }

  sidecar "cache" {
    image   = %[5]q
    command = ["sleep", "3600"]
  }

  snapshot_policy {
    before    = ["replace", "destroy"]
    keep_last = 3
  }
}
%[4]s`

// TestE2EWorkSurvivesRefactor is issue 24's combination: one plan renames
// the agent (a moved block), upgrades its image (its build context
// changes) and gives its runtime a name (the implicit default's engine,
// declared); after apply the new image runs with the old workspace, its
// owners and modes intact. Then destroy (its policy keeps a snapshot),
// apply again (it resumes with the work), and destroy
// -include-snapshots, after which nothing of the lineage is left: no
// container, network or image, no bottle CA.
func TestE2EWorkSurvivesRefactor(t *testing.T) {
	parallel(t)
	cli := dockertest.Client(t)
	ctx := context.Background()
	base := dockertest.BusyboxImage(t, cli)
	dir := t.TempDir()
	secret := trustSecret(t)
	env := []string{"BOTTLEFILE_VAR_key=" + secret}
	buildDir := filepath.Join(dir, "agent")
	writeContext := func(version string) {
		t.Helper()
		if err := os.MkdirAll(buildDir, 0o755); err != nil {
			t.Fatal(err)
		}
		files := map[string]string{
			"Dockerfile": "FROM " + base + "\nCOPY version /etc/agent-version\nRUN mkdir -p /workspace\n",
			"version":    version + "\n",
		}
		for name, body := range files {
			if err := os.WriteFile(filepath.Join(buildDir, name), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	write := func(runtimeBlock, name, runtimeAttr, moved string) {
		t.Helper()
		writeBottlefile(t, dir, refactorBottlefile, runtimeBlock, name, runtimeAttr, moved, base)
	}
	run := func(args ...string) result {
		t.Helper()
		return trustMustRun(t, dir, env, args...)
	}
	agentID := func(addr string) string {
		t.Helper()
		for _, c := range containersWith(t, cli, drivers.LabelLineage+"="+lineageOf(t, cli, dir)) {
			if c.State == "running" && c.Labels[drivers.LabelAddress] == addr {
				return c.ID
			}
		}
		return ""
	}

	writeContext("v1")
	write("", "coder", "", "")
	run("apply", "-auto-approve")
	lineage := lineageOf(t, cli, dir)
	coder := ""
	for _, c := range containersWith(t, cli, drivers.LabelLineage+"="+lineage, drivers.LabelAddress+"=agent.coder") {
		coder = c.ID
	}
	if coder == "" {
		t.Fatal("agent.coder is not running after the first apply")
	}
	// The agent's work: a file owned by another user with its own mode, a
	// directory and a symlink into it.
	work := "mkdir -p /workspace/src && echo 'the agent wrote this' > /workspace/src/notes.txt && " +
		"chown -R 1234:2345 /workspace/src && chmod 640 /workspace/src/notes.txt && ln -s src/notes.txt /workspace/latest"
	if out, code := dockertest.Exec(t, cli, coder, "sh", "-c", work); code != 0 {
		t.Fatalf("writing the agent's work: exit %d: %s", code, out)
	}
	checkWork := func(when, id string) {
		t.Helper()
		out, code := dockertest.Exec(t, cli, id, "sh", "-c",
			"cat /workspace/latest && stat -c '%u:%g %a' /workspace/src/notes.txt && readlink /workspace/latest && cat /etc/agent-version")
		if code != 0 {
			t.Errorf("%s: the agent's work is not there (exit %d):\n%s", when, code, out)
			return
		}
		wantAll(t, when, out, "the agent wrote this", "1234:2345 640", "src/notes.txt")
	}

	// One plan: renamed, upgraded, and its runtime named.
	writeContext("v2")
	write(`
runtime "local" {
  driver = "docker"
}
`, "dev", "runtime = runtime.local", `
moved {
  from = agent.coder
  to   = agent.dev
}
`)
	r := run("plan")
	wantAll(t, "plan of the refactor", r.stdout, "agent.coder has moved to agent.dev", "agent.dev.snapshot.1", "/workspace")
	if strings.Contains(r.stdout, secret) || strings.Contains(r.stderr, secret) {
		t.Errorf("the plan shows the sensitive value:\n%s", r)
	}
	// Only the upgraded container is replaced: nothing is destroyed.
	for _, line := range strings.Split(r.stdout, "\n") {
		if strings.HasSuffix(line, " will be destroyed") {
			t.Errorf("the refactor destroys something: %q\n%s", line, r.stdout)
		}
	}
	run("apply", "-auto-approve")
	dev := agentID("agent.dev")
	if dev == "" {
		dev = agentID("agent.coder") // a moved container may keep its old label
	}
	if dev == "" {
		t.Fatal("the renamed agent is not running")
	}
	checkWork("after the refactor", dev)
	if out, _ := dockertest.Exec(t, cli, dev, "cat", "/etc/agent-version"); strings.TrimSpace(out) != "v2" {
		t.Errorf("after the upgrade the agent runs image version %q, want v2", strings.TrimSpace(out))
	}
	if r := run("plan"); !strings.Contains(r.stdout, "No changes.") {
		t.Errorf("the plan after the refactor is not empty:\n%s", r.stdout)
	}

	// Destroy keeps the policy's snapshot; apply again resumes with the work.
	r = run("destroy", "-auto-approve")
	wantAll(t, "destroy", r.stdout, "# kept: agent.dev.snapshot.")
	r = run("apply", "-auto-approve")
	wantAll(t, "apply after destroy", r.stdout, "resumes from agent.dev.snapshot.")
	again := agentID("agent.dev")
	if again == "" {
		t.Fatal("agent.dev is not running after the apply that resumed")
	}
	checkWork("after destroy and apply", again)

	run("destroy", "-auto-approve", "-include-snapshots")
	deadline := time.Now().Add(10 * time.Second)
	for {
		left := len(containersWith(t, cli, drivers.LabelLineage+"="+lineage)) + len(networksWith(t, cli, drivers.LabelLineage+"="+lineage))
		imgs, err := cli.ImageList(ctx, image.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", drivers.LabelLineage+"="+lineage))})
		if err != nil {
			t.Fatal(err)
		}
		left += len(imgs)
		if left == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("after destroy -include-snapshots, %d objects of the lineage are left", left)
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if entries, _ := os.ReadDir(filepath.Join(dir, ".bottlefile", "credentials")); len(entries) != 0 {
		t.Errorf("bottle CA files are left after destroy: %v", fmt.Sprint(entries))
	}
}
