package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/swarm"
	"github.com/docker/docker/api/types/system"
	"github.com/hashicorp/go-hclog"
	"github.com/zclconf/go-cty/cty"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/engine"
	"github.com/bottlefile/bottlefile/drivers/gateway"
	"github.com/bottlefile/bottlefile/egress"
)

// isolatingEngine is the network list of an engine that manages iptables:
// its default bridge masquerades.
func isolatingEngine() []network.Summary {
	return []network.Summary{
		{Name: "bridge", Driver: "bridge", Options: map[string]string{optDefaultBridge: "true", optIPMasquerade: "true"},
			IPAM: network.IPAM{Config: []network.IPAMConfig{{Subnet: "172.17.0.0/16", Gateway: "172.17.0.1"}}}},
		{Name: "host", Driver: "host"},
		{Name: "none", Driver: "null"},
	}
}

// egressDriver is a driver on a fake engine whose runtime block sets the
// egress attributes given.
func egressDriver(t *testing.T, api *fakeAPI, attrs map[string]cty.Value) *Driver {
	t.Helper()
	d := newDriver(testLogger(t), func(engine.Endpoint) (dockerAPI, error) { return api, nil })
	cfg := map[string]cty.Value{"host": cty.NullVal(cty.String), "subnet_pool": cty.StringVal(DefaultSubnetPool)}
	for k, v := range attrs {
		cfg[k] = v
	}
	if err := d.Configure(t.Context(), drivers.ConfigureRequest{Runtime: "local", Config: cty.ObjectVal(cfg)}); err != nil {
		t.Fatalf("Configure: %v", err)
	}
	return d
}

func listing(nets []network.Summary) *fakeAPI {
	return &fakeAPI{NetworkListFn: func(network.ListOptions) ([]network.Summary, error) { return nets, nil }}
}

func strs(v cty.Value) []string {
	s, err := drivers.Strings(v)
	if err != nil {
		panic(err)
	}
	return s
}

func planObjects(t *testing.T, d *Driver, a drivers.AgentSpec) map[string]drivers.Object {
	t.Helper()
	resp, err := d.Plan(t.Context(), drivers.PlanRequest{Agent: a})
	if err != nil {
		t.Fatalf("Plan: %v", err)
	}
	out := map[string]drivers.Object{}
	for _, o := range resp.Objects {
		if _, dup := out[o.Addr]; dup {
			t.Errorf("%s planned twice", o.Addr)
		}
		out[o.Addr] = o
	}
	return out
}

func TestPlanGateway(t *testing.T) {
	api := listing(isolatingEngine())
	d := egressDriver(t, api, nil)
	objs := planObjects(t, d, drivers.AgentSpec{
		Addr: "agent.coder",
		Name: "coder",
		Workload: drivers.MustWorkload(map[string]cty.Value{
			"image":  cty.StringVal("x:1"),
			"egress": cty.TupleVal([]cty.Value{cty.StringVal("GitHub.com."), cty.StringVal("*.PyPI.org:443"), cty.StringVal("github.com"), cty.StringVal("10.1.2.3:5432")}),
		}),
	})
	gw, ok := objs["agent.coder.gateway"]
	if !ok {
		t.Fatalf("no gateway planned: %v", objs)
	}
	if gw.Kind != "gateway" || !gw.Workload || !slices.Equal(gw.InPlace, []string{"allow", "credentials"}) {
		t.Errorf("gateway = %+v", gw)
	}
	if got, want := strs(gw.Attrs["allow"]), []string{"github.com", "*.pypi.org:443", "10.1.2.3:5432"}; !slices.Equal(got, want) {
		t.Errorf("allow = %q, want the canonical rules without repeats %q", got, want)
	}
	if deps := slices.Sorted(slices.Values(gw.DependsOn)); !slices.Equal(deps, []string{"agent.coder.network", "runtime.local.egress"}) {
		t.Errorf("gateway depends on %v", deps)
	}
	exe, _ := os.Executable()
	bin, _ := gateway.ReadBinary(exe)
	sum := bin.Sum
	if v := gw.Attrs["version"].AsString(); !strings.HasSuffix(v, " ("+sum[:12]+")") || len(v) > 48 {
		t.Errorf("version = %q, want a short version ending in the running binary's sha256 %s", v, sum[:12])
	}
	if gw.Attrs["egress_network"].AsString() != "runtime.local.egress" || !gw.Attrs["dns"].IsNull() {
		t.Errorf("attrs = %#v", gw.Attrs)
	}
	en := objs["runtime.local.egress"]
	if en.Kind != "network" || en.Workload || !en.Attrs["internal"].RawEquals(cty.False) || en.Attrs["subnet_pool"].AsString() != DefaultEgressSubnetPool {
		t.Errorf("egress network = %+v", en)
	}
	// The agent never depends on its gateway: replacing the gateway (a new
	// bottlefile binary) or updating it (the allowlist) must not touch it.
	if ag := objs["agent.coder"]; slices.Contains(ag.DependsOn, "agent.coder.gateway") || slices.Contains(ag.DependsOn, "runtime.local.egress") {
		t.Errorf("the agent depends on %v", ag.DependsOn)
	}
	if _, ok := objs["agent.coder"].Attrs["sidecars"]; ok {
		t.Error("an agent without sidecars got a sidecars attribute")
	}

	// A second plan on the same driver makes no second call, and hashes
	// the binary once.
	planObjects(t, d, drivers.AgentSpec{Addr: "agent.other", Name: "other", Workload: drivers.MustWorkload(map[string]cty.Value{"image": cty.StringVal("x:1")})})
	if calls := api.calls(); !slices.Equal(calls, []string{"NetworkList"}) {
		t.Errorf("two plans made calls %v, want one network list", calls)
	}
}

