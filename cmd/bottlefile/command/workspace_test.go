package command

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/bottlefile/bottlefile/drivers/docker"
	"github.com/bottlefile/bottlefile/drivers/drivertest"
	"github.com/bottlefile/bottlefile/drivers/smolvm"
)

// workspaceAgent is an agent with an image, a workspace and, when
// policy, a snapshot policy before replace.
func workspaceAgent(image, workspace string, policy bool) string {
	s := fmt.Sprintf("agent \"coder\" {\n  image   = %q\n  command = [\"sleep\", \"600\"]\n", image)
	if workspace != "" {
		s += "  workspace = " + workspace + "\n"
	}
	if policy {
		s += "  snapshot_policy {\n    before = [\"replace\"]\n  }\n"
	}
	return s + "}\n"
}

// TestWorkspaceCarriedOver: an image upgrade of an agent with a workspace
// boots the new image (not the snapshot) with the workspace paths and
// nothing else, whether a policy snapshot is taken first or the files
// come from the container being replaced, which then goes only after
// the new one is created. Without a workspace the agent resumes the
// snapshot, and the plan says the new image is not used.
func TestWorkspaceCarriedOver(t *testing.T) {
	for _, tc := range []struct {
		name      string
		workspace string
		policy    bool
		wantFiles []string
		wantPlan  string
		bootImage bool // boots the snapshot, not the new image
	}{
		{"policy", `["/workspace", "/root/.claude"]`, true, []string{"/workspace/notes.md", "/root/.claude/settings.json"},
			"it boots image acme/agent:1.5 with /workspace, /root/.claude from agent.coder.snapshot.1, taken just before", false},
		{"no policy", `["/workspace"]`, false, []string{"/workspace/notes.md"},
			"it boots image acme/agent:1.5 with /workspace carried over from the current workload", false},
		{"no workspace", "", true, []string{"/workspace/notes.md", "/root/.claude/settings.json", "/tmp/scratch"},
			"so image acme/agent:1.5 is not used: declare workspace", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorkspace(t)
			w.write(workspaceAgent("acme/agent:1.4", tc.workspace, tc.policy))
			w.must("apply", "-auto-approve")
			for _, f := range []string{"/workspace/notes.md", "/root/.claude/settings.json", "/tmp/scratch"} {
				w.fake.WriteFile(w.lineage(), "agent.coder", f)
			}
			w.write(workspaceAgent("acme/agent:1.5", tc.workspace, tc.policy))
			if out := w.must("plan"); !strings.Contains(out, tc.wantPlan) {
				t.Errorf("plan lacks %q:\n%s", tc.wantPlan, out)
			}
			w.fake.ApplyRequests = nil
			w.must("apply", "-auto-approve")
			if got := w.workloadFiles(); !slices.Equal(got, tc.wantFiles) {
				t.Errorf("files after the upgrade: %v, want %v", got, tc.wantFiles)
			}
			var order []string
			for _, r := range w.fake.ApplyRequests {
				if r.Object.Addr != "agent.coder" {
					continue
				}
				order = append(order, string(r.Op))
				if r.Op == "create" && (r.BootImage != "") != tc.bootImage {
					t.Errorf("create boots %q", r.BootImage)
				}
			}
			// Without a policy snapshot the old container holds the work
			// until the new one has it: the create comes first.
			want := []string{"delete", "create"}
			if !tc.policy {
				want = []string{"create", "delete"}
			}
			if !slices.Equal(order, want) {
				t.Errorf("steps on agent.coder: %v, want %v", order, want)
			}
			if out := w.must("plan"); !strings.Contains(out, "No changes.") {
				t.Errorf("not converged:\n%s", out)
			}

			// Changing the workspace list replaces nothing.
			w.write(workspaceAgent("acme/agent:1.5", `["/workspace", "/home/agent"]`, tc.policy))
			if out := w.must("plan"); !strings.Contains(out, "No changes.") {
				t.Errorf("a workspace change plans:\n%s", out)
			}
		})
	}
}

