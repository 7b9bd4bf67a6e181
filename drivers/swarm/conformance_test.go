package swarm

import (
	"testing"

	"github.com/docker/docker/api/types/swarm"

	"github.com/zclconf/go-cty/cty"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/docker/dockertest"
	"github.com/bottlefile/bottlefile/drivers/drivertest"
	"github.com/bottlefile/bottlefile/drivers/swarm/swarmtest"
)

// The conformance battery on the three-node fixture. Stopping a workload
// behind the driver's back is scaling its service to no replicas, as an
// operator would (a task stopped on its node is restarted by the cluster).
func TestConformance(t *testing.T) {
	f := swarmtest.Start(t)
	mgr := f.Client(t, 0)
	drivertest.TestDriver(t, drivertest.Harness{
		NewDriver: func(t *testing.T) drivers.Driver {
			return fixtureDriver(t, f, true, map[string]cty.Value{"gateway_binary": cty.StringVal(dockertest.GatewayBinary(t))})
		},
		// The fixture's outside host, on the hub: its page says outside-ok.
		Outside: func(*testing.T) (string, string) { return swarmtest.Outside + ":80", "outside-ok" },
		Image:   f.Busybox,
		RemoveOutside: func(t *testing.T, _ string, obj drivers.LiveObject) {
			if err := mgr.ServiceRemove(t.Context(), obj.ID); err != nil {
				t.Fatalf("docker service rm %s: %v", obj.ID, err)
			}
		},
		StopOutside: func(t *testing.T, _ string, obj drivers.LiveObject) {
			svc, _, err := mgr.ServiceInspectWithRaw(t.Context(), obj.ID, swarm.ServiceInspectOptions{})
			if err != nil {
				t.Fatal(err)
			}
			zero := uint64(0)
			svc.Spec.Mode.Replicated.Replicas = &zero
			if _, err := mgr.ServiceUpdate(t.Context(), svc.ID, svc.Version, svc.Spec, swarm.ServiceUpdateOptions{}); err != nil {
				t.Fatalf("docker service scale %s=0: %v", svc.Spec.Name, err)
			}
		},
	})
}