// TestPlanGatewayCeiling: the effective ceiling is a gateway attribute
// that replaces the gateway when it changes (it is on the command line),
// absent without one so that the configuration hash stays; decoding gives
// the gateway's arguments back.
func TestPlanGatewayCeiling(t *testing.T) {
	d := egressDriver(t, listing(isolatingEngine()), nil)
	plan := func(ceiling []string) drivers.Object {
		objs := planObjects(t, d, drivers.AgentSpec{
			Addr: "agent.coder", Name: "coder", EgressCeiling: ceiling,
			Workload: drivers.MustWorkload(map[string]cty.Value{
				"image":  cty.StringVal("x:1"),
				"egress": cty.TupleVal([]cty.Value{cty.StringVal("github.com:443")}),
			}),
		})
		return objs["agent.coder.gateway"]
	}
	for _, tt := range []struct {
		ceiling []string
		args    []string
	}{
		{nil, nil},
		{[]string{}, []string{"-ceiling", ""}},
		{[]string{"*.github.com:443", "github.com:443"}, []string{"-ceiling", "*.github.com:443,github.com:443"}},
	} {
		gw := plan(tt.ceiling)
		if _, ok := gw.Attrs["ceiling"]; ok != (tt.ceiling != nil) {
			t.Errorf("ceiling %q: attrs %#v", tt.ceiling, gw.Attrs)
		}
		if slices.Contains(gw.InPlace, "ceiling") {
			t.Errorf("the ceiling changes in place: %v", gw.InPlace)
		}
		a, err := gateway.DecodeAttrs(gw)
		if err != nil {
			t.Fatal(err)
		}
		if (a.Ceiling == nil) != (tt.ceiling == nil) || !slices.Equal(a.Ceiling, tt.ceiling) {
			t.Errorf("decoded ceiling %q, want %q", a.Ceiling, tt.ceiling)
		}
		if got := gateway.CeilingArgs(a.Ceiling); !slices.Equal(got, tt.args) {
			t.Errorf("arguments %q, want %q", got, tt.args)
		}
	}
}

func TestPlanGatewayAllowValues(t *testing.T) {
	d := egressDriver(t, listing(isolatingEngine()), nil)
	tests := []struct {
		name   string
		egress cty.Value
		check  func(t *testing.T, v cty.Value)
	}{
		{"no egress block", cty.NilVal, nil},
		{"null", cty.NullVal(cty.List(cty.String)), nil},
		{"null, sensitive", cty.NullVal(cty.List(cty.String)).Mark("sensitive"), nil},
		{"empty", cty.ListValEmpty(cty.String), func(t *testing.T, v cty.Value) {
			if !v.RawEquals(cty.ListValEmpty(cty.String)) {
				t.Errorf("allow = %#v", v)
			}
		}},
		{"unknown", cty.UnknownVal(cty.List(cty.String)), func(t *testing.T, v cty.Value) {
			if v.IsKnown() {
				t.Errorf("allow = %#v, want unknown", v)
			}
		}},
		{"sensitive", cty.ListVal([]cty.Value{cty.StringVal("Secret.Example")}).Mark("sensitive"), func(t *testing.T, v cty.Value) {
			if !v.HasMark("sensitive") {
				t.Errorf("allow lost its mark: %#v", v)
			}
			u, _ := v.Unmark()
			if got := strs(u); !slices.Equal(got, []string{"secret.example"}) {
				t.Errorf("allow = %q", got)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs := planObjects(t, d, drivers.AgentSpec{Addr: "agent.a", Name: "a", Workload: drivers.MustWorkload(map[string]cty.Value{"image": cty.StringVal("x:1"), "egress": tt.egress})})
			gw, ok := objs["agent.a.gateway"]
			if tt.check == nil {
				// No egress block: the bottle has no gateway, and needs
				// no egress network.
				if ok || len(objs) != 2 {
					t.Errorf("planned %v, want the network and the container only", slices.Sorted(maps.Keys(objs)))
				}
				return
			}
			if !ok {
				t.Fatalf("no gateway planned: %v", slices.Sorted(maps.Keys(objs)))
			}
			tt.check(t, gw.Attrs["allow"])
		})
	}
}

func TestPlanGatewayBadRule(t *testing.T) {
	d := egressDriver(t, &fakeAPI{}, nil)
	_, err := d.Plan(t.Context(), drivers.PlanRequest{Agent: drivers.AgentSpec{
		Addr: "agent.a",
		Name: "a",
		Workload: drivers.MustWorkload(map[string]cty.Value{
			"image":  cty.StringVal("x:1"),
			"egress": cty.TupleVal([]cty.Value{cty.StringVal("github.com:443"), cty.StringVal("*")}),
		}),
	}})
	var re *drivers.RuleError
	if !errors.As(err, &re) || re.Index != 1 || re.Rule != "*" {
		t.Fatalf("err = %v, want a RuleError for rule 1", err)
	}
}

func TestPlanExistingEgressNetwork(t *testing.T) {
	nets := append(isolatingEngine(), network.Summary{Name: "corp-out", Driver: "bridge"})
	d := egressDriver(t, listing(nets), map[string]cty.Value{
		"egress_network": cty.StringVal("corp-out"),
		"gateway_dns":    cty.ListVal([]cty.Value{cty.StringVal("10.9.9.9")}),
	})
	objs := planObjects(t, d, drivers.AgentSpec{Addr: "agent.a", Name: "a", Workload: drivers.MustWorkload(map[string]cty.Value{"image": cty.StringVal("x:1"), "egress": cty.ListValEmpty(cty.String)})})
	if _, ok := objs["runtime.local.egress"]; ok {
		t.Error("an egress network is planned although the runtime names an existing one")
	}
	gw := objs["agent.a.gateway"]
	if gw.Attrs["egress_network"].AsString() != "corp-out" || !slices.Equal(gw.DependsOn, []string{"agent.a.network"}) {
		t.Errorf("gateway = %+v", gw)
	}
	if got := strs(gw.Attrs["dns"]); !slices.Equal(got, []string{"10.9.9.9"}) {
		t.Errorf("dns = %v", got)
	}

	// Missing, or internal: refused at plan.
	for name, nets := range map[string][]network.Summary{
		"does not exist": isolatingEngine(),
		"is an internal": append(isolatingEngine(), network.Summary{Name: "corp-out", Driver: "bridge", Internal: true}),
	} {
		d := egressDriver(t, listing(nets), map[string]cty.Value{"egress_network": cty.StringVal("corp-out")})
		_, err := d.Plan(t.Context(), drivers.PlanRequest{Agent: drivers.AgentSpec{Addr: "agent.a", Name: "a", Workload: drivers.MustWorkload(map[string]cty.Value{"image": cty.StringVal("x:1"), "egress": cty.ListValEmpty(cty.String)})}})
		if err == nil || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), "corp-out") {
			t.Errorf("err = %v, want one saying the network %s", err, name)
		}
	}
}

