package command

import (
	"slices"
	"strings"
	"testing"
)

// deletes lists the addresses the fake was asked to delete, from its
// from-th apply request on.
func (w *workspace) deletes(from int) []string {
	var out []string
	for _, r := range w.fake.ApplyRequests[from:] {
		if r.Op == "delete" {
			out = append(out, r.Object.Addr)
		}
	}
	return out
}

func TestSnapshotRmRefuses(t *testing.T) {
	w, _ := listWorkspace(t)
	start := len(w.fake.ApplyRequests)
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"agent.coder"}, []string{"agent.coder is a container, not a snapshot"}},
		{[]string{"agent.coder.snapshot.1", "agent.coder.network", "agent.coder.snapshot.7"}, []string{
			"agent.coder.network is a network, not a snapshot", "records no object at agent.coder.snapshot.7"}},
		{[]string{"snapshot.base"}, []string{"snapshot.base is still declared in the configuration", "remove the snapshot block instead"}},
		{nil, []string{"needs one or more snapshot addresses"}},
	} {
		code, out, errs := w.runWith("yes\n", "snapshot rm", c.args...)
		for _, want := range c.want {
			if code != 1 || !strings.Contains(errs, want) {
				t.Errorf("snapshot rm %q: exit %d, want 1 and %q\n%s%s", c.args, code, want, out, errs)
			}
		}
	}
	if d := w.deletes(start); len(d) != 0 {
		t.Errorf("a refused rm deleted %v", d)
	}
	if _, ok := w.record("agent.coder.snapshot.1"); !ok {
		t.Errorf("a refused rm forgot agent.coder.snapshot.1")
	}
}

// TestSnapshotRm: rm asks, shows only the snapshots it removes, and
// removes exactly them: not the agent, not a snapshot block's agent.
func TestSnapshotRm(t *testing.T) {
	w, _ := listWorkspace(t)
	start := len(w.fake.ApplyRequests)

	// agent.coder resumed from snapshot.1: it runs from it.
	code, out, errs := w.runWith("yes\n", "snapshot rm", "agent.coder.snapshot.1")
	for _, want := range []string{"Snapshot in use", "agent.coder runs from it", "snapshot rm -force"} {
		if code != 1 || !strings.Contains(errs, want) {
			t.Errorf("rm of the snapshot agent.coder runs: exit %d, want 1 and %q\n%s%s", code, want, out, errs)
		}
	}

	code, out, errs = w.runWith("no\n", "snapshot rm", "-force", "agent.coder.snapshot.1")
	if code != 1 || !strings.Contains(out, "Only 'yes' will be accepted") || !strings.Contains(out, "Removal cancelled.") {
		t.Errorf("rm answered no: exit %d\n%s%s", code, out, errs)
	}
	if _, ok := w.record("agent.coder.snapshot.1"); !ok || len(w.deletes(start)) != 0 {
		t.Fatalf("rm answered no removed something: %v", w.deletes(start))
	}

	// With the block gone from the configuration, snapshot.base can go
	// too; its agent, which it depends on, stays.
	w.write(listConfig("700", "5", false))
	code, out, errs = w.runWith("yes\n", "snapshot rm", "-force", "agent.coder.snapshot.1", "snapshot.base")
	if code != 0 {
		t.Fatalf("rm: exit %d\n%s%s", code, out, errs)
	}
	if strings.Contains(out, "-target") {
		t.Errorf("rm warns of a -target it did not take:\n%s", out)
	}
	for _, want := range []string{"- agent.coder.snapshot.1", "- snapshot.base", "-force: this is data loss: agent.coder runs from it", "Plan: 0 to add, 0 to change, 2 to destroy, 2 snapshots deleted.", "The 2 snapshots deleted cannot be restored.", "Destroy complete! Objects: 0 added, 0 changed, 2 destroyed, 2 snapshots deleted."} {
		if !strings.Contains(out, want) {
			t.Errorf("rm output lacks %q:\n%s", want, out)
		}
	}
	if d := w.deletes(start); !slices.Equal(sorted(d), []string{"agent.coder.snapshot.1", "snapshot.base"}) {
		t.Errorf("rm deleted %v", d)
	}
	for addr, want := range map[string]bool{"agent.coder.snapshot.1": false, "snapshot.base": false, "agent.coder.snapshot.2": true, "agent.coder": true} {
		if _, ok := w.record(addr); ok != want {
			t.Errorf("after rm, %s recorded: %v, want %v", addr, ok, want)
		}
	}

	code, out, errs = w.run("snapshot rm", "-auto-approve", "agent.coder.snapshot.2")
	if code != 0 || strings.Contains(out, "Enter a value") {
		t.Errorf("rm -auto-approve: exit %d\n%s%s", code, out, errs)
	}
	if out := w.must("snapshot list"); out != "The state records no snapshot.\n" {
		t.Errorf("list after removing all:\n%s", out)
	}
	if out := w.must("plan"); !strings.Contains(out, "No changes.") {
		t.Errorf("plan after rm:\n%s", out)
	}
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}
