package smolvm

import (
	"context"
	"testing"

	"github.com/bottlefile/bottlefile/drivers"
)

// TestStopWorkload: a stop is smolvm's documented `machine stop --name`;
// the machine reads back stopped, a second stop is no error, and a start
// runs it again.
func TestStopWorkload(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	d := f.driver(t)
	lineage := "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"
	obj := planOne(t, d, agentSpec("coder", "ghcr.io/acme/agent:1.4"))
	resp := create(t, d, lineage, obj)

	f.resetCalls(t)
	req := drivers.StopRequest{Lineage: lineage, Object: obj, ID: resp.ID}
	if err := d.StopWorkload(context.Background(), req); err != nil {
		t.Fatalf("stop: %v", err)
	}
	checkCalls(t, f.calls(t), [][]string{{"machine", "stop", "--name", resp.ID}})
	if m := f.machines(t); len(m) != 1 || m[0].State == "running" {
		t.Fatalf("after stop: %+v", m)
	}
	if err := d.StopWorkload(context.Background(), req); err != nil {
		t.Errorf("a second stop: %v", err)
	}
	if _, err := d.Apply(context.Background(), drivers.ApplyRequest{Op: drivers.OpStart, Lineage: lineage, Object: obj, ID: resp.ID}); err != nil {
		t.Fatalf("start: %v", err)
	}
	if m := f.machines(t); len(m) != 1 || m[0].State != "running" {
		t.Errorf("after start: %+v", m)
	}
	if err := d.StopWorkload(context.Background(), drivers.StopRequest{Lineage: lineage, Object: obj, ID: "bf-nope"}); err == nil {
		t.Error("stopping a machine that does not exist is no error")
	}
}
