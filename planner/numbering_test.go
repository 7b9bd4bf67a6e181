package planner_test

import (
	"testing"

	"github.com/bottlefile/bottlefile/planner"
)

func TestNextPolicySnapshot(t *testing.T) {
	for _, c := range []struct {
		taken []string
		want  string
	}{
		{nil, "agent.coder.snapshot.1"},
		{[]string{"agent.coder", "agent.coder.snapshot.1", "agent.coder.snapshot.7", "agent.coderx.snapshot.9", "agent.other.snapshot.12", "snapshot.x"}, "agent.coder.snapshot.8"},
		{[]string{"agent.coder.snapshot.x", "agent.coder.snapshot.2"}, "agent.coder.snapshot.3"},
	} {
		if got := planner.NextPolicySnapshot("agent.coder", c.taken); got != c.want {
			t.Errorf("NextPolicySnapshot(%v) = %s, want %s", c.taken, got, c.want)
		}
	}
}