func TestIsolationCheck(t *testing.T) {
	noIPTables := isolatingEngine()
	noIPTables[0].Options = map[string]string{optDefaultBridge: "true", optIPMasquerade: "false"}
	tests := []struct {
		name string
		nets []network.Summary
		want string
	}{
		{"iptables off", noIPTables, "--iptables=false"},
		{"no default bridge", isolatingEngine()[1:], "--bridge=none"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			api := listing(tt.nets)
			d := egressDriver(t, api, nil)
			for range 2 {
				_, err := d.Plan(t.Context(), drivers.PlanRequest{Agent: drivers.AgentSpec{Addr: "agent.a", Name: "a", Workload: drivers.MustWorkload(map[string]cty.Value{"image": cty.StringVal("x:1")})}})
				if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "cannot promise egress isolation") || !strings.Contains(err.Error(), `runtime "local"`) {
					t.Fatalf("err = %v, want a refusal mentioning %q", err, tt.want)
				}
			}
			if calls := api.calls(); len(calls) != 1 {
				t.Errorf("calls = %v, want the verdict cached after one", calls)
			}
		})
	}
}

func TestIsolationCheckOptOut(t *testing.T) {
	api := &fakeAPI{}
	d := egressDriver(t, api, map[string]cty.Value{"insecure_skip_isolation_check": cty.True})
	planObjects(t, d, drivers.AgentSpec{Addr: "agent.a", Name: "a", Workload: drivers.MustWorkload(map[string]cty.Value{"image": cty.StringVal("x:1")})})
	if calls := api.calls(); len(calls) != 0 {
		t.Errorf("calls = %v, want none: the runtime skips the check", calls)
	}
}

func TestPlanSidecars(t *testing.T) {
	d := egressDriver(t, listing(isolatingEngine()), nil)
	objs := planObjects(t, d, drivers.AgentSpec{
		Addr: "agent.coder",
		Name: "coder",
		Workload: drivers.MustWorkload(map[string]cty.Value{
			"image":  cty.StringVal("x:1"),
			"egress": cty.TupleVal([]cty.Value{cty.StringVal("github.com:443")}),
		}),
		Sidecars: []drivers.SidecarSpec{
			{Addr: "agent.coder.sidecar.git", Name: "git", Workload: drivers.MustWorkload(map[string]cty.Value{"image": cty.StringVal("git:1"), "cpus": cty.NumberIntVal(1), "egress": cty.TupleVal([]cty.Value{cty.StringVal("GitHub.com:443")})})},
			{Addr: "agent.coder.sidecar.db", Name: "db", Workload: drivers.MustWorkload(map[string]cty.Value{"image": cty.StringVal("db:1")})},
		},
	})
	if got := strs(objs["agent.coder"].Attrs["sidecars"]); !slices.Equal(got, []string{"git", "db"}) {
		t.Errorf("agent sidecars = %v", got)
	}
	for _, name := range []string{"git", "db"} {
		sc, ok := objs["agent.coder.sidecar."+name]
		if !ok {
			t.Fatalf("sidecar %s not planned", name)
		}
		if sc.Kind != "container" || !sc.Workload || sc.Attrs["alias"].AsString() != name || !slices.Equal(sc.InPlace, []string{"cpus", "memory"}) {
			t.Errorf("sidecar %s = %+v", name, sc)
		}
		if !slices.Equal(sc.DependsOn, []string{"agent.coder.network"}) {
			t.Errorf("sidecar %s depends on %v, want only its network (not the gateway, which a new binary replaces)", name, sc.DependsOn)
		}
	}
	if !objs["agent.coder.sidecar.git"].Attrs["cpus"].RawEquals(cty.NumberIntVal(1)) {
		t.Errorf("cpus = %#v", objs["agent.coder.sidecar.git"].Attrs["cpus"])
	}

	bad := []struct {
		sc   drivers.SidecarSpec
		want string
	}{
		{drivers.SidecarSpec{Addr: "agent.a.sidecar.gateway", Name: "gateway", Workload: drivers.MustWorkload(map[string]cty.Value{"image": cty.StringVal("x")})}, "egress gateway"},
		{drivers.SidecarSpec{Addr: "agent.a.sidecar.s", Name: "s"}, "needs an image"},
		{drivers.SidecarSpec{Addr: "agent.a.sidecar.s", Name: "s", Workload: drivers.MustWorkload(map[string]cty.Value{"image": cty.StringVal("x"), "egress": cty.TupleVal([]cty.Value{cty.StringVal("evil.example:443")})})}, "not in the agent's egress block"},
		{drivers.SidecarSpec{Addr: "agent.a.sidecar.s", Name: "s", Workload: drivers.MustWorkload(map[string]cty.Value{"image": cty.StringVal("x"), "labels": cty.MapVal(map[string]cty.Value{"io.bottlefile.address": cty.StringVal("x")})})}, "reserved"},
	}
	for _, b := range bad {
		_, err := d.Plan(t.Context(), drivers.PlanRequest{Agent: drivers.AgentSpec{Addr: "agent.a", Name: "a", Workload: drivers.MustWorkload(map[string]cty.Value{"image": cty.StringVal("x:1")}), Sidecars: []drivers.SidecarSpec{b.sc}}})
		if err == nil || !strings.Contains(err.Error(), b.want) || !strings.Contains(err.Error(), b.sc.Addr) {
			t.Errorf("sidecar %+v: err = %v, want %q naming %s", b.sc, err, b.want, b.sc.Addr)
		}
	}
}

func TestWireContainer(t *testing.T) {
	req := drivers.ApplyRequest{Lineage: testLineage, Object: drivers.Object{Addr: "agent.coder.sidecar.web", Kind: "container", Attrs: map[string]cty.Value{
		"alias":    cty.StringVal("web"),
		"sidecars": cty.ListVal([]cty.Value{cty.StringVal("web"), cty.StringVal("db")}),
	}}}
	cfg := &container.Config{Env: []string{"no_proxy=mine"}}
	host := &container.HostConfig{}
	nc := &network.NetworkingConfig{EndpointsConfig: map[string]*network.EndpointSettings{"net": {}}}
	if err := wireContainer(req, "net", cfg, host, nc); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"no_proxy=mine",
		"HTTP_PROXY=http://bf-0f1e2d3c-coder-gateway:3128",
		"HTTPS_PROXY=http://bf-0f1e2d3c-coder-gateway:3128",
		"http_proxy=http://bf-0f1e2d3c-coder-gateway:3128",
		"https_proxy=http://bf-0f1e2d3c-coder-gateway:3128",
		"NO_PROXY=localhost,127.0.0.1,web,db",
	}
	if !slices.Equal(cfg.Env, want) {
		t.Errorf("env =\n%q\nwant\n%q", cfg.Env, want)
	}
	if !slices.Equal(nc.EndpointsConfig["net"].Aliases, []string{"web"}) || !slices.Equal(host.CapDrop, []string{"NET_RAW"}) {
		t.Errorf("aliases %v, cap drop %v", nc.EndpointsConfig["net"].Aliases, host.CapDrop)
	}
}