// TestWorkspaceFromImportedSnapshot: a snapshot exported from one
// machine and imported on another, where the agent has a newer image and
// a workspace, gives the new image with the workspace carried from it.
func TestWorkspaceFromImportedSnapshot(t *testing.T) {
	src := newWorkspace(t)
	src.write(workspaceAgent("acme/agent:1.4", `["/workspace"]`, true))
	src.must("apply", "-auto-approve")
	src.fake.WriteFile(src.lineage(), "agent.coder", "/workspace/notes.md")
	src.fake.WriteFile(src.lineage(), "agent.coder", "/tmp/scratch")
	src.must("apply", "-auto-approve", "-replace=agent.coder")
	file := filepath.Join(t.TempDir(), "coder.tar")
	src.mustSnapshot("export", "agent.coder.snapshot.1", "-o", file)

	dst := newWorkspace(t)
	dst.write(workspaceAgent("acme/agent:1.5", `["/workspace"]`, true))
	dst.mustSnapshot("import", file)
	want := "it boots image acme/agent:1.5 with /workspace from agent.coder.snapshot.1 (the image that snapshot was taken of is not known"
	if out := dst.must("plan"); !strings.Contains(out, want) {
		t.Errorf("plan lacks %q:\n%s", want, out)
	}
	dst.must("apply", "-auto-approve")
	if got := dst.workloadFiles(); !slices.Equal(got, []string{"/workspace/notes.md"}) {
		t.Errorf("files after the import: %v", got)
	}
}

// TestWorkspaceFork: a fork with an image of its own and a workspace
// boots its image with the workspace of the snapshot it names; a fork
// without one boots the snapshot, as before.
func TestWorkspaceFork(t *testing.T) {
	w := newWorkspace(t)
	base := workspaceAgent("acme/agent:1.4", `["/workspace"]`, false) + `
snapshot "seed" {
  agent = agent.coder
}
`
	w.write(base)
	w.must("apply", "-auto-approve")
	w.fake.WriteFile(w.lineage(), "agent.coder", "/workspace/notes.md")
	w.fake.WriteFile(w.lineage(), "agent.coder", "/tmp/scratch")
	w.must("apply", "-auto-approve", "-replace=snapshot.seed")
	w.write(base + `
agent "fork" {
  from_snapshot = snapshot.seed
  image         = "acme/agent:1.5"
  command       = ["sleep", "600"]
  workspace     = ["/workspace"]
}

agent "clone" {
  from_snapshot = snapshot.seed
  command       = ["sleep", "600"]
  workspace     = ["/workspace"]
}
`)
	out := w.must("plan")
	if want := "it boots image acme/agent:1.5 with /workspace from snapshot.seed"; !strings.Contains(out, want) {
		t.Errorf("plan lacks %q:\n%s", want, out)
	}
	w.must("apply", "-auto-approve")
	if got := w.fake.Files(w.lineage(), "agent.fork"); !slices.Equal(got, []string{"/workspace/notes.md"}) {
		t.Errorf("the fork has %v", got)
	}
	if got := w.fake.Files(w.lineage(), "agent.clone"); !slices.Equal(got, []string{"/workspace/notes.md", "/tmp/scratch"}) {
		t.Errorf("the clone has %v", got)
	}
}

// TestWorkspaceValidate: workspace paths are checked at the element.
func TestWorkspaceValidate(t *testing.T) {
	for _, tc := range []struct{ workspace, want string }{
		{`["workspace"]`, "is not an absolute path"},
		{`["/"]`, "cannot be the whole filesystem"},
		{`["/workspace/../etc"]`, "is not a clean path"},
		{`["/a", "/a"]`, "is listed twice"},
		{`"/workspace"`, "list of string required"},
	} {
		w := newWorkspace(t)
		w.write(workspaceAgent("acme/agent:1.4", tc.workspace, false))
		code, out, errOut := w.run("validate")
		if code == 0 || !strings.Contains(out+errOut, tc.want) || !strings.Contains(out+errOut, "workspace = ") {
			t.Errorf("validate of workspace = %s: exit %d\n%s%s", tc.workspace, code, out, errOut)
		}
	}
}

