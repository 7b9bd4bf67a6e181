package command

import (
	"fmt"
	"strings"
	"testing"
)

// TestDestroyKeepsThenIncludeSnapshots: destroy keeps the policy snapshots
// and lists them; a second destroy has nothing to do but still lists them;
// -target of one removes it; destroy -include-snapshots removes the rest and
// leaves nothing.
func TestDestroyKeepsThenIncludeSnapshots(t *testing.T) {
	w := newWorkspace(t)
	w.write(fmt.Sprintf(policyAgent, 600, `["replace", "destroy"]`, 100))
	w.must("apply", "-auto-approve")
	w.must("apply", "-auto-approve", "-replace=agent.coder") // snapshot.1

	out := w.must("destroy", "-auto-approve")
	for _, want := range []string{"# kept: agent.coder.snapshot.1, ", "# kept: agent.coder.snapshot.2, taken by this plan", "Destroy complete!"} {
		if !strings.Contains(out, want) {
			t.Errorf("destroy lacks %q:\n%s", want, out)
		}
	}
	out = w.must("plan", "-destroy")
	if !strings.Contains(out, "No changes.") || !strings.Contains(out, "# kept: agent.coder.snapshot.2, ") {
		t.Errorf("second destroy plan:\n%s", out)
	}

	out = w.must("destroy", "-auto-approve", "-target=agent.coder.snapshot.1")
	if !strings.Contains(out, "- agent.coder.snapshot.1 (snapshot)") || strings.Contains(out, "No changes.") {
		t.Errorf("destroy -target of a kept snapshot:\n%s", out)
	}
	if got := len(w.fake.Objects(w.lineage())); got != 1 {
		t.Errorf("after the targeted destroy: %d objects, want snapshot.2 alone", got)
	}

	out = w.must("destroy", "-auto-approve", "-include-snapshots")
	if !strings.Contains(out, "- agent.coder.snapshot.2 (snapshot)") || strings.Contains(out, "# kept:") {
		t.Errorf("destroy -include-snapshots:\n%s", out)
	}
	if got := w.fake.Objects(w.lineage()); len(got) != 0 {
		t.Errorf("destroy -include-snapshots left %v", got)
	}
}