func TestForbidden(t *testing.T) {
	nets := []network.Summary{
		{IPAM: network.IPAM{Config: []network.IPAMConfig{{Subnet: "172.17.0.0/16", Gateway: "172.17.0.1"}}}},
		{IPAM: network.IPAM{Config: []network.IPAMConfig{{Subnet: "172.20.0.0/16"}}}},                          // no gateway named: its first address
		{IPAM: network.IPAM{Config: []network.IPAMConfig{{Subnet: "10.213.0.16/28", Gateway: "10.213.0.17"}}}}, // a bottle: in the pool
		{IPAM: network.IPAM{Config: []network.IPAMConfig{{Subnet: "fd00:1::/64", Gateway: "fd00:1::1"}}}},
	}
	got := forbidden(nets, netip.MustParsePrefix("10.213.0.0/16"), netip.MustParsePrefix("10.214.3.0/24"), false)
	var s []string
	for _, p := range got {
		s = append(s, p.String())
	}
	want := []string{"10.213.0.0/16", "10.214.3.0/24", "172.17.0.1/32", "172.20.0.1/32", "fd00:1::1/128"}
	if !slices.Equal(s, want) {
		t.Errorf("forbidden = %v, want %v", s, want)
	}
	// Locally, the host's own addresses are in it.
	local := forbidden(nil, netip.MustParsePrefix("10.213.0.0/16"), netip.Prefix{}, true)
	if len(local) < 2 {
		t.Errorf("local forbidden = %v: no host address", local)
	}
	for _, p := range local {
		if p.Addr().IsLoopback() {
			t.Errorf("loopback %s listed (the gateway refuses it anyway)", p)
		}
	}
}

func TestGatewayForbid(t *testing.T) {
	nets := []network.Summary{
		{IPAM: network.IPAM{Config: []network.IPAMConfig{{Subnet: "172.17.0.0/16", Gateway: "172.17.0.1"}}}},
		// A bottle of another pool: internal, the whole subnet.
		{Internal: true, IPAM: network.IPAM{Config: []network.IPAMConfig{{Subnet: "10.99.0.16/28"}}}},
		// Another state's managed egress network: other gateways.
		{Labels: map[string]string{drivers.LabelAddress: "runtime.other.egress"}, IPAM: network.IPAM{Config: []network.IPAMConfig{{Subnet: "10.214.9.0/24", Gateway: "10.214.9.1"}}}},
		// A user's network: only its gateway, the host's address.
		{IPAM: network.IPAM{Config: []network.IPAMConfig{{Subnet: "10.50.0.0/24", Gateway: "10.50.0.1"}}}},
	}
	u, err := engine.ParseHost("tcp://192.0.2.7:2376")
	if err != nil {
		t.Fatal(err)
	}
	// What the engine showed of its host (engineHostOwnAddrs), learned once.
	learned := &engineHost{done: true, addrs: []netip.Addr{netip.MustParseAddr("10.77.0.5"), netip.MustParseAddr("fd00:77::5")}}
	d := &Driver{log: hclog.NewNullLogger(), ep: engine.Endpoint{Host: "tcp://192.0.2.7:2376", URL: u}, host: learned}
	got := d.gatewayForbid(t.Context(), nil, "lineage", nets, netip.MustParsePrefix("10.213.0.0/16"), netip.Prefix{})
	var s []string
	for _, p := range got {
		s = append(s, p.String())
	}
	// Remote: the engine host's address from its URL and those the engine
	// showed, none of this machine's.
	want := []string{"10.50.0.1/32", "10.77.0.5/32", "10.99.0.16/28", "10.213.0.0/16", "10.214.9.0/24", "172.17.0.1/32", "192.0.2.7/32", "fd00:77::5/128"}
	if !slices.Equal(s, want) {
		t.Errorf("gatewayForbid = %v, want %v", s, want)
	}
}

