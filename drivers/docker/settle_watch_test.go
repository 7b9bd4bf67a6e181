package docker

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"

	"github.com/bottlefile/bottlefile/drivers"
)

// TestSettleCountsFromStart: the watch counts from the container's start
// as this process made it (issue 28), not from when Settle is called: a
// workload that has run for the whole -wait since its start is looked at
// once, at once.
func TestSettleCountsFromStart(t *testing.T) {
	var inspects atomic.Int32
	api := &fakeAPI{ContainerInspectFn: func(id string) (container.InspectResponse, error) {
		inspects.Add(1)
		return container.InspectResponse{ContainerJSONBase: &container.ContainerJSONBase{ID: id, State: &container.State{Running: true}}}, nil
	}}
	d := fakeDriver(t, api, DefaultSubnetPool)
	obj := drivers.Object{Addr: "agent.a", Kind: kindContainer}
	d.started.Store("c1", startMark{at: time.Now().Add(-time.Hour)})
	if err := d.Settle(t.Context(), drivers.SettleRequest{Lineage: testLineage, Object: obj, ID: "c1", Wait: 2 * time.Second}); err != nil {
		t.Fatal(err)
	}
	if n := inspects.Load(); n != 1 {
		t.Errorf("%d inspects of a container started an hour ago with -wait 2s, want 1", n)
	}
}

// TestSettleLooksAgainAtDeadline: without a healthcheck the watch looks at
// the start and at the deadline, and an exit in between fails it.
func TestSettleLooksAgainAtDeadline(t *testing.T) {
	var inspects atomic.Int32
	api := &fakeAPI{ContainerInspectFn: func(id string) (container.InspectResponse, error) {
		st := &container.State{Running: true}
		if inspects.Add(1) > 1 {
			st = &container.State{ExitCode: 137, FinishedAt: time.Now().Format(time.RFC3339Nano)}
		}
		return container.InspectResponse{ContainerJSONBase: &container.ContainerJSONBase{ID: id, State: st}}, nil
	}}
	d := fakeDriver(t, api, DefaultSubnetPool)
	obj := drivers.Object{Addr: "agent.a", Kind: kindContainer}
	d.started.Store("c2", startMark{at: time.Now()})
	err := d.Settle(t.Context(), drivers.SettleRequest{Lineage: testLineage, Object: obj, ID: "c2", Wait: 300 * time.Millisecond})
	var ee *drivers.ExitError
	if !errors.As(err, &ee) || ee.Exit.Code != 137 {
		t.Fatalf("err = %v, want the exit", err)
	}
	if n := inspects.Load(); n != 2 {
		t.Errorf("%d inspects, want 2: at the start and at the deadline", n)
	}
}

// TestSettleTakesTheInspectAfterStart: the inspect right after a start
// (containerResponse) that saw the container running without a
// healthcheck is the watch's first look: Settle looks once more, at the
// deadline, and an exit by then fails it. One that saw a healthcheck is
// watched from the start.
func TestSettleTakesTheInspectAfterStart(t *testing.T) {
	for _, tc := range []struct {
		name    string
		health  *container.Health
		exited  bool // at the watch's looks
		inspect int  // by Settle
	}{
		{"running", nil, false, 1},
		{"exited by the deadline", nil, true, 1},
		{"healthcheck", &container.Health{Status: container.Starting}, false, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var inspects atomic.Int32
			afterStart := true
			api := &fakeAPI{ContainerInspectFn: func(id string) (container.InspectResponse, error) {
				st := &container.State{Running: true, Health: tc.health}
				if afterStart {
					afterStart = false
				} else {
					inspects.Add(1)
					if tc.exited {
						st = &container.State{ExitCode: 3, FinishedAt: time.Now().Format(time.RFC3339Nano)}
					} else if tc.health != nil && inspects.Load() > 1 {
						st.Health = &container.Health{Status: container.Healthy}
					}
				}
				return container.InspectResponse{ContainerJSONBase: &container.ContainerJSONBase{ID: id, State: st}}, nil
			}}
			d := fakeDriver(t, api, DefaultSubnetPool)
			d.markStarted("c3", time.Now())
			if _, err := d.containerResponse(t.Context(), api, "agent.a", "c3", ""); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			const wait = 200 * time.Millisecond
			err := d.Settle(t.Context(), drivers.SettleRequest{Lineage: testLineage, Object: drivers.Object{Addr: "agent.a", Kind: kindContainer}, ID: "c3", Wait: wait})
			var ee *drivers.ExitError
			if tc.exited != errors.As(err, &ee) || (!tc.exited && err != nil) {
				t.Fatalf("err = %v, exited %v", err, tc.exited)
			}
			if n := inspects.Load(); n != int32(tc.inspect) {
				t.Errorf("%d inspects by the watch, want %d", n, tc.inspect)
			}
			if tc.health == nil && time.Since(start) < wait/2 {
				t.Errorf("the one look came %v after the start, before the deadline", time.Since(start))
			}
		})
	}
}

