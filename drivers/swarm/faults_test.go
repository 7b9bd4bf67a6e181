package swarm

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/swarm"
	"github.com/google/uuid"
	"github.com/zclconf/go-cty/cty"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/docker/dockertest"
	"github.com/bottlefile/bottlefile/drivers/swarm/swarmtest"
)

// A gateway whose task no node can run fails its create, and leaves no
// swarm config of the lineage behind (it used to leave its rules and
// forbid files). A service delete returns only once its task's container
// is gone from its node.
func TestGatewayFailureAndDeleteLeaveNothing(t *testing.T) {
	f := swarmtest.Start(t)
	d := fixtureDriver(t, f, true, map[string]cty.Value{"gateway_binary": cty.StringVal(dockertest.GatewayBinary(t))})
	mgr := f.Client(t, 0)
	lineage := uuid.NewString()
	f.Cleanup(t, lineage)
	ctx := t.Context()

	plan, err := d.Plan(ctx, drivers.PlanRequest{Agent: placedAgent("nowhere", f.Busybox, []string{"node.labels.pool==nowhere"}, []string{"example.com"})})
	if err != nil {
		t.Fatal(err)
	}
	var gw drivers.Object
	var before []drivers.Object
	for _, o := range plan.Objects {
		switch o.Kind {
		case kindGateway:
			gw = o
		case kindNetwork:
			before = append(before, o)
		}
	}
	if gw.Addr == "" {
		t.Fatal("the plan has no gateway")
	}
	applyAll(t, d, lineage, before)
	_, err = d.Apply(ctx, drivers.ApplyRequest{Op: drivers.OpCreate, Lineage: lineage, Object: gw, Hash: "h"})
	if err == nil || !strings.Contains(err.Error(), "no node can run its task") {
		t.Fatalf("a gateway no node can run: %v", err)
	}
	configs, err := mgr.ConfigList(ctx, swarm.ConfigListOptions{Filters: byLineage(lineage)})
	if err != nil {
		t.Fatal(err)
	}
	if len(configs) > 0 {
		var names []string
		for _, c := range configs {
			names = append(names, c.Spec.Name)
		}
		t.Errorf("the failed gateway left configs: %v", names)
	}

	// A delete returns when the task's container is gone.
	plan, err = d.Plan(ctx, drivers.PlanRequest{Agent: placedAgent("quick", f.Busybox, []string{"node.labels.zone==b"}, nil)})
	if err != nil {
		t.Fatal(err)
	}
	ids := applyAll(t, d, lineage, plan.Objects)
	svc := ids["agent.quick"]
	obj := plan.Objects[slices.IndexFunc(plan.Objects, func(o drivers.Object) bool { return o.Addr == "agent.quick" })]
	start := time.Now()
	if _, err := d.Apply(ctx, drivers.ApplyRequest{Op: drivers.OpDelete, Lineage: lineage, Object: obj, ID: svc}); err != nil {
		t.Fatal(err)
	}
	t.Logf("the delete returned after %v", time.Since(start))
	ctrs, err := f.Client(t, 1).ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", "com.docker.swarm.service.id="+svc))})
	if err != nil {
		t.Fatal(err)
	}
	if len(ctrs) > 0 {
		t.Errorf("after the delete returned node2 still has %d containers of the service: %s", len(ctrs), strings.Join(ctrs[0].Names, ","))
	}
	deleteAll(t, d, lineage)
}
