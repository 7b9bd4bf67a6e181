package planner

import (
	"testing"
	"time"
)

// TestClockIsThePlanners: the planner reads the time from its Clock, so a
// plan that writes when a snapshot was taken reads the same on any day.
func TestClockIsThePlanners(t *testing.T) {
	fixed := time.Date(2026, 11, 23, 9, 30, 0, 0, time.UTC)
	p := &Planner{Clock: func() time.Time { return fixed }}
	if got := p.now(); !got.Equal(fixed) {
		t.Fatalf("now() = %v, want the clock's %v", got, fixed)
	}
	taken := time.Date(2026, 11, 23, 9, 1, 0, 0, time.UTC)
	if got := clock(taken, p.now()); got != "09:01 UTC" {
		t.Errorf("a time of the clock's day = %q, want 09:01 UTC", got)
	}
	if got := clock(taken, fixed.AddDate(0, 0, 1)); got != "2026-11-23 09:01 UTC" {
		t.Errorf("a time of an earlier day = %q, want its date", got)
	}
	if (&Planner{}).now().IsZero() {
		t.Error("no clock: now() is zero, want the wall clock")
	}
}
