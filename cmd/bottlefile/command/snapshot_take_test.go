package command

import (
	"strings"
	"testing"
	"time"
)

// lastLine is the last line of out.
func lastLine(out string) string {
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	return lines[len(lines)-1]
}

// TestSnapshotTake: take records a new policy snapshot without asking,
// prints its address last, changes nothing else, and prunes by keep_last.
func TestSnapshotTake(t *testing.T) {
	w := newWorkspace(t)
	c := fixClock(t, w)
	w.write(listConfig("600", "2", false))
	w.must("apply", "-auto-approve")
	w.fake.WriteFile(w.lineage(), "agent.coder", "/workspace/notes.txt")
	start := len(w.fake.ApplyRequests)

	c.t = c.t.Add(time.Hour)
	out := w.must("snapshot take", "agent.coder", "-description", "before rm -rf")
	if got := lastLine(out); got != "agent.coder.snapshot.1" {
		t.Errorf("take printed %q last:\n%s", got, out)
	}
	if !strings.Contains(out, "@ agent.coder.snapshot.1") || strings.Contains(out, "Enter a value") {
		t.Errorf("take output:\n%s", out)
	}
	c.t = c.t.Add(time.Hour)
	if got := lastLine(w.must("snapshot take", "agent.coder")); got != "agent.coder.snapshot.2" {
		t.Errorf("second take printed %q", got)
	}
	if d := w.deletes(start); len(d) != 0 {
		t.Errorf("two takes under keep_last = 2 deleted %v", d)
	}

	// A third: keep_last = 2 prunes the oldest, after the new one is taken.
	c.t = c.t.Add(time.Hour)
	out = w.must("snapshot take", "agent.coder", "-description=third")
	if got := lastLine(out); got != "agent.coder.snapshot.3" {
		t.Errorf("third take printed %q:\n%s", got, out)
	}
	if !strings.Contains(out, "- agent.coder.snapshot.1") || !strings.Contains(out, "keep_last = 2") {
		t.Errorf("third take does not prune snapshot 1:\n%s", out)
	}
	if d := w.deletes(start); len(d) != 1 || d[0] != "agent.coder.snapshot.1" {
		t.Errorf("third take deleted %v", d)
	}
	for _, r := range w.fake.ApplyRequests[start:] {
		if r.Object.Addr == "agent.coder" || r.Object.Addr == "agent.coder.network" {
			t.Errorf("take touched %s (%s)", r.Object.Addr, r.Op)
		}
	}

	golden(t, "testdata/snapshot-take/list.txt", w.normalize(w.must("snapshot list")))
	if out := w.must("plan"); !strings.Contains(out, "No changes.") {
		t.Errorf("plan after take:\n%s", out)
	}
}

func TestSnapshotTakeRefuses(t *testing.T) {
	w := newWorkspace(t)
	w.write(listConfig("600", "2", false))
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"agent.coder"}, "it has never been applied"},
		{nil, "needs one agent address"},
		{[]string{"agent.coder", "agent.other"}, "needs one agent address"},
	} {
		code, out, errs := w.run("snapshot take", c.args...)
		if code != 1 || !strings.Contains(errs, c.want) {
			t.Errorf("snapshot take %q: exit %d, want 1 and %q\n%s%s", c.args, code, c.want, out, errs)
		}
	}
	w.must("apply", "-auto-approve")
	code, out, errs := w.run("snapshot take", "agent.nobody")
	if code != 1 || !strings.Contains(errs, "agent.nobody is not an agent") {
		t.Errorf("take agent.nobody: exit %d\n%s%s", code, out, errs)
	}
	if out := w.must("snapshot list"); out != "The state records no snapshot.\n" {
		t.Errorf("refused takes recorded:\n%s", out)
	}
}
