package docker

import (
	"testing"

	"github.com/zclconf/go-cty/cty"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/docker/dockertest"
	"github.com/bottlefile/bottlefile/drivers/drivertest"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	cli := dockertest.Client(t)
	img := dockertest.BusyboxImage(t, cli)
	drivertest.TestDriver(t, func(t *testing.T) drivers.Driver {
		d, err := New(testLogger(t))
		if err != nil {
			t.Fatal(err)
		}
		cfg := cty.ObjectVal(map[string]cty.Value{"host": cty.NullVal(cty.String), "subnet_pool": cty.StringVal(DefaultSubnetPool)})
		if err := d.Configure(t.Context(), drivers.ConfigureRequest{Runtime: "default", Config: cfg}); err != nil {
			t.Fatalf("Configure: %v", err)
		}
		t.Cleanup(func() { d.(drivers.Closer).Close() })
		return d
	}, img)
}