// TestWorkspaceMigration: an agent whose runtime and image change in one
// plan migrates through its snapshot and boots the new image there with
// its workspace carried from the moved snapshot.
func TestWorkspaceMigration(t *testing.T) {
	w := newWorkspace(t)
	other := &drivertest.Fake{DriverName: "smolvm"}
	w.extra = map[string]*drivertest.Fake{"smolvm": other}
	config := func(runtime, image string) string {
		return `
runtime "here" {
  driver = "docker"
}

runtime "there" {
  driver = "smolvm"
}

agent "coder" {
  runtime   = runtime.` + runtime + `
  image     = "` + image + `"
  command   = ["sleep", "600"]
  workspace = ["/workspace"]
}
`
	}
	w.write(config("here", "acme/agent:1.4"))
	w.must("apply", "-auto-approve")
	w.fake.WriteFile(w.lineage(), "agent.coder", "/workspace/notes.md")
	w.fake.WriteFile(w.lineage(), "agent.coder", "/tmp/scratch")
	w.write(config("there", "acme/agent:1.5"))
	out := w.must("plan")
	if want := "its image changed: it boots image acme/agent:1.5 with /workspace from agent.coder.snapshot.1"; !strings.Contains(out, want) {
		t.Errorf("plan lacks %q:\n%s", want, out)
	}
	w.must("apply", "-auto-approve")
	if got := other.Files(w.lineage(), "agent.coder"); !slices.Equal(got, []string{"/workspace/notes.md"}) {
		t.Errorf("files after the migration: %v", got)
	}
	if out := w.must("plan"); !strings.Contains(out, "No changes.") {
		t.Errorf("not converged:\n%s", out)
	}
}

// TestWorkspaceRefusedBySmolvm: smolvm cannot carry a workspace into a
// new image, so validate and plan refuse workspace on its agents, at the
// attribute; a migration to smolvm of an agent with one is refused the
// same way, before anything moves.
func TestWorkspaceRefusedBySmolvm(t *testing.T) {
	dk, sv := docker.Declaration(), smolvm.Declaration()
	w := newWorkspace(t)
	w.fake = &drivertest.Fake{DriverName: "docker", DeclareResponse: &dk}
	w.extra = map[string]*drivertest.Fake{"smolvm": {DriverName: "smolvm", DeclareResponse: &sv}}
	w.write(`
runtime "vm" {
  driver = "smolvm"
}

runtime "default" {
  driver = "docker"
}

agent "coder" {
  runtime   = runtime.vm
  image     = "alpine:3"
  workspace = ["/workspace"]
}

agent "local" {
  image     = "alpine:3"
  workspace = ["/workspace"]
}
`)
	for _, cmd := range []string{"validate", "plan"} {
		code, _, stderr := w.run(cmd)
		flat := strings.Join(strings.Fields(stderr), " ")
		for _, want := range []string{
			"Error: Attribute not supported by this runtime",
			`Bottlefile line 13, in agent "coder": 13: workspace = ["/workspace"]`,
			`agent.coder runs on runtime "vm" (driver smolvm): the smolvm driver cannot carry workspace paths`,
		} {
			if !strings.Contains(flat, want) {
				t.Errorf("%s: the error lacks %q:\n%s", cmd, want, stderr)
			}
		}
		if code != 1 || strings.Count(stderr, "Error:") != 1 {
			t.Errorf("%s: exit %d, want one error (agent.local runs on docker):\n%s", cmd, code, stderr)
		}
	}
}

// TestWorkspaceNewerThanSnapshot: without a policy, an image upgrade of
// an agent that has an older snapshot carries the workspace from the
// container it replaces, which holds what was written since, not from
// that snapshot.
func TestWorkspaceNewerThanSnapshot(t *testing.T) {
	w := newWorkspace(t)
	w.write(workspaceAgent("acme/agent:1.4", `["/workspace"]`, false))
	w.must("apply", "-auto-approve")
	w.fake.WriteFile(w.lineage(), "agent.coder", "/workspace/old.md")
	w.mustSnapshot("take", "agent.coder")
	w.fake.WriteFile(w.lineage(), "agent.coder", "/workspace/new.md")
	w.write(workspaceAgent("acme/agent:1.5", `["/workspace"]`, false))
	if out := w.must("plan"); !strings.Contains(out, "with /workspace carried over from the current workload") || strings.Contains(out, "from agent.coder.snapshot.1") {
		t.Errorf("plan:\n%s", out)
	}
	w.must("apply", "-auto-approve")
	if got := w.workloadFiles(); !slices.Equal(got, []string{"/workspace/old.md", "/workspace/new.md"}) {
		t.Errorf("files after the upgrade: %v", got)
	}
}
