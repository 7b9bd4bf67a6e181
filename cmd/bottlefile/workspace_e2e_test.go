package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/docker/docker/api/types/container"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/docker/dockertest"
	"github.com/bottlefile/bottlefile/drivers/swarm/swarmtest"
)

// workspaceBottlefile is a built agent running as a non-root user whose
// work is /workspace; %s is the snapshot_policy block, or nothing.
const workspaceBottlefile = `
agent "coder" {
  build {
    context = "./agent"
  }
  command   = ["sleep", "3600"]
  user      = "1000:1000"
  workdir   = "/workspace"
  workspace = ["/workspace"]
%s}
`

// workspaceContext writes the agent's build context: FROM base, with
// /workspace its user's, and, from version 2 on, a marker file of the
// version (the new CLI an upgrade brings).
func workspaceContext(t *testing.T, dir, base string, version int) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	dockerfile := "FROM " + base + "\nRUN mkdir -p /workspace && chown 1000:1000 /workspace\n"
	if version > 1 {
		dockerfile += "COPY marker /etc/agent-version\n"
	}
	files := map[string]string{"Dockerfile": dockerfile, "marker": fmt.Sprintf("agent %d\n", version)}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// upgradeWorkspace has the agent in dir write its work (files of its own,
// a mode, a symlink, a nested directory, and scratch outside its
// workspace), upgrades its build context (FROM base) to version 2, and
// checks the plan (wantPlan, a replacement of the agent's kind) and what
// runs after apply: the new image's marker, the work with its owners and
// modes, the symlink, no scratch (the new image, not the old filesystem),
// the agent still writing its workspace, and then a plan with nothing to do.
func upgradeWorkspace(t *testing.T, dir, base, wantPlan, kind string) {
	t.Helper()
	mustRun(t, dir, "exec", "agent.coder", "--", "sh", "-c",
		"echo progress > notes.md && chmod 640 notes.md && ln -s notes.md latest && mkdir -p src/pkg && echo code > src/pkg/main.go && echo scratch > /tmp/scratch")
	stat := []string{"exec", "agent.coder", "--", "stat", "-c", "%n %u:%g %a", "/workspace", "/workspace/notes.md", "/workspace/src/pkg/main.go"}
	before := mustRun(t, dir, stat...).stdout

	workspaceContext(t, filepath.Join(dir, "agent"), base, 2)
	r := mustRun(t, dir, "plan")
	wantAll(t, "plan", r.stdout, wantPlan, "-/+ agent.coder ("+kind+")")
	r = mustRun(t, dir, "apply", "-auto-approve")
	wantAll(t, "apply", r.stdout, "carried /workspace over from")

	if got := mustRun(t, dir, "exec", "agent.coder", "--", "cat", "/etc/agent-version").stdout; got != "agent 2\n" {
		t.Errorf("the new image's marker: %q", got)
	}
	after := mustRun(t, dir, stat...).stdout
	if after != before || !strings.Contains(after, "/workspace/notes.md 1000:1000 640") {
		t.Errorf("owners and modes before the upgrade:\n%safter:\n%s", before, after)
	}
	if got := mustRun(t, dir, "exec", "agent.coder", "--", "sh", "-c", "readlink latest; cat latest; cat src/pkg/main.go").stdout; got != "notes.md\nprogress\ncode\n" {
		t.Errorf("the symlink and files after the upgrade: %q", got)
	}
	if r := bottlefile(t, dir, "exec", "agent.coder", "--", "test", "-e", "/tmp/scratch"); r.code == 0 {
		t.Errorf("/tmp/scratch, outside the workspace, survived: the agent booted the old filesystem")
	}
	mustRun(t, dir, "exec", "agent.coder", "--", "touch", "/workspace/after-upgrade")
	wantNoChanges(t, dir, "plan after the upgrade")
}

