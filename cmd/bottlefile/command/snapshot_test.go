package command

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

const policyAgent = `
agent "coder" {
  image   = "busybox:1"
  command = ["sleep", "%d"]

  snapshot_policy {
    before    = %s
    keep_last = %d
  }
}
`

func (w *workspace) workloadFiles() []string { return w.fake.Files(w.lineage(), "agent.coder") }

// TestSnapshotBeforeReplace: with before = ["replace"], a command change
// plans the snapshot before the replacement, and the new container has
// what the old one wrote.
func TestSnapshotBeforeReplace(t *testing.T) {
	w := newWorkspace(t)
	w.write(fmt.Sprintf(policyAgent, 600, `["replace"]`, 100))
	w.must("apply", "-auto-approve")
	w.fake.WriteFile(w.lineage(), "agent.coder", "/workspace/notes.txt")

	w.write(fmt.Sprintf(policyAgent, 700, `["replace"]`, 100))
	out := w.must("plan")
	snap := strings.Index(out, "@ agent.coder.snapshot.1 (snapshot)")
	repl := strings.Index(out, "-/+ agent.coder (container)")
	if snap < 0 || repl < 0 {
		t.Fatalf("plan lacks the snapshot or the replacement:\n%s", out)
	}
	for _, want := range []string{
		`snapshot_policy.before includes "replace"`,
		"agent.coder.snapshot.1 is taken first (snapshot_policy)",
		"it boots from agent.coder.snapshot.1, taken just before",
		"Plan: 1 to add, 0 to change, 1 to destroy, 1 to snapshot.",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("plan lacks %q:\n%s", want, out)
		}
	}
	w.must("apply", "-auto-approve")
	// The snapshot was taken before the old container went.
	var order []string
	for _, r := range w.fake.ApplyRequests {
		order = append(order, string(r.Op)+" "+r.Object.Addr)
	}
	if i, j := slices.Index(order, "create agent.coder.snapshot.1"), slices.Index(order, "delete agent.coder"); i < 0 || j < i {
		t.Errorf("the snapshot was not taken before the delete: %v", order)
	}
	if got := w.workloadFiles(); !slices.Contains(got, "/workspace/notes.txt") {
		t.Errorf("the new container lacks the file written before the replacement: %v", got)
	}
	if out := w.must("plan"); !strings.Contains(out, "No changes.") {
		t.Errorf("not converged:\n%s", out)
	}
}

// TestSnapshotBeforeDestroyResumes: a destroy with before = ["destroy"]
// keeps the snapshot, and applying again resumes from it.
func TestSnapshotBeforeDestroyResumes(t *testing.T) {
	w := newWorkspace(t)
	w.write(fmt.Sprintf(policyAgent, 600, `["destroy"]`, 100))
	w.must("apply", "-auto-approve")
	lineage := w.lineage()
	w.fake.WriteFile(lineage, "agent.coder", "/workspace/notes.txt")

	out := w.must("plan", "-destroy")
	if !strings.Contains(out, "@ agent.coder.snapshot.1") || strings.Contains(out, "- agent.coder.snapshot.1") {
		t.Fatalf("destroy plan does not take and keep a snapshot:\n%s", out)
	}
	w.must("destroy", "-auto-approve")
	if got := w.workloadFiles(); len(got) != 0 {
		t.Fatalf("the container survived the destroy: %v", got)
	}
	out = w.must("plan")
	if !strings.Contains(out, "it resumes from agent.coder.snapshot.1") {
		t.Fatalf("plan after the destroy does not say it resumes:\n%s", out)
	}
	w.must("apply", "-auto-approve")
	if got := w.workloadFiles(); !slices.Contains(got, "/workspace/notes.txt") {
		t.Errorf("the resumed container lacks the file: %v", got)
	}
}

