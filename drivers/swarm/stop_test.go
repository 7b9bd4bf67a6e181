package swarm

import (
	"testing"

	"github.com/google/uuid"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/swarm/swarmtest"
)

// TestStopWorkloadOnSwarm: a stop scales the service to no replicas and
// returns once its task is down; Read reports it stopped, not drifted,
// under the same id; OpStart runs it again; a second stop is no error.
func TestStopWorkloadOnSwarm(t *testing.T) {
	f := swarmtest.Start(t)
	d := fixtureDriver(t, f, true, nil)
	lineage := uuid.NewString()
	f.Cleanup(t, lineage)
	plan, err := d.Plan(t.Context(), drivers.PlanRequest{Agent: placedAgent("halt", f.Busybox, nil, nil)})
	if err != nil {
		t.Fatal(err)
	}
	ids := applyAll(t, d, lineage, plan.Objects)
	var obj drivers.Object
	for _, o := range plan.Objects {
		if o.Addr == "agent.halt" {
			obj = o
		}
	}
	req := drivers.StopRequest{Lineage: lineage, Object: obj, ID: ids["agent.halt"]}
	if err := d.StopWorkload(t.Context(), req); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if o := readLive(t, d, lineage, "agent.halt"); o.Running || o.Drift != "" || o.ID != ids["agent.halt"] {
		t.Fatalf("after stop: running %v, drift %q, id %s (was %s)", o.Running, o.Drift, o.ID, ids["agent.halt"])
	}
	if err := d.StopWorkload(t.Context(), req); err != nil {
		t.Errorf("a second stop: %v", err)
	}
	if _, err := d.Apply(t.Context(), drivers.ApplyRequest{Op: drivers.OpStart, Lineage: lineage, Object: obj, ID: ids["agent.halt"]}); err != nil {
		t.Fatalf("start: %v", err)
	}
	if o := readLive(t, d, lineage, "agent.halt"); !o.Running {
		t.Errorf("after start the service does not run: %+v", o)
	}
	if err := d.StopWorkload(t.Context(), drivers.StopRequest{Lineage: "another", Object: obj, ID: ids["agent.halt"]}); err == nil {
		t.Error("a stop for another lineage stopped the service")
	}
	deleteAll(t, d, lineage)
}