// TestE2EWorkspaceImageUpgrade: the agent's Dockerfile changes (a marker
// file added: a new CLI version), and apply boots the new image with the
// old /workspace carried over: the marker and the agent's own files are
// both there, with their owner (uid 1000) and mode, and a symlink inside
// the workspace survives; what the agent wrote outside its workspace is
// not (the new image, not the old filesystem). With a snapshot_policy
// before replace, the workspace comes from the snapshot taken first;
// without one, from the replaced container, set aside until the new one
// has it. Nothing is left behind: no carrier container, no container set
// aside.
func TestE2EWorkspaceImageUpgrade(t *testing.T) {
	parallel(t)
	cli := dockertest.Client(t)
	base := dockertest.BusyboxImage(t, cli)
	for _, tc := range []struct {
		name, policy, wantPlan string
	}{
		{"policy", "  snapshot_policy {\n    before = [\"replace\"]\n  }\n",
			"it boots the image built from ./agent with /workspace from agent.coder.snapshot.1, taken just before"},
		{"no policy", "",
			"it boots the image built from ./agent with /workspace carried over from the current workload"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel() // its own lineage; the parent holds the place
			dir := t.TempDir()
			workspaceContext(t, filepath.Join(dir, "agent"), base, 1)
			writeBottlefile(t, dir, workspaceBottlefile, tc.policy)
			mustRun(t, dir, "apply", "-auto-approve")
			lineage := lineageOf(t, cli, dir)

			upgradeWorkspace(t, dir, base, tc.wantPlan, "container")
			var names []string
			for _, c := range containersWith(t, cli, drivers.LabelLineage+"="+lineage) {
				names = append(names, c.Names...)
			}
			if len(names) != 1 || strings.HasSuffix(names[0], "-replaced") {
				t.Errorf("containers of the lineage after the upgrade: %v", names)
			}
			for _, c := range containersWith(t, cli, "io.bottlefile.carry") {
				if strings.HasPrefix(c.Labels["io.bottlefile.carry"], lineage) {
					t.Errorf("a carrier container was left: %s", c.ID)
				}
			}
			mustRun(t, dir, "destroy", "-auto-approve", "-include-snapshots")
		})
	}
}

// e2eSwarmWorkspaceImageUpgrade is TestE2EWorkspaceImageUpgrade on the
// swarm fixture: the agent's built image (pushed to the registry) gets a
// marker file, and the new service runs an image the node's engine
// composed, the new image with the old /workspace, from the policy's
// snapshot or from the replaced service's task. The composed images go
// from the registry with the services that ran them.
func e2eSwarmWorkspaceImageUpgrade(t *testing.T) {
	cli := dockertest.Client(t)
	f := swarmtest.Start(t)
	for _, tc := range []struct {
		name, policy, wantPlan string
	}{
		{"policy", "  snapshot_policy {\n    before = [\"replace\"]\n  }\n",
			"it boots the image built from ./agent with /workspace from agent.coder.snapshot.1, taken just before"},
		{"no policy", "",
			"it boots the image built from ./agent with /workspace carried over from the current workload"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel() // its own lineage; no fault runs until both end
			dir := t.TempDir()
			workspaceContext(t, filepath.Join(dir, "agent"), f.Busybox, 1)
			config := swarmRuntime(f, "fleet") + strings.Replace(workspaceBottlefile, "agent \"coder\" {\n", "agent \"coder\" {\n  runtime = runtime.fleet\n", 1)
			writeBottlefile(t, dir, config, tc.policy)
			mustRun(t, dir, "apply", "-auto-approve")
			lineage := lineageOf(t, cli, dir)
			f.Cleanup(t, lineage)
			t.Cleanup(func() { bottlefile(t, dir, "destroy", "-auto-approve", "-include-snapshots") })

			upgradeWorkspace(t, dir, f.Busybox, tc.wantPlan, "service")
			mustRun(t, dir, "destroy", "-auto-approve", "-include-snapshots")
			for _, tag := range registryTags(t, f, lineage) {
				if strings.Contains(tag, "-carry:") {
					t.Errorf("a composed image is left in the registry: %s", tag)
				}
			}
		})
	}
}

