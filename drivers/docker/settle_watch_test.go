package docker

import (
	"errors"
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
	d.started.Store("c1", time.Now().Add(-time.Hour))
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
	d.started.Store("c2", time.Now())
	err := d.Settle(t.Context(), drivers.SettleRequest{Lineage: testLineage, Object: obj, ID: "c2", Wait: 300 * time.Millisecond})
	var ee *drivers.ExitError
	if !errors.As(err, &ee) || ee.Exit.Code != 137 {
		t.Fatalf("err = %v, want the exit", err)
	}
	if n := inspects.Load(); n != 2 {
		t.Errorf("%d inspects, want 2: at the start and at the deadline", n)
	}
}
