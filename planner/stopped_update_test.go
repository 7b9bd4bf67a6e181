package planner_test

import (
	"strings"
	"testing"

	"github.com/bottlefile/bottlefile/planner"
)

// TestStoppedUpdateStarts: an in-place change to a workload stopped
// outside bottlefile is an update the apply follows with a start, and the
// plan says so; one stopped with bottlefile stop is updated and stays
// stopped, as stop promises.
func TestStoppedUpdateStarts(t *testing.T) {
	b := newBench(t)
	b.write(twoCoders)
	b.apply(planner.Options{})
	b.fake.Stop(b.lineage(), "agent.coder")
	b.apply(planner.Options{Stop: []string{"agent.other"}})
	b.write(strings.ReplaceAll(twoCoders, `command = ["sleep", "600"]`, "command = [\"sleep\", \"600\"]\n  memory  = \"512MiB\""))

	p := b.plan(planner.Options{})
	byHand, onPurpose := change(p, "agent.coder"), change(p, "agent.other")
	if byHand == nil || byHand.Action != planner.Update || !byHand.StartsAfterUpdate() {
		t.Fatalf("an in-place change to a workload stopped by hand is not an update followed by a start:\n%s", pending(p))
	}
	if got := strings.Join(planner.ReasonTexts(byHand.Reasons), "; "); !strings.Contains(got, "stopped outside bottlefile") || !strings.Contains(got, "it will be started once updated in place") {
		t.Errorf("the update does not say it starts the workload: %q", got)
	}
	if onPurpose == nil || onPurpose.Action != planner.Update || onPurpose.StartsAfterUpdate() {
		t.Fatalf("an in-place change to a workload stopped with stop starts it:\n%s", pending(p))
	}
	if got := strings.Join(planner.ReasonTexts(onPurpose.Reasons), "; "); strings.Contains(got, "started") {
		t.Errorf("the update of a workload stopped on purpose says it starts it: %q", got)
	}
}
