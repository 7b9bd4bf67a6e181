package swarm

import (
	"os"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/hcl/v2/hcldec"
	"github.com/zclconf/go-cty/cty"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/docker"
	"github.com/bottlefile/bottlefile/drivers/swarm/swarmtest"
)

// The swarm tests share one fixture per test process: three nodes and a
// registry (swarmtest).
func TestMain(m *testing.M) { os.Exit(swarmtest.Main(m)) }

func testLogger(t testing.TB) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Name: t.Name(), Level: hclog.Warn, Output: hclog.DefaultOutput})
}

// runtimeConfig is a swarm runtime block with the attributes given, the
// others null.
func runtimeConfig(attrs map[string]cty.Value) cty.Value {
	vals := map[string]cty.Value{}
	for name, ty := range hcldec.ImpliedType(configSpec()).AttributeTypes() {
		vals[name] = cty.NullVal(ty)
		if v, ok := attrs[name]; ok {
			vals[name] = v
		}
	}
	return cty.ObjectVal(vals)
}

// fixtureDriver is a swarm driver configured against the fixture's
// manager, with its registry unless registry is false.
func fixtureDriver(t *testing.T, f *swarmtest.Fixture, registry bool, more map[string]cty.Value) *Driver {
	t.Helper()
	d, err := Factory(docker.NewEngine)(testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	attrs := map[string]cty.Value{"host": cty.StringVal(f.Manager().Host), attrNodeHosts: nodeEnginesOf(f)}
	if registry {
		attrs["registry"] = cty.StringVal(f.Registry)
		attrs[attrRegistryURL] = cty.StringVal(f.RegistryURL)
	}
	for k, v := range more {
		attrs[k] = v
	}
	if err := d.Configure(t.Context(), drivers.ConfigureRequest{Runtime: "fleet", Config: runtimeConfig(attrs), StateDir: t.TempDir()}); err != nil {
		t.Fatalf("Configure: %v", err)
	}
	t.Cleanup(func() { d.(drivers.Closer).Close() })
	return d.(*Driver)
}

// nodeEnginesOf is node_hosts for the fixture: every node's engine by
// its hostname.
func nodeEnginesOf(f *swarmtest.Fixture) cty.Value {
	m := map[string]cty.Value{}
	for _, n := range f.Nodes {
		m[n.Name] = cty.StringVal(n.Host)
	}
	return cty.MapVal(m)
}

// readLive is what Read reports of the object at addr of lineage; the
// test fails when Read does not report it.
func readLive(t *testing.T, d *Driver, lineage, addr string) drivers.LiveObject {
	t.Helper()
	resp, err := d.Read(t.Context(), drivers.ReadRequest{Lineage: lineage})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range resp.Objects {
		if o.Addr == addr {
			return o
		}
	}
	t.Fatalf("Read does not report %s", addr)
	return drivers.LiveObject{}
}