// TestStartedAtTrusted: the watch counts from the engine's StartedAt only
// when it lies between the local times around the start call; a remote
// engine whose clock is off (or an answer without the time) is counted
// from the local time just after the call.
func TestStartedAtTrusted(t *testing.T) {
	after := time.Now()
	before := after.Add(-80 * time.Millisecond)
	m := startMark{at: after, before: before, after: after}
	inside := before.Add(30 * time.Millisecond)
	for _, tc := range []struct {
		name   string
		engine string
		want   time.Time
	}{
		{"inside", inside.UTC().Format(time.RFC3339Nano), inside},
		{"at before", before.UTC().Format(time.RFC3339Nano), before},
		{"at after", after.UTC().Format(time.RFC3339Nano), after},
		{"engine clock ahead", after.Add(2 * time.Second).UTC().Format(time.RFC3339Nano), after},
		{"engine clock behind", before.Add(-time.Millisecond).UTC().Format(time.RFC3339Nano), after},
		{"never started", "0001-01-01T00:00:00Z", after},
		{"empty", "", after},
		{"garbage", "yesterday", after},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := startedAt(m, tc.engine)
			if !got.Equal(tc.want) {
				t.Errorf("startedAt(%q) = %v, want %v", tc.engine, got, tc.want)
			}
			if !strings.Contains(got.String(), " m=") { // the monotonic reading, as Time.String prints it
				t.Errorf("startedAt(%q) lost the monotonic reading", tc.engine)
			}
		})
	}
}

// TestSettleCountsFromEngineStart: the inspect after a start gives the
// engine's StartedAt, and the watch counts from it when it is trusted: a
// start the engine made long before the call returned (a slow answer) is
// watched until StartedAt + wait, not the return + wait. A StartedAt
// outside the call (a skewed remote clock) is counted from the return.
func TestSettleCountsFromEngineStart(t *testing.T) {
	for _, tc := range []struct {
		name     string
		skew     time.Duration // of the engine's clock
		inspects int32         // by Settle
	}{
		// Started 2 s into a 3 s call, -wait 1 s: the deadline passed
		// as the call returned, so the watch looks once, at once.
		{"trusted", 0, 1},
		// The same start an hour ahead: counted from the return, so the
		// watch waits for its deadline and looks again there.
		{"skewed", time.Hour, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var inspects atomic.Int32
			callBefore := time.Now().Add(-3 * time.Second)
			started := callBefore.Add(2 * time.Second).Add(tc.skew)
			afterStart := true
			api := &fakeAPI{ContainerInspectFn: func(id string) (container.InspectResponse, error) {
				if afterStart {
					afterStart = false
				} else {
					inspects.Add(1)
				}
				return container.InspectResponse{ContainerJSONBase: &container.ContainerJSONBase{ID: id, State: &container.State{
					Running: true, StartedAt: started.UTC().Format(time.RFC3339Nano),
				}}}, nil
			}}
			d := fakeDriver(t, api, DefaultSubnetPool)
			d.markStarted("c4", callBefore)
			if _, err := d.containerResponse(t.Context(), api, "agent.a", "c4", ""); err != nil {
				t.Fatal(err)
			}
			v, _ := d.started.Load("c4")
			m := v.(startMark)
			wantFrom := m.after
			if tc.skew == 0 {
				wantFrom = started
			}
			if !m.at.Round(0).Equal(wantFrom.Round(0)) { // the wall clock: the engine has no monotonic one
				t.Errorf("the watch counts from %v, want %v", m.at, wantFrom)
			}
			if err := d.Settle(t.Context(), drivers.SettleRequest{Lineage: testLineage, Object: drivers.Object{Addr: "agent.a", Kind: kindContainer}, ID: "c4", Wait: time.Second}); err != nil {
				t.Fatal(err)
			}
			if n := inspects.Load(); n != tc.inspects {
				t.Errorf("%d inspects by the watch, want %d", n, tc.inspects)
			}
		})
	}
}

// TestSettleWaitsAgainAfterALateLook: when the engine answered the
// inspect after a start only once the whole wait had passed since the
// start (a loaded engine; CI saw `sh -c 'exit 3'` pass the watch so), the
// last look is a whole wait after that answer, and a workload that exits
// in between fails the apply.
func TestSettleWaitsAgainAfterALateLook(t *testing.T) {
	const wait = 200 * time.Millisecond
	var exitsAt time.Time
	api := &fakeAPI{ContainerInspectFn: func(id string) (container.InspectResponse, error) {
		st := &container.State{Running: true}
		if !exitsAt.IsZero() && time.Now().After(exitsAt) {
			st = &container.State{ExitCode: 3, FinishedAt: time.Now().Format(time.RFC3339Nano)}
		}
		return container.InspectResponse{ContainerJSONBase: &container.ContainerJSONBase{ID: id, State: st}}, nil
	}}
	d := fakeDriver(t, api, DefaultSubnetPool)
	// Started a whole wait before the inspect after the start answered.
	started := time.Now().Add(-2 * wait)
	d.started.Store("c4", startMark{at: started, before: started, after: started})
	if _, err := d.containerResponse(t.Context(), api, "agent.a", "c4", ""); err != nil {
		t.Fatal(err)
	}
	exitsAt = time.Now().Add(wait / 4)
	err := d.Settle(t.Context(), drivers.SettleRequest{Lineage: testLineage, Object: drivers.Object{Addr: "agent.a", Kind: kindContainer}, ID: "c4", Wait: wait})
	var ee *drivers.ExitError
	if !errors.As(err, &ee) || ee.Exit.Code != 3 {
		t.Fatalf("err = %v, want the exit with code 3 that came after the late look", err)
	}
}