// TestE2EWorkspaceCutOff: an apply cut off after it set the replaced
// container aside (stopped, renamed NAME-replaced) and before it made the
// new one leaves the old container, still the recorded one, holding the
// work; the next plan carries the workspace from it again, and the apply
// converges with nothing left over.
func TestE2EWorkspaceCutOff(t *testing.T) {
	parallel(t)
	cli := dockertest.Client(t)
	base := dockertest.BusyboxImage(t, cli)
	dir := t.TempDir()
	workspaceContext(t, filepath.Join(dir, "agent"), base, 1)
	writeBottlefile(t, dir, workspaceBottlefile, "")
	mustRun(t, dir, "apply", "-auto-approve")
	lineage := lineageOf(t, cli, dir)
	mustRun(t, dir, "exec", "agent.coder", "--", "sh", "-c", "echo progress > notes.md")

	// What setAside does, and then the process dies.
	ctrs := containersWith(t, cli, drivers.LabelLineage+"="+lineage, drivers.LabelAddress+"=agent.coder")
	if len(ctrs) != 1 {
		t.Fatalf("want one agent container, got %d", len(ctrs))
	}
	timeout := 5
	if err := cli.ContainerStop(t.Context(), ctrs[0].ID, container.StopOptions{Timeout: &timeout}); err != nil {
		t.Fatal(err)
	}
	name := strings.TrimPrefix(ctrs[0].Names[0], "/")
	if err := cli.ContainerRename(t.Context(), ctrs[0].ID, name+"-replaced"); err != nil {
		t.Fatal(err)
	}

	workspaceContext(t, filepath.Join(dir, "agent"), base, 2)
	r := mustRun(t, dir, "plan")
	wantAll(t, "plan after the cut-off", r.stdout, "with /workspace carried over from the current workload")
	mustRun(t, dir, "apply", "-auto-approve")
	if got := mustRun(t, dir, "exec", "agent.coder", "--", "sh", "-c", "cat /etc/agent-version /workspace/notes.md").stdout; got != "agent 2\nprogress\n" {
		t.Errorf("after the apply that followed the cut-off: %q", got)
	}
	left := containersWith(t, cli, drivers.LabelLineage+"="+lineage)
	if len(left) != 1 || left[0].Names[0] != "/"+name {
		t.Errorf("containers of the lineage: %+v", left)
	}
	wantNoChanges(t, dir, "plan after the apply that followed the cut-off")
	mustRun(t, dir, "destroy", "-auto-approve", "-include-snapshots")
}

// e2eSwarmWorkspaceMigrateUpgrade: in one plan an agent moves from docker
// to the swarm and its image changes (the swarm runs the registry's
// busybox): it migrates through its snapshot and boots the new image
// there with its workspace carried from the moved snapshot, and nothing
// it wrote elsewhere.
func e2eSwarmWorkspaceMigrateUpgrade(t *testing.T) {
	cli := dockertest.Client(t)
	image := dockertest.BusyboxImage(t, cli)
	f := swarmtest.Start(t)
	dir := t.TempDir()
	config := strings.Replace(migrateSwarmConfig, `  command = ["sleep", "600"]`, "  command   = [\"sleep\", \"600\"]\n  workspace = [\"/root\"]", 1)
	runtime := swarmRuntime(f, "fleet")
	writeBottlefile(t, dir, config, runtime, image, "local")
	mustRun(t, dir, "apply", "-auto-approve")
	lineage := lineageOf(t, cli, dir)
	f.Cleanup(t, lineage)
	t.Cleanup(func() { bottlefile(t, dir, "destroy", "-auto-approve", "-include-snapshots") })
	mustRun(t, dir, "exec", "agent.coder", "--", "sh", "-c", "echo moved > /root/notes && echo scratch > /tmp/scratch")

	writeBottlefile(t, dir, config, runtime, f.Busybox, "fleet")
	r := mustRun(t, dir, "plan")
	wantAll(t, "the plan to the swarm", r.stdout, "=> agent.coder (service)",
		"its image changed: it boots image "+f.Busybox+" with /root from agent.coder.snapshot.1")
	mustRun(t, dir, "apply", "-auto-approve")
	if got := mustRun(t, dir, "exec", "agent.coder", "--", "cat", "/root/notes").stdout; got != "moved\n" {
		t.Errorf("on the swarm /root/notes = %q", got)
	}
	if r := bottlefile(t, dir, "exec", "agent.coder", "--", "test", "-e", "/tmp/scratch"); r.code == 0 {
		t.Errorf("/tmp/scratch, outside the workspace, moved too: the agent booted the snapshot, not the new image")
	}
	wantNoChanges(t, dir, "the plan after the move")
	mustRun(t, dir, "destroy", "-auto-approve", "-include-snapshots")
	for _, tag := range registryTags(t, f, lineage) {
		t.Errorf("left in the registry: %s", tag)
	}
}