// TestParseHostAddrs: the probe's output, one address a line; what the
// gateway refuses anyway is dropped, and output that is not addresses is
// an error rather than a shorter list.
func TestParseHostAddrs(t *testing.T) {
	got, err := parseHostAddrs("127.0.0.1\n192.0.2.2\n::1\nfe80::fc:ff:fe00:1\n\n10.213.7.1\n::ffff:10.1.2.3\n192.0.2.1\n")
	if err != nil {
		t.Fatal(err)
	}
	var s []string
	for _, a := range hostAddrsOnly(append(got, netip.MustParseAddr("10.213.7.1"))) {
		s = append(s, a.String())
	}
	if want := []string{"192.0.2.2", "10.213.7.1", "10.1.2.3", "192.0.2.1"}; !slices.Equal(s, want) {
		t.Errorf("got %v, want %v", s, want)
	}
	for _, bad := range []string{"", "\n", "exec format error\n", "10.0.0.1\nnot an address\n"} {
		if _, err := parseHostAddrs(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestLastAddr(t *testing.T) {
	for in, want := range map[string]string{"10.213.0.16/28": "10.213.0.30", "10.213.0.0/28": "10.213.0.14", "192.168.1.0/24": "192.168.1.254"} {
		got, ok := lastAddr(netip.MustParsePrefix(in))
		if !ok || got.String() != want {
			t.Errorf("lastAddr(%s) = %v, %v; want %s", in, got, ok, want)
		}
	}
	if _, ok := lastAddr(netip.Prefix{}); ok {
		t.Error("lastAddr of no prefix succeeded")
	}
}

func TestRulesTar(t *testing.T) {
	forbid := []netip.Prefix{netip.MustParsePrefix("10.213.0.0/16"), netip.MustParsePrefix("172.17.0.1/32")}
	b, err := rulesTar("agent.coder", []string{"GitHub.com:443", "github.com:443"}, nil, forbid)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(bytes.NewReader(b))
	// The forbid file first: the gateway reads both on one reload.
	h, err := tr.Next()
	if err != nil || h.Name != "forbid.json" || h.Mode != 0o644 {
		t.Fatalf("header %+v, %v", h, err)
	}
	data, _ := io.ReadAll(tr)
	ff, err := egress.UnmarshalForbidFile(data)
	if err != nil || !slices.Equal(ff.Forbid, []string{"10.213.0.0/16", "172.17.0.1/32"}) {
		t.Errorf("forbid file %s: %+v, %v", data, ff, err)
	}
	h, err = tr.Next()
	if err != nil || h.Name != "rules.json" || h.Mode != 0o644 {
		t.Fatalf("header %+v, %v", h, err)
	}
	data, _ = io.ReadAll(tr)
	f, err := egress.UnmarshalRulesFile(data)
	if err != nil || f.Agent != "agent.coder" || !slices.Equal(f.Allow, []string{"github.com:443"}) {
		t.Errorf("rules file %s: %+v, %v", data, f, err)
	}
	var raw map[string]any
	if json.Unmarshal(data, &raw) != nil {
		t.Error("not JSON")
	}
	if _, err := rulesTar("agent.coder", []string{"https://x"}, nil, nil); err == nil {
		t.Error("an invalid rule made a rules file")
	}
	// An empty allowlist is a rules file that allows nothing.
	b, _ = rulesTar("agent.coder", nil, nil, forbid)
	tr = tar.NewReader(bytes.NewReader(b))
	tr.Next()
	if h, err := tr.Next(); err != nil || h.Name != "rules.json" {
		t.Fatalf("header %+v, %v", h, err)
	}
	// The forbid file alone (pushForbid).
	b, _ = forbidTar(forbid)
	tr = tar.NewReader(bytes.NewReader(b))
	if h, err := tr.Next(); err != nil || h.Name != "forbid.json" {
		t.Fatalf("header %+v, %v", h, err)
	}
	if h, err := tr.Next(); err != io.EOF {
		t.Errorf("a second file %+v, %v", h, err)
	}
}

func TestEgressConfig(t *testing.T) {
	for _, tt := range []struct {
		attrs map[string]cty.Value
		want  string
	}{
		{map[string]cty.Value{"egress_subnet_pool": cty.StringVal("10.0.0.0/25")}, "smaller than one /24"},
		{map[string]cty.Value{"egress_subnet_pool": cty.StringVal("nope")}, "not a CIDR"},
		{map[string]cty.Value{"egress_network": cty.StringVal("a b")}, "not a docker network name"},
		{map[string]cty.Value{"gateway_dns": cty.ListVal([]cty.Value{cty.StringVal("dns.example")})}, "not an IP address"},
	} {
		d := newDriver(nil, func(engine.Endpoint) (dockerAPI, error) { return &fakeAPI{}, nil })
		cfg := map[string]cty.Value{"host": cty.NullVal(cty.String)}
		for k, v := range tt.attrs {
			cfg[k] = v
		}
		err := d.Configure(t.Context(), drivers.ConfigureRequest{Runtime: "r", Config: cty.ObjectVal(cfg)})
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%v: err = %v, want %q", tt.attrs, err, tt.want)
		}
	}
}

func TestEgressNetworkNames(t *testing.T) {
	name, err := egressNetworkName(testLineage, "runtime.local.egress")
	if err != nil || name != "bf-0f1e2d3c-local.egress" {
		t.Errorf("name = %q, %v", name, err)
	}
	for _, addr := range []string{"agent.a.network", "runtime.egress", "runtime.a.b.egress"} {
		if isEgressNetworkAddr(addr) {
			t.Errorf("%s taken for an egress network", addr)
		}
	}
	if a := gateway.AgentOf("agent.coder.sidecar.web"); a != "agent.coder" {
		t.Errorf("gateway.AgentOf = %s", a)
	}
}

func TestPlanTooManySidecars(t *testing.T) {
	d := egressDriver(t, listing(isolatingEngine()), nil)
	var scs []drivers.SidecarSpec
	for i := range 12 {
		name := fmt.Sprintf("s%d", i)
		scs = append(scs, drivers.SidecarSpec{Addr: "agent.a.sidecar." + name, Name: name, Workload: drivers.MustWorkload(map[string]cty.Value{"image": cty.StringVal("x")})})
	}
	_, err := d.Plan(t.Context(), drivers.PlanRequest{Agent: drivers.AgentSpec{Addr: "agent.a", Name: "a", Workload: drivers.MustWorkload(map[string]cty.Value{"image": cty.StringVal("x:1")}), Sidecars: scs}})
	if err == nil || !strings.Contains(err.Error(), "at most 11 sidecars") {
		t.Errorf("12 sidecars: err = %v", err)
	}
	planObjects(t, d, drivers.AgentSpec{Addr: "agent.a", Name: "a", Workload: drivers.MustWorkload(map[string]cty.Value{"image": cty.StringVal("x:1")}), Sidecars: scs[:11]})
}

func TestOneEgressNetwork(t *testing.T) {
	var removed []string
	api := &fakeAPI{NetworkRemoveFn: func(id string) error { removed = append(removed, id); return nil }}
	d := egressDriver(t, api, nil)
	lbl := map[string]string{drivers.LabelLineage: testLineage, drivers.LabelAddress: "runtime.local.egress"}
	now := time.Now()
	nets := []network.Summary{
		{ID: "newer", Name: "bf-0f1e2d3c-local.egress", Labels: lbl, Created: now},
		{ID: "other", Name: "unrelated"},
		{ID: "older", Name: "bf-0f1e2d3c-local.egress", Labels: lbl, Created: now.Add(-time.Second)},
	}
	kept, err := d.oneEgressNetwork(t.Context(), api, nets, "bf-0f1e2d3c-local.egress", testLineage, "runtime.local.egress")
	if err != nil || kept.ID != "older" || !slices.Equal(removed, []string{"newer"}) {
		t.Errorf("kept %q, removed %v, err %v; want the older kept and the newer removed", kept.ID, removed, err)
	}
	nets[0].Labels = map[string]string{drivers.LabelLineage: "someone-else"}
	if _, err := d.oneEgressNetwork(t.Context(), api, nets, "bf-0f1e2d3c-local.egress", testLineage, "runtime.local.egress"); err == nil || !strings.Contains(err.Error(), "does not belong to this state") {
		t.Errorf("a foreign network of that name: err = %v", err)
	}
}

// TestDeleteGatewaySweepsImages: when a run that deleted a gateway closes
// the driver, the gateway images are offered for removal, never forced:
// the engine keeps those a container uses (a conflict), and that is no
// error.
func TestDeleteGatewaySweepsImages(t *testing.T) {
	var removed []string
	api := &fakeAPI{
		ContainerRemoveFn: func(id string, o container.RemoveOptions) error {
			if id != "g1" || !o.Force {
				t.Errorf("ContainerRemove(%q, %+v)", id, o)
			}
			return nil
		},
		ImageListFn: func(o image.ListOptions) ([]image.Summary, error) {
			if o.Filters.ExactMatch("label", labelSnapshotOf) {
				return nil, nil // no snapshot of the lineage
			}
			if got := o.Filters.Get("label"); !slices.Equal(got, []string{gateway.ImageLabel + "=1"}) || o.Filters.Len() != 1 {
				t.Errorf("image list filters = %v, want only the gateway image label", o.Filters)
			}
			return []image.Summary{{ID: "sha256:inuse"}, {ID: "sha256:old"}}, nil
		},
		ImageRemoveFn: func(ref string, o image.RemoveOptions) ([]image.DeleteResponse, error) {
			if o.Force {
				t.Errorf("ImageRemove(%q) forced: it would untag an image a container uses", ref)
			}
			if ref == "sha256:inuse" {
				return nil, cerrdefs.ErrConflict.WithMessage("conflict: unable to remove repository reference (must force) - container 1234 is using its referenced image")
			}
			removed = append(removed, ref)
			return nil, nil
		},
	}
	d := egressDriver(t, api, nil)
	if _, err := d.Apply(t.Context(), drivers.ApplyRequest{Op: drivers.OpDelete, Lineage: testLineage, ID: "g1", Object: drivers.Object{Addr: "agent.a.gateway", Kind: gateway.Kind}}); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if calls := api.calls(); !slices.Equal(calls, []string{"ContainerRemove"}) {
		t.Errorf("delete made calls %v, want only the remove (the sweep waits for Close)", calls)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(removed, []string{"sha256:old"}) {
		t.Errorf("removed %v, want the unused image", removed)
	}
}

// TestGatewaySweepKeepsImageForSnapshots (issue 28): the sweep after a
// run that deleted a gateway or a snapshot keeps this binary's gateway
// image while the lineage still has snapshot images (its resume runs a
// gateway from it), and when the engine cannot say; older binaries'
// images go either way, and with the last snapshot this one goes too.
func TestGatewaySweepKeepsImageForSnapshots(t *testing.T) {
	bin, err := gateway.ReadBinary("")
	if err != nil {
		t.Fatal(err)
	}
	current := bin.ImageRef()
	for _, tc := range []struct {
		name    string
		op      string // what the run deleted
		snaps   []image.Summary
		listErr error
		removed []string
	}{
		{name: "gateway deleted, snapshots left", op: gateway.Kind, snaps: []image.Summary{{ID: "sha256:snap"}}, removed: []string{"sha256:old"}},
		{name: "gateway deleted, no snapshot", op: gateway.Kind, removed: []string{"sha256:current", "sha256:old"}},
		{name: "a snapshot deleted, others left", op: drivers.KindSnapshot, snaps: []image.Summary{{ID: "sha256:snap"}}, removed: []string{"sha256:old"}},
		{name: "the last snapshot deleted", op: drivers.KindSnapshot, removed: []string{"sha256:current", "sha256:old"}},
		{name: "snapshots unknown", op: gateway.Kind, listErr: errors.New("engine busy"), removed: []string{"sha256:old"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var removed []string
			api := &fakeAPI{
				ContainerRemoveFn: func(string, container.RemoveOptions) error { return nil },
				ImageInspectFn: func(ref string) (image.InspectResponse, error) {
					return image.InspectResponse{}, cerrdefs.ErrNotFound.WithMessage("No such image: " + ref)
				},
				ImageListFn: func(o image.ListOptions) ([]image.Summary, error) {
					if o.Filters.ExactMatch("label", labelSnapshotOf) {
						if !o.Filters.ExactMatch("label", drivers.LabelLineage+"="+testLineage) {
							t.Errorf("snapshot images listed with %v, want this lineage's", o.Filters)
						}
						return tc.snaps, tc.listErr
					}
					return []image.Summary{
						{ID: "sha256:current", RepoTags: []string{current}},
						{ID: "sha256:old", RepoTags: []string{gateway.ImageRepo + ":0ld"}},
					}, nil
				},
				ImageRemoveFn: func(ref string, o image.RemoveOptions) ([]image.DeleteResponse, error) {
					removed = append(removed, ref)
					return nil, nil
				},
			}
			d := egressDriver(t, api, nil)
			req := drivers.ApplyRequest{Op: drivers.OpDelete, Lineage: testLineage, ID: "g1", Object: drivers.Object{Addr: "agent.a.gateway", Kind: gateway.Kind}}
			if tc.op == drivers.KindSnapshot {
				// Already gone from the engine: the delete is done, and
				// the sweep still runs.
				req = drivers.ApplyRequest{Op: drivers.OpDelete, Lineage: testLineage, ID: "sha256:s1", Object: drivers.Object{Addr: "agent.a.snapshot.1", Kind: drivers.KindSnapshot}}
			}
			if _, err := d.Apply(t.Context(), req); err != nil {
				t.Fatalf("delete: %v", err)
			}
			if err := d.Close(); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(removed, tc.removed) {
				t.Errorf("removed %v, want %v", removed, tc.removed)
			}
		})
	}
}

// TestCloseWithoutGatewayDeleteSweepsNothing: plan, and any run that
// deleted no gateway, leave the images alone.
func TestCloseWithoutGatewayDeleteSweepsNothing(t *testing.T) {
	api := listing(isolatingEngine())
	d := egressDriver(t, api, nil)
	planObjects(t, d, drivers.AgentSpec{Addr: "agent.a", Name: "a", Workload: drivers.MustWorkload(map[string]cty.Value{"image": cty.StringVal("x:1")})})
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if calls := api.calls(); !slices.Equal(calls, []string{"NetworkList"}) {
		t.Errorf("plan and Close made calls %v, want only the isolation check's network list", calls)
	}
}

// TestGatewayImageSweptMeanwhile: when another process's sweep removes the
// gateway image between making sure of it and creating the container, the
// create makes sure of it again, a bounded number of times.
func TestGatewayImageSweptMeanwhile(t *testing.T) {
	for _, tt := range []struct {
		name    string
		misses  int // creates answered "no such image"
		wantErr bool
	}{
		{"swept once", 1, false},
		{"swept twice", 2, false},
		{"swept every time", 99, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			creates := 0
			api := &fakeAPI{
				ImageInspectFn: func(ref string) (image.InspectResponse, error) { return image.InspectResponse{ID: "sha256:gw"}, nil },
				ContainerCreateFn: func(cfg *container.Config, name string) (container.CreateResponse, error) {
					creates++
					if creates <= tt.misses {
						return container.CreateResponse{}, cerrdefs.ErrNotFound.WithMessage("No such image: " + cfg.Image)
					}
					return container.CreateResponse{ID: "g1"}, nil
				},
			}
			d := egressDriver(t, api, nil)
			created, err := d.createGatewayContainer(t.Context(), api, gateway.Binary{Path: "/unused", Sum: "abc"}, &container.Config{}, &container.HostConfig{}, &network.NetworkingConfig{}, "bf-x-gateway")
			if tt.wantErr {
				if err == nil || !cerrdefs.IsNotFound(err) || creates != gatewayImageAttempts {
					t.Errorf("err = %v after %d creates, want the not-found error after %d", err, creates, gatewayImageAttempts)
				}
				return
			}
			if err != nil || created.ID != "g1" || creates != tt.misses+1 {
				t.Errorf("created %+v, %v after %d creates, want g1 after %d", created, err, creates, tt.misses+1)
			}
			inspects := 0
			for _, c := range api.calls() {
				if c == "ImageInspect" {
					inspects++
				}
			}
			if inspects != creates {
				t.Errorf("calls %v: want the image made sure of before each create", api.calls())
			}
		})
	}
}

// TestGatewayImageMadeSureOnce: a driver makes sure of the gateway image
// once; the gateways created after go straight to their create, and one
// the engine answers "no such image" (swept by another process) makes
// sure of it again; a sweep of this driver's forgets it.
func TestGatewayImageMadeSureOnce(t *testing.T) {
	gone := false
	api := &fakeAPI{
		ImageInspectFn: func(ref string) (image.InspectResponse, error) { return image.InspectResponse{ID: "sha256:gw"}, nil },
		ContainerCreateFn: func(cfg *container.Config, name string) (container.CreateResponse, error) {
			if gone {
				gone = false
				return container.CreateResponse{}, cerrdefs.ErrNotFound.WithMessage("No such image: " + cfg.Image)
			}
			return container.CreateResponse{ID: name}, nil
		},
		ImageListFn: func(image.ListOptions) ([]image.Summary, error) { return nil, nil },
	}
	d := egressDriver(t, api, nil)
	create := func(name string) []string {
		t.Helper()
		api.Calls = nil
		if _, err := d.createGatewayContainer(t.Context(), api, gateway.Binary{Path: "/unused", Sum: "abc"}, &container.Config{}, &container.HostConfig{}, &network.NetworkingConfig{}, name); err != nil {
			t.Fatal(err)
		}
		return api.calls()
	}
	if calls := create("g1"); !slices.Equal(calls, []string{"ImageInspect", "ContainerCreate"}) {
		t.Errorf("first gateway: calls %v, want the image made sure of, then the create", calls)
	}
	if calls := create("g2"); !slices.Equal(calls, []string{"ContainerCreate"}) {
		t.Errorf("second gateway: calls %v, want the create alone", calls)
	}
	gone = true
	if calls := create("g3"); !slices.Equal(calls, []string{"ContainerCreate", "ImageInspect", "ContainerCreate"}) {
		t.Errorf("image swept meanwhile: calls %v, want the create, the image made sure of again, the create", calls)
	}
	d.sweepGatewayImages(t.Context(), api, nil)
	if calls := create("g4"); !slices.Equal(calls, []string{"ImageInspect", "ContainerCreate"}) {
		t.Errorf("after this driver's sweep: calls %v, want the image made sure of again", calls)
	}
}

// TestReadGatewayReports: Read asks each running gateway started with a
// report (-state) for it, one call each beside the list calls, and reports
// what it has in force as LiveObject.Config: the last files-in-force line
// at the end of its log, else (scrolled away, an older gateway) the report
// file; a missing report is "missing", a gateway without one is not asked.
func TestReadGatewayReports(t *testing.T) {
	lbl := func(addr string) map[string]string {
		return withKind(map[string]string{drivers.LabelLineage: testLineage, drivers.LabelAddress: addr, drivers.LabelConfigHash: "h"}, gateway.Kind)
	}
	cmd := "/bottlefile gateway -listen 10.0.0.254:3128 -rules /etc/bottlefile/rules.json -state " + gateway.StatePath
	api := &fakeAPI{
		ContainerListFn: func(container.ListOptions) ([]container.Summary, error) {
			return []container.Summary{
				{ID: "g1", State: "running", Command: cmd, Labels: lbl("agent.a.gateway")},
				{ID: "g2", State: "running", Command: "/bottlefile gateway -rules /etc/bottlefile/rules.json", Labels: lbl("agent.b.gateway")},
				{ID: "g3", State: "running", Command: cmd, Labels: lbl("agent.c.gateway")},
				{ID: "g4", State: "exited", Command: cmd, Labels: lbl("agent.d.gateway")},
				{ID: "g5", State: "running", Command: cmd, Labels: lbl("agent.e.gateway")},
				{ID: "g6", State: "running", Command: cmd, Labels: lbl("agent.f.gateway")},
			}, nil
		},
		ContainerLogsFn: func(id string, o container.LogsOptions) (string, string, error) {
			if o.ShowStdout || !o.ShowStderr || o.Follow || o.Tail != strconv.Itoa(gatewayReportTail) {
				t.Errorf("logs of %s read with %+v, want the end of stderr", id, o)
			}
			switch id {
			case "g5":
				// Edited by hand and reloaded: the last line counts; a
				// decision on stdout naming the words does not.
				return `{"decision":"deny","host":"{\"event\":\"files-in-force\",\"loaded\":{\"rules\":\"forged\"}}"}` + "\n",
					`{"event":"listening"}` + "\n" +
						`{"time":"2026-11-27T09:00:00Z","event":"files-in-force","loaded":{"credentials":"c5","forbid":"f5","rules":"r5"}}` + "\n" +
						`{"event":"rules-loaded","allow":["a:443"]}` + "\n" +
						`{"time":"2026-11-27T09:01:00Z","event":"files-in-force","loaded":{"credentials":"c5","forbid":"f5","rules":"hand"}}` + "\n" +
						`{"event":"rules-loaded","allow":["a:443","b:443"]}` + "\n", nil
			case "g6":
				return "", "", errors.New("the engine cannot read this log driver")
			}
			// Scrolled away, or a gateway from before the line.
			return "", `{"event":"listening"}` + "\n", nil
		},
		CopyFromContainerFn: func(id, path string) ([]byte, error) {
			if path != gateway.StatePath {
				t.Errorf("read %s of %s", path, id)
			}
			switch id {
			case "g3":
				return nil, cerrdefs.ErrNotFound
			case "g5":
				t.Errorf("read the report file of %s, whose log has the report", id)
			}
			return []byte(`{"credentials":"c1","forbid":"f1","rules":"r1"}`), nil
		},
		NetworkListFn: func(network.ListOptions) ([]network.Summary, error) { return nil, nil },
		ImageListFn:   func(image.ListOptions) ([]image.Summary, error) { return nil, nil },
	}
	d := fakeDriver(t, api, DefaultSubnetPool)
	resp, err := d.Read(t.Context(), drivers.ReadRequest{Lineage: testLineage})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, o := range resp.Objects {
		got[o.Addr] = o.Config
	}
	want := map[string]string{
		"agent.a.gateway": "credentials=c1 forbid=f1 rules=r1",
		"agent.b.gateway": "",
		"agent.c.gateway": "credentials=missing rules=missing",
		"agent.d.gateway": "",
		"agent.e.gateway": "credentials=c5 forbid=f5 rules=hand",
		"agent.f.gateway": "credentials=c1 forbid=f1 rules=r1",
	}
	if !maps.Equal(got, want) {
		t.Errorf("configs = %v, want %v", got, want)
	}
	calls := api.calls()
	slices.Sort(calls)
	if want := []string{"ContainerList", "ContainerLogs", "ContainerLogs", "ContainerLogs", "ContainerLogs", "CopyFromContainer", "CopyFromContainer", "CopyFromContainer", "ImageList", "NetworkList"}; !slices.Equal(calls, want) {
		t.Errorf("calls = %v, want %v", calls, want)
	}

	// A destroy's refresh (NoConfig) reads no report: every gateway goes.
	api.Calls = nil
	resp, err = d.Read(t.Context(), drivers.ReadRequest{Lineage: testLineage, NoConfig: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range resp.Objects {
		if o.Config != "" {
			t.Errorf("NoConfig: %s has config %q", o.Addr, o.Config)
		}
	}
	if calls := api.calls(); slices.Contains(calls, "CopyFromContainer") || slices.Contains(calls, "ContainerLogs") {
		t.Errorf("NoConfig: calls = %v, want no report read", calls)
	}
}

// startingFake is a fakeAPI whose ContainerStart succeeds.
type startingFake struct{ *fakeAPI }

func (f startingFake) ContainerStart(context.Context, string, container.StartOptions) error {
	f.record("ContainerStart")
	return nil
}

// TestEngineHostProbeOffThePath (issue 28): the gateways wait for the
// engine host probe's answer alone. The engine's info is asked while the
// probe runs; a probe a killed run left is removed beside it, never this
// run's own; the probe's container is removed after the answer, and Close
// waits for that. (A step done in line instead shows as a guard expiring:
// what it waits for never comes.)
func TestEngineHostProbeOffThePath(t *testing.T) {
	created, infoAsked, answered := make(chan struct{}), make(chan struct{}), make(chan struct{})
	guard := func(ch chan struct{}, what string) {
		select {
		case <-ch:
		case <-time.After(30 * time.Second):
			t.Errorf("%s never came", what)
		}
	}
	var mu sync.Mutex
	var removed []string
	run := ""
	api := startingFake{&fakeAPI{
		ImageInspectFn: func(string) (image.InspectResponse, error) { return image.InspectResponse{ID: "sha256:gw"}, nil },
		ContainerCreateFn: func(cfg *container.Config, name string) (container.CreateResponse, error) {
			if cfg.Labels[labelKind] != kindHostProbe || cfg.Labels[labelProbeRun] == "" {
				t.Errorf("probe labels %v", cfg.Labels)
			}
			mu.Lock()
			run = cfg.Labels[labelProbeRun]
			mu.Unlock()
			close(created)
			return container.CreateResponse{ID: "probe-new"}, nil
		},
		ContainerListFn: func(container.ListOptions) ([]container.Summary, error) {
			guard(created, "the probe's create") // the worst case: listed after it
			mu.Lock()
			defer mu.Unlock()
			return []container.Summary{
				{ID: "probe-left", Labels: map[string]string{labelProbeRun: "1-dead"}},
				{ID: "probe-new", Labels: map[string]string{labelProbeRun: run}},
			}, nil
		},
		InfoFn: func() (system.Info, error) {
			close(infoAsked)
			return system.Info{Swarm: swarm.Info{NodeAddr: "10.77.0.9"}}, nil
		},
		ContainerLogsFn: func(id string, o container.LogsOptions) (string, string, error) {
			guard(infoAsked, "the engine's info while the probe ran")
			return "10.77.0.5\n127.0.0.1\n", "", nil
		},
		ContainerInspectFn: func(id string) (container.InspectResponse, error) {
			return container.InspectResponse{ContainerJSONBase: &container.ContainerJSONBase{ID: id, State: &container.State{ExitCode: 0}}}, nil
		},
		ContainerRemoveFn: func(id string, o container.RemoveOptions) error {
			if id == "probe-new" {
				guard(answered, "the answer before the probe's removal")
			}
			mu.Lock()
			removed = append(removed, id)
			mu.Unlock()
			return nil
		},
	}}
	d := egressDriver(t, api.fakeAPI, nil)
	addrs := d.engineHostOwnAddrs(t.Context(), api, testLineage)
	close(answered)
	if want := []netip.Addr{netip.MustParseAddr("10.77.0.5"), netip.MustParseAddr("10.77.0.9")}; !slices.Equal(addrs, want) {
		t.Errorf("engine host addresses %v, want %v", addrs, want)
	}
	d.hostWG.Wait() // as Close does
	mu.Lock()
	defer mu.Unlock()
	slices.Sort(removed)
	if want := []string{"probe-left", "probe-new"}; !slices.Equal(removed, want) {
		t.Errorf("removed %v, want %v: the left probe and, once, this run's", removed, want)
	}
}
