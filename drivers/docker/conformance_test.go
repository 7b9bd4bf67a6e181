package docker

import (
	"testing"

	"github.com/docker/docker/api/types/container"
	"github.com/zclconf/go-cty/cty"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/docker/dockertest"
	"github.com/bottlefile/bottlefile/drivers/drivertest"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	cli := dockertest.Client(t)
	img := dockertest.BusyboxImage(t, cli)
	// An existing egress network: the conformance suite wants every planned
	// object below the agent's address, and a managed egress network is
	// the runtime's (runtime.default.egress).
	egressNet, _ := dockertest.TestNetwork(t, cli, nil)
	gateway := dockertest.GatewayBinary(t)
	newDriver := func(t *testing.T) drivers.Driver {
		d, err := New(testLogger(t))
		if err != nil {
			t.Fatal(err)
		}
		cfg := cty.ObjectVal(map[string]cty.Value{"host": cty.NullVal(cty.String), "subnet_pool": cty.StringVal(DefaultSubnetPool),
			"egress_network": cty.StringVal(egressNet), "gateway_binary": cty.StringVal(gateway)})
		if err := d.Configure(t.Context(), drivers.ConfigureRequest{Runtime: "default", Config: cfg}); err != nil {
			t.Fatalf("Configure: %v", err)
		}
		t.Cleanup(func() { d.(drivers.Closer).Close() })
		return d
	}
	drivertest.TestDriver(t, drivertest.Harness{
		NewDriver: newDriver,
		Image:     img,
		// The outside server is on the egress network the gateways reach
		// the world through, by address.
		Outside: func(t *testing.T) (string, string) {
			return dockertest.Outside(t, cli, img, egressNet, "conformance-outside-ok"), "conformance-outside-ok"
		},
		RemoveOutside: func(t *testing.T, _ string, obj drivers.LiveObject) {
			if err := cli.ContainerRemove(t.Context(), obj.ID, container.RemoveOptions{Force: true}); err != nil {
				t.Fatalf("docker rm -f %s: %v", obj.ID, err)
			}
		},
		StopOutside: func(t *testing.T, _ string, obj drivers.LiveObject) {
			now := 0
			if err := cli.ContainerStop(t.Context(), obj.ID, container.StopOptions{Timeout: &now}); err != nil {
				t.Fatalf("docker stop %s: %v", obj.ID, err)
			}
		},
	})
}
