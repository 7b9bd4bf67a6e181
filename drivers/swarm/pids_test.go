package swarm

import (
	"slices"
	"testing"

	dockerswarm "github.com/docker/docker/api/types/swarm"
	"github.com/google/uuid"
	"github.com/zclconf/go-cty/cty"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/swarm/swarmtest"
)

// TestPidsOnSwarm: pids is the service's task limit (Resources.Limits.Pids,
// API 1.41) on the swarm fixture. It is not an in-place attribute: a
// change starts a new task, as the declaration says, so the planner
// replaces the service. A service without pids records no pids
// attribute, keeping the config hash it had before pids existed.
func TestPidsOnSwarm(t *testing.T) {
	f := swarmtest.Start(t)
	d := fixtureDriver(t, f, false, nil)
	lineage := uuid.NewString()
	f.Cleanup(t, lineage)
	ctx := t.Context()

	if !slices.Contains(Declaration().Capabilities.Attributes, "pids") || slices.Contains(Declaration().Capabilities.InPlace, "pids") {
		t.Errorf("swarm declares attributes %v, in place %v: want pids mapped, not in place", Declaration().Capabilities.Attributes, Declaration().Capabilities.InPlace)
	}
	agent := placedAgent("forky", f.Busybox, nil, nil)
	plain, err := d.Plan(ctx, drivers.PlanRequest{Agent: agent})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range plain.Objects {
		if o.Addr == "agent.forky" && o.Attrs["pids"] != cty.NilVal {
			t.Errorf("a service without pids records pids = %v", o.Attrs["pids"])
		}
	}

	agent.Workload = drivers.WithWorkloadAttr(agent.Workload, "pids", cty.NumberIntVal(64))
	plan, err := d.Plan(ctx, drivers.PlanRequest{Agent: agent})
	if err != nil {
		t.Fatal(err)
	}
	ids := applyAll(t, d, lineage, plan.Objects)
	svc, _, err := f.Client(t, 0).ServiceInspectWithRaw(ctx, ids["agent.forky"], dockerswarm.ServiceInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r := svc.Spec.TaskTemplate.Resources
	if r == nil || r.Limits == nil || r.Limits.Pids != 64 {
		t.Errorf("service resources %+v, want a pids limit of 64", r)
	}
	deleteAll(t, d, lineage)
}
