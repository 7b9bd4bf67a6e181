package command

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const logsConfig = `
agent "coder" {
  image   = "busybox:1"
  command = ["sleep", "%s"]
}
`

// TestLogsMergedAndPrevious: logs of an agent merges its workloads' lines
// in time order with workload and time; -tail and -since cut; a replaced
// and a destroyed workload's logs are saved and read back with -previous.
func TestLogsMergedAndPrevious(t *testing.T) {
	w := newWorkspace(t)
	c := fixClock(t, w)
	w.fake.Clock = c.now
	w.write(strings.Replace(logsConfig, "%s", "600", 1))
	w.must("apply", "-auto-approve")
	lineage := w.lineage()
	say := func(text string) {
		c.t = c.t.Add(time.Second)
		w.fake.Say(lineage, "agent.coder", strings.HasPrefix(text, "err"), text)
	}
	say("first")
	say("err: second")
	say("third")

	out := w.must("logs", "agent.coder")
	want := "agent.coder | 2026-11-25T06:00:01.000Z first\nagent.coder | 2026-11-25T06:00:02.000Z err: second\nagent.coder | 2026-11-25T06:00:03.000Z third\n"
	if out != want {
		t.Errorf("logs agent.coder:\n%s\nwant:\n%s", out, want)
	}
	if out := w.must("logs", "-no-prefix", "-tail", "1", "agent.coder"); out != "third\n" {
		t.Errorf("logs -no-prefix -tail 1: %q", out)
	}
	if out := w.must("logs", "agent.coder", "-no-prefix", "-since", "2026-11-25T06:00:02Z"); out != "err: second\nthird\n" {
		t.Errorf("logs -since: %q", out)
	}

	// A replacement saves the old workload's log.
	w.write(strings.Replace(logsConfig, "%s", "700", 1))
	w.must("apply", "-auto-approve")
	say("new one")
	// A destroy whose log cannot be saved (a file where its folder goes)
	// still destroys, with a note.
	folder := filepath.Join(w.dir, ".bottlefile", "logs", "agent.coder")
	if err := os.Rename(folder, folder+".kept"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(folder, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	out = w.must("destroy", "-auto-approve")
	if !strings.Contains(out, "its log could not be saved") || !strings.Contains(out, "Destroy complete!") {
		t.Errorf("destroy with an unwritable log folder: no note, or not done\n%s", out)
	}
	if err := os.Remove(folder); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(folder+".kept", folder); err != nil {
		t.Fatal(err)
	}

	out = w.must("logs", "-previous", "agent.coder")
	if out != want {
		t.Errorf("logs -previous after a replace:\n%s\nwant:\n%s", out, want)
	}
	if code, _, errs := w.run("logs", "-previous", "-f", "agent.coder"); code != 1 || !strings.Contains(errs, "cannot be followed") {
		t.Errorf("logs -previous -f: exit %d %s", code, errs)
	}
	if _, _, errs := w.run("logs", "-previous", "agent.other"); !strings.Contains(errs, "No saved log of agent.other") {
		t.Errorf("logs -previous of nothing: %s", errs)
	}
}

// TestLogsAfterDestroyPointsToPrevious: logs of an agent that is gone says
// where its saved log is (logs -previous), and only when one was saved.
func TestLogsAfterDestroyPointsToPrevious(t *testing.T) {
	w := newWorkspace(t)
	w.write(strings.Replace(logsConfig, "%s", "600", 1))
	w.must("apply", "-auto-approve")
	w.fake.Say(w.lineage(), "agent.coder", false, "working")
	w.must("destroy", "-auto-approve")

	code, out, errs := w.run("logs", "agent.coder")
	if code != 1 || !strings.Contains(strings.Join(strings.Fields(errs), " "), "Its log was saved when it was removed: bottlefile logs -previous agent.coder") {
		t.Errorf("logs of a destroyed agent: exit %d, want 1 and the pointer to -previous:\n%s%s", code, out, errs)
	}
	golden(t, "testdata/logs-destroyed.txt", w.normalize(errs))
	if out := w.must("logs", "-previous", "-no-prefix", "agent.coder"); out != "working\n" {
		t.Errorf("logs -previous: %q", out)
	}
	if _, _, errs := w.run("logs", "agent.other"); strings.Contains(errs, "-previous") {
		t.Errorf("logs of an agent never run points to a saved log:\n%s", errs)
	}
}