// TestE2EWorkspaceFromImportedSnapshot: a snapshot exported from one state
// and imported into another whose agent has a newer image gives that
// image with the workspace carried from the snapshot, read through a
// container of it that is removed after.
func TestE2EWorkspaceFromImportedSnapshot(t *testing.T) {
	parallel(t)
	cli := dockertest.Client(t)
	base := dockertest.BusyboxImage(t, cli)
	policy := "  snapshot_policy {\n    before = [\"replace\"]\n  }\n"
	src := t.TempDir()
	workspaceContext(t, filepath.Join(src, "agent"), base, 1)
	writeBottlefile(t, src, workspaceBottlefile, policy)
	mustRun(t, src, "apply", "-auto-approve")
	lineage := lineageOf(t, cli, src)
	mustRun(t, src, "exec", "agent.coder", "--", "sh", "-c", "echo progress > notes.md && echo scratch > /tmp/scratch")
	mustRun(t, src, "apply", "-auto-approve", "-replace=agent.coder")
	tar := filepath.Join(t.TempDir(), "coder.tar")
	mustRun(t, src, "snapshot", "export", "agent.coder.snapshot.1", "-o", tar)
	mustRun(t, src, "destroy", "-auto-approve", "-include-snapshots")

	dst := t.TempDir()
	workspaceContext(t, filepath.Join(dst, "agent"), base, 2)
	writeBottlefile(t, dst, workspaceBottlefile, policy)
	mustRun(t, dst, "snapshot", "import", tar)
	dstLineage, _ := readState(t, dst)
	dockertest.Cleanup(t, cli, dstLineage)
	r := mustRun(t, dst, "plan")
	wantAll(t, "plan after the import", r.stdout, "it boots the image built from ./agent with /workspace from agent.coder.snapshot.1 (the image that snapshot was taken of is not known")
	mustRun(t, dst, "apply", "-auto-approve")
	if got := mustRun(t, dst, "exec", "agent.coder", "--", "sh", "-c", "cat /etc/agent-version notes.md; stat -c %u notes.md").stdout; got != "agent 2\nprogress\n1000\n" {
		t.Errorf("after the import: %q", got)
	}
	if r := bottlefile(t, dst, "exec", "agent.coder", "--", "test", "-e", "/tmp/scratch"); r.code == 0 {
		t.Errorf("/tmp/scratch came along: the agent booted the snapshot, not its image")
	}
	for _, c := range containersWith(t, cli, "io.bottlefile.carry") {
		if strings.HasPrefix(c.Labels["io.bottlefile.carry"], dstLineage) || strings.HasPrefix(c.Labels["io.bottlefile.carry"], lineage) {
			t.Errorf("a carrier container was left: %s", c.ID)
		}
	}
	mustRun(t, dst, "destroy", "-auto-approve", "-include-snapshots")
}
