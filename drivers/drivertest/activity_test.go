package drivertest

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/bottlefile/bottlefile/drivers"
)

// TestFakeActivity: an agent nobody used was last active when it
// started (when it stopped, once stopped); what SetActivity sets is
// reported instead; an agent of no workload, and another lineage's, are
// left out.
func TestFakeActivity(t *testing.T) {
	const lin = "0c7f1c1e-0000-4000-8000-000000000000"
	started := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	now := started
	f := &Fake{Clock: func() time.Time { return now }}
	create(t, f, lin, "coder")
	create(t, f, lin, "idle")
	create(t, f, "other-lineage", "stranger")
	req := drivers.ActivityRequest{Lineage: lin, Agents: []string{"agent.coder", "agent.idle", "agent.gone", "agent.stranger"}}

	now = started.Add(time.Hour)
	yes := true
	set := drivers.Activity{LastActive: started.Add(30 * time.Minute), Busy: true, Wrote: &yes}
	f.SetActivity(lin, "agent.coder", set)
	if !f.Stop(lin, "agent.idle") {
		t.Fatal("the fake has no agent.idle to stop")
	}
	got, err := f.Activity(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]drivers.Activity{
		"agent.coder": set,
		"agent.idle":  {LastActive: now},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Activity (-want +got):\n%s", diff)
	}
	if f.ActivityCalls != 1 || f.ActivityRequest.Lineage != lin {
		t.Errorf("recorded %d calls, the last for lineage %q", f.ActivityCalls, f.ActivityRequest.Lineage)
	}

	f.ActivityFn = func(drivers.ActivityRequest) (map[string]drivers.Activity, error) { return nil, nil }
	if got, _ := f.Activity(t.Context(), req); got != nil {
		t.Errorf("ActivityFn's answer was not returned: %v", got)
	}
}
