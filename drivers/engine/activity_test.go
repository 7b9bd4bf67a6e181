package engine

import (
	"testing"
	"time"
)

// TestMerge: an agent's containers' uses, wherever they run, make one
// Activity.
func TestMerge(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	got := Merge([]Use{
		{Agent: "agent.a", Last: t0},
		{Agent: "agent.a", Last: t0.Add(time.Minute), Gateway: true},
		{Agent: "agent.a", Last: t0.Add(-time.Hour), Busy: true},
		{Agent: "agent.b", Last: t0},
		{Agent: "agent.b", Unknown: true, Gateway: true},
		{Agent: "agent.c", Last: t0, Gateway: true},
	})
	if a := got["agent.a"]; !a.LastActive.Equal(t0.Add(time.Minute)) || !a.Busy {
		t.Errorf("agent.a: %+v, want the latest use (its gateway's) and busy", a)
	}
	if a, ok := got["agent.b"]; !ok || !a.LastActive.IsZero() {
		t.Errorf("agent.b, one container unknown: %+v (reported %v), want a zero LastActive", a, ok)
	}
	if a, ok := got["agent.c"]; ok {
		t.Errorf("agent.c, a gateway alone: %+v, want left out", a)
	}
}