// TestSnapshotPrune: with keep_last = 2 and four snapshots, plan prunes the
// two oldest and apply removes them.
func TestSnapshotPrune(t *testing.T) {
	w := newWorkspace(t)
	clock := time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)
	w.fake.Now = func() time.Time { clock = clock.Add(time.Minute); return clock }
	for i := range 4 {
		w.write(fmt.Sprintf(policyAgent, 600+i, `["replace"]`, 100))
		w.must("apply", "-auto-approve")
	}
	// Four applies: the first created, three replaced, each after a snapshot.
	w.write(fmt.Sprintf(policyAgent, 603, `["replace"]`, 100))
	w.must("apply", "-auto-approve", "-replace=agent.coder")
	snapshots := func() []string {
		var out []string
		for _, o := range w.fake.Objects(w.lineage()) {
			if o.Kind == "snapshot" {
				out = append(out, o.Addr)
			}
		}
		return out
	}
	if got := snapshots(); len(got) != 4 {
		t.Fatalf("want four snapshots, got %v", got)
	}
	w.write(fmt.Sprintf(policyAgent, 603, `["replace"]`, 2))
	out := w.must("plan")
	for _, want := range []string{
		"# agent.coder.snapshot.1 will be destroyed",
		"# agent.coder.snapshot.2 will be destroyed",
		"snapshot_policy.keep_last = 2",
		// The changed policy is recorded on the agent's workload record.
		"its snapshot_policy changed, and is recorded",
		"Plan: 0 to add, 1 to change, 2 to destroy, 2 snapshots deleted.",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("plan lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "agent.coder.snapshot.3 will") || strings.Contains(out, "agent.coder.snapshot.4 will") {
		t.Errorf("plan prunes a snapshot it should keep:\n%s", out)
	}
	w.must("apply", "-auto-approve")
	if got := snapshots(); !slices.Equal(got, []string{"agent.coder.snapshot.3", "agent.coder.snapshot.4"}) {
		t.Errorf("after apply: %v", got)
	}
}

// TestDiscardWarning: without a policy, replacing an agent that wrote to
// its filesystem says how much is discarded.
func TestDiscardWarning(t *testing.T) {
	w := newWorkspace(t)
	w.write(fmt.Sprintf(policyAgent, 600, `[]`, 100))
	w.must("apply", "-auto-approve")
	w.fake.WriteFile(w.lineage(), "agent.coder", "/a")
	w.fake.WriteFile(w.lineage(), "agent.coder", "/b")
	w.write(fmt.Sprintf(policyAgent, 700, `[]`, 100))
	out := w.must("plan")
	if !strings.Contains(out, `this replace discards 2.0 KiB written inside it; no snapshot_policy covers "replace"`) {
		t.Errorf("plan does not warn about discarded writes:\n%s", out)
	}
}

// TestDiscardWarningUnmeasured: on a runtime that cannot size what an
// agent wrote cheaply, an uncovered destroy warns of whatever was written,
// with the runtime's reason, even when nothing was; status shows no size.
func TestDiscardWarningUnmeasured(t *testing.T) {
	w := newWorkspace(t)
	w.fake.Unmeasured = "the engine's fuse-overlayfs storage sizes it by reading every file"
	w.write(fmt.Sprintf(policyAgent, 600, `[]`, 100))
	w.must("apply", "-auto-approve")
	out := w.must("plan", "-destroy")
	block := planBlock(out, "agent.coder will be destroyed")
	for _, want := range []string{"this destroy discards whatever was written inside it since ",
		` UTC (not measured: the engine's fuse-overlayfs storage sizes it by reading every file); no snapshot_policy covers "destroy"`} {
		if !strings.Contains(block, want) {
			t.Errorf("want %q in\n%s", want, block)
		}
	}
	status := w.must("status", "-json")
	if !strings.Contains(status, `"written_bytes": null`) {
		t.Errorf("status -json on a runtime that does not measure: want written_bytes null:\n%s", status)
	}
}

// TestDiscardWarningManyAgents: plan -destroy reads what each of more
// agents than it reads at once wrote, and each change gets its own figure.
func TestDiscardWarningManyAgents(t *testing.T) {
	w := newWorkspace(t)
	var src strings.Builder
	const n = 13
	for i := range n {
		fmt.Fprintf(&src, "agent \"a%02d\" {\n  image   = \"busybox:1\"\n  command = [\"sleep\", \"600\"]\n}\n", i)
	}
	w.write(src.String())
	w.must("apply", "-auto-approve")
	for i := range n {
		for f := range i + 2 { // 2 KB or more: the plan says KiB
			w.fake.WriteFile(w.lineage(), fmt.Sprintf("agent.a%02d", i), fmt.Sprintf("/f%d", f))
		}
	}
	out := w.must("plan", "-destroy")
	for i := range n {
		block := planBlock(out, fmt.Sprintf("agent.a%02d will be destroyed", i))
		want := fmt.Sprintf(`this destroy discards %s written inside it; no snapshot_policy covers "destroy"`, humanKiB(i+2))
		if !strings.Contains(block, want) {
			t.Errorf("agent.a%02d: want %q in\n%s", i, want, block)
		}
	}
}

// planBlock is the part of a human plan from the line containing header
// to the next blank line.
func planBlock(out, header string) string {
	i := strings.Index(out, header)
	if i < 0 {
		return ""
	}
	block, _, _ := strings.Cut(out[i:], "\n\n")
	return block
}

// humanKiB is how the plan writes n thousand bytes.
func humanKiB(n int) string { return fmt.Sprintf("%.1f KiB", float64(n*1000)/1024) }
