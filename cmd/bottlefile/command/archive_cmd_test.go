package command

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/bottlefile/bottlefile/drivers"
)

// TestArchiveCommand: archive commits the agent and removes its
// workload and network, applied without asking; plan then has nothing to
// do; status says since when it is archived; exec resumes it first (its
// steps on standard error, the command's output alone on standard
// output), with its files, and runs the command.
func TestArchiveCommand(t *testing.T) {
	w := newWorkspace(t)
	c := fixClock(t, w)
	w.write(strings.Replace(logsConfig, "%s", "600", 1))
	w.must("apply", "-auto-approve")
	w.fake.WriteFile(w.lineage(), "agent.coder", "/workspace/notes.txt")

	out := w.must("archive", "agent.coder")
	for _, want := range []string{"agent.coder: Archiving...", "agent.coder.snapshot.1: Creating...", "2 archived, 1 snapshot taken"} {
		if !strings.Contains(out, want) {
			t.Errorf("archive printed no %q:\n%s", want, out)
		}
	}
	for _, o := range w.fake.Objects(w.lineage()) {
		if o.Kind != drivers.KindSnapshot {
			t.Errorf("%s is still live after archive", o.Addr)
		}
	}
	if out := w.must("plan"); !strings.Contains(out, "No changes.") {
		t.Errorf("plan after archive:\n%s", out)
	}
	if out := w.must("archive", "agent.coder"); !strings.Contains(out, "No changes. agent.coder archived already.") {
		t.Errorf("a second archive:\n%s", out)
	}
	if code, _, errs := w.run("snapshot rm", "-auto-approve", "agent.coder.snapshot.1"); code != 1 || !strings.Contains(errs, "agent.coder is archived in it") {
		t.Errorf("snapshot rm of the archive snapshot: exit %d %s", code, errs)
	}
	c.t = c.t.Add(3*24*time.Hour + time.Hour)
	out = w.must("status")
	if lines := strings.Split(out, "\n"); len(lines) < 3 || !strings.HasPrefix(strings.Join(strings.Fields(lines[1]), " "), "agent.coder archived 3d ago") ||
		strings.Join(strings.Fields(lines[2]), " ") != "agent.coder archived 3d ago -" {
		t.Errorf("status of an archived agent:\n%s", out)
	}

	w.fake.ExecFn = func(req drivers.ExecRequest) (int, error) {
		io.WriteString(req.Stdout, strings.Join(req.Command, " "))
		return 0, nil
	}
	code, stdout, stderr := w.run("exec", "agent.coder", "--", "ls")
	if code != 0 || stdout != "ls" || !strings.Contains(stderr, "agent.coder is archived: resuming it first.") {
		t.Fatalf("exec of an archived agent: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if files := w.fake.Files(w.lineage(), "agent.coder"); len(files) != 1 {
		t.Errorf("after exec resumed it the agent has %v, want its notes", files)
	}
	if out := w.must("plan"); !strings.Contains(out, "No changes.") {
		t.Errorf("plan after the resume:\n%s", out)
	}
	if code, _, errs := w.run("archive", "agent.nobody"); code != 1 || !strings.Contains(errs, "No such agent") {
		t.Errorf("archive of an unknown agent: exit %d %s", code, errs)
	}
}
