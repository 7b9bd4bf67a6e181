package command

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/bottlefile/bottlefile/state"
)

// runSnapshot runs snapshot export or import in the workspace.
func (w *workspace) runSnapshot(name string, stdin string, args ...string) (int, string, string) {
	w.t.Helper()
	var out, errb bytes.Buffer
	m := &Meta{
		Stdout: &out, Stderr: &errb, Stdin: strings.NewReader(stdin),
		Log: w.logger(), Registry: w.registry(),
		Ctx: context.Background(), Abandon: context.Background(),
		Dir: w.dir,
	}
	var c interface{ Run([]string) int }
	switch name {
	case "export":
		c = &SnapshotExportCommand{Meta: m}
	case "import":
		c = &SnapshotImportCommand{Meta: m}
	case "take":
		c = &SnapshotTakeCommand{Meta: m}
	default:
		w.t.Fatalf("no snapshot command %q", name)
	}
	code := c.Run(args)
	return code, out.String(), errb.String()
}

func (w *workspace) mustSnapshot(name string, args ...string) string {
	w.t.Helper()
	code, out, errs := w.runSnapshot(name, "", args...)
	if code != 0 {
		w.t.Fatalf("snapshot %s %v: exit %d\n%s%s", name, args, code, out, errs)
	}
	return out
}

// TestSnapshotExportImport: a snapshot exported from one workspace and
// imported into another (another machine) is recorded there as the
// agent's next policy snapshot, in line with what the planner wants for
// it (no change planned for it), and the agent is created from it.
func TestSnapshotExportImport(t *testing.T) {
	src := newWorkspace(t)
	src.write(fmt.Sprintf(policyAgent, 600, `["replace"]`, 100))
	src.must("apply", "-auto-approve")
	src.fake.WriteFile(src.lineage(), "agent.coder", "/workspace/notes.txt")
	src.write(fmt.Sprintf(policyAgent, 700, `["replace"]`, 100))
	src.must("apply", "-auto-approve")

	file := filepath.Join(t.TempDir(), "coder.tar")
	out := src.mustSnapshot("export", "agent.coder.snapshot.1", "-o", file)
	if !strings.Contains(out, "Exported agent.coder.snapshot.1") || !strings.Contains(out, file) {
		t.Errorf("export said:\n%s", out)
	}
	if data, err := os.ReadFile(file); err != nil || !strings.Contains(string(data), "/workspace/notes.txt") {
		t.Fatalf("the export wrote %q (%v)", data, err)
	}
	entries, _ := os.ReadDir(filepath.Dir(file))
	if len(entries) != 1 {
		t.Errorf("the export left temporary files: %v", entries)
	}

	dst := newWorkspace(t) // another machine: its own runtime and state
	dst.write(fmt.Sprintf(policyAgent, 600, `["replace"]`, 100))
	out = dst.mustSnapshot("import", file)
	for _, want := range []string{"Imported " + file + " as agent.coder.snapshot.1 on runtime \"default\"", "The next apply creates agent.coder from it"} {
		if !strings.Contains(out, want) {
			t.Errorf("import output lacks %q:\n%s", want, out)
		}
	}
	s, err := state.Open(dst.dir, state.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	rec, ok, _ := s.Get("agent.coder.snapshot.1")
	s.Close()
	if !ok || rec.Kind != "snapshot" || rec.Runtime != "default" || rec.Driver != "docker" || rec.ID == "" || rec.Computed["image"] == "" ||
		string(rec.Attrs["description"]) != `"imported from `+file+`"` || string(rec.Attrs["policy"]) != "true" || string(rec.Attrs["triggers"]) != "null" ||
		string(rec.Attrs["trigger"]) != `"import"` {
		t.Fatalf("imported record: %+v", rec)
	}

	out = dst.must("plan")
	if !strings.Contains(out, "it resumes from agent.coder.snapshot.1") || strings.Contains(out, "agent.coder.snapshot.1 will") || strings.Contains(out, "agent.coder.snapshot.1 must") {
		t.Errorf("plan after the import:\n%s", out)
	}
	dst.must("apply", "-auto-approve")
	if got := dst.workloadFiles(); !slices.Contains(got, "/workspace/notes.txt") {
		t.Errorf("the agent created after the import lacks the file: %v", got)
	}
	if out := dst.must("plan"); !strings.Contains(out, "No changes.") {
		t.Errorf("not converged after the import:\n%s", out)
	}

	// Imported again, with flags after the file: the next number; the
	// agent exists, and the output says when it resumes.
	out = dst.mustSnapshot("import", file, "-agent=agent.coder")
	if !strings.Contains(out, "as agent.coder.snapshot.2") || !strings.Contains(out, "agent.coder exists now") {
		t.Errorf("second import:\n%s", out)
	}
	if out := dst.must("plan"); !strings.Contains(out, "No changes.") {
		t.Errorf("not converged after the second import:\n%s", out)
	}

	// Standard output and standard input.
	code, data, errs := src.runSnapshot("export", "", "-o", "-", "agent.coder.snapshot.1")
	if code != 0 || !strings.Contains(data, "/workspace/notes.txt") || !strings.Contains(errs, "to standard output") {
		t.Errorf("export to stdout: exit %d\n%s%s", code, data, errs)
	}
	if code, out, errs := dst.runSnapshot("import", data, "-agent", "coder", "-"); code != 0 || !strings.Contains(out, "agent.coder.snapshot.3") {
		t.Errorf("import from stdin: exit %d\n%s%s", code, out, errs)
	}
}

func TestSnapshotCommandErrors(t *testing.T) {
	w := newWorkspace(t)
	w.write(fmt.Sprintf(policyAgent, 600, `["replace"]`, 100) + `
agent "second" {
  image   = "busybox:1"
  command = ["sleep", "1"]
}
`)
	w.must("apply", "-auto-approve")
	file := filepath.Join(t.TempDir(), "x.tar")
	if err := os.WriteFile(file, []byte(`["/a"]`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		cmd  string
		args []string
		want string
	}{
		{"export", []string{"agent.coder.snapshot.9", "-o", file}, "records no object at agent.coder.snapshot.9"},
		{"export", []string{"agent.coder", "-o", file}, "is a container, not a snapshot"},
		{"export", []string{"agent.coder"}, "needs -o FILE"},
		{"export", nil, "needs one snapshot address"},
		{"export", []string{"-bogus"}, "flag provided but not defined"},
		{"import", []string{file}, "name the agent with -agent=agent.NAME"},
		{"import", []string{"-agent=agent.nobody", file}, "-agent=agent.nobody: the Bottlefile declares no such agent"},
		{"import", []string{"-"}, "needs -agent=agent.NAME"},
		{"import", []string{filepath.Join(t.TempDir(), "missing.tar")}, "no such file"},
		{"import", nil, "needs one file"},
	} {
		code, out, errs := w.runSnapshot(c.cmd, "", c.args...)
		if code != 1 || !strings.Contains(errs, c.want) {
			t.Errorf("snapshot %s %v: exit %d, want 1 and %q\n%s%s", c.cmd, c.args, code, c.want, out, errs)
		}
	}
}

func TestParseInterleaved(t *testing.T) {
	fs := newFlagSet("x")
	o := fs.String("o", "", "")
	a := fs.String("agent", "", "")
	pos, err := parseInterleaved(fs, []string{"ADDR", "-o", "F", "more", "-agent=x", "--", "-notaflag"})
	if err != nil || *o != "F" || *a != "x" || !slices.Equal(pos, []string{"ADDR", "more", "-notaflag"}) {
		t.Errorf("pos %q o %q agent %q err %v", pos, *o, *a, err)
	}
}
