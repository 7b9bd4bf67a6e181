package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/network"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/hcl/v2/hcldec"
	"github.com/zclconf/go-cty/cty"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/engine"
	"github.com/bottlefile/bottlefile/drivers/gateway"
)

const testLineage = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"

// testLogger sends driver logs to the test's output.
func testLogger(t *testing.T) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Name: t.Name(), Output: t.Output(), Level: hclog.Debug})
}

// fakeDriver is a driver configured against a fake engine.
func fakeDriver(t *testing.T, api *fakeAPI, pool string) *Driver {
	t.Helper()
	d := newDriver(testLogger(t), func(engine.Endpoint) (dockerAPI, error) { return api, nil })
	cfg := cty.ObjectVal(map[string]cty.Value{"host": cty.NullVal(cty.String), "subnet_pool": cty.StringVal(pool)})
	if err := d.Configure(t.Context(), drivers.ConfigureRequest{Runtime: "test", Config: cfg}); err != nil {
		t.Fatalf("Configure: %v", err)
	}
	return d
}

func nets(subnets ...string) []network.Summary {
	var out []network.Summary
	for i, s := range subnets {
		out = append(out, network.Summary{
			Name: "n" + string(rune('a'+i)),
			ID:   "id-" + s,
			IPAM: network.IPAM{Config: []network.IPAMConfig{{Subnet: s}}},
		})
	}
	return out
}

func TestAllocateSubnet(t *testing.T) {
	pool := netip.MustParsePrefix("10.213.0.0/16")
	tests := []struct {
		name string
		used []string
		want string
	}{
		{"empty engine", nil, "10.213.0.0/28"},
		{"first block taken", []string{"10.213.0.0/28"}, "10.213.0.16/28"},
		{"larger network covers several blocks", []string{"10.213.0.0/28", "10.213.0.32/27"}, "10.213.0.16/28"},
		{"gap after a /27", []string{"10.213.0.0/27", "10.213.0.48/28"}, "10.213.0.32/28"},
		{"a /24 inside the pool", []string{"10.213.0.0/24"}, "10.213.1.0/28"},
		{"a network covering the pool start", []string{"10.0.0.0/8"}, ""},
		{"outside the pool is ignored", []string{"172.17.0.0/16", "192.168.0.0/20"}, "10.213.0.0/28"},
		{"unaligned subnet", []string{"10.213.0.8/29"}, "10.213.0.16/28"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			used := usedSubnets(nets(tt.used...))
			got, err := allocateBlock(pool, used, subnetBits)
			if tt.want == "" {
				if err == nil {
					t.Fatalf("allocateBlock = %s, want an exhaustion error", got)
				}
				return
			}
			if err != nil {
				t.Fatalf("allocateBlock: %v", err)
			}
			if got.String() != tt.want {
				t.Errorf("allocateBlock = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestAllocateSubnetExhausted(t *testing.T) {
	pool := netip.MustParsePrefix("10.9.0.0/27") // two /28 blocks
	var c subnetClaims
	api := &fakeAPI{NetworkListFn: func(network.ListOptions) ([]network.Summary, error) {
		return nets("10.9.0.0/28", "10.9.0.16/28"), nil
	}}
	_, _, err := c.claim(t.Context(), api, "bf-x", pool, subnetBits, nil, "subnet_pool", false)
	if err == nil {
		t.Fatal("want an error for an exhausted pool")
	}
	for _, want := range []string{"10.9.0.0/27", "exhausted", "subnet_pool"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

func TestCreateNetworkAvoidsOverlap(t *testing.T) {
	var mu sync.Mutex
	existing := nets("10.213.0.0/28", "10.213.0.16/28", "172.17.0.0/16")
	var created []network.CreateOptions
	// The creates must be in flight together: each waits for all four
	// (or, when they come one at a time, gives up after a while).
	arrived, inFlight, maxInFlight := make(chan struct{}, 4), 0, 0
	api := &fakeAPI{
		NetworkListFn: func(o network.ListOptions) ([]network.Summary, error) {
			if o.Filters.Len() != 0 {
				t.Errorf("allocation must list all networks, got filters %v", o.Filters)
			}
			mu.Lock()
			defer mu.Unlock()
			return slices.Clone(existing), nil
		},
		NetworkCreateFn: func(name string, o network.CreateOptions) (network.CreateResponse, error) {
			mu.Lock()
			inFlight++
			maxInFlight = max(maxInFlight, inFlight)
			mu.Unlock()
			arrived <- struct{}{}
			for deadline := time.Now().Add(10 * time.Second); len(arrived) < cap(arrived) && time.Now().Before(deadline); {
				time.Sleep(time.Millisecond)
			}
			mu.Lock()
			defer mu.Unlock()
			inFlight--
			created = append(created, o)
			existing = append(existing, network.Summary{Name: name, ID: name, IPAM: *o.IPAM})
			return network.CreateResponse{ID: "id-" + name}, nil
		},
	}
	d := fakeDriver(t, api, DefaultSubnetPool)

	// Concurrent creates must each get their own block.
	agents := []string{"a", "b", "c", "d"}
	subnets := make([]string, len(agents))
	var wg sync.WaitGroup
	for i, name := range agents {
		wg.Go(func() {
			resp, err := d.Apply(t.Context(), drivers.ApplyRequest{
				Op: drivers.OpCreate, Lineage: testLineage, Hash: "h",
				Object: drivers.Object{Addr: "agent." + name + ".network", Kind: "network", Attrs: map[string]cty.Value{"internal": cty.True}},
			})
			if err != nil {
				t.Errorf("create network %s: %v", name, err)
				return
			}
			subnets[i] = resp.Computed["subnet"]
			if want := "bf-0f1e2d3c-" + name; resp.Computed["name"] != want {
				t.Errorf("name = %q, want %q", resp.Computed["name"], want)
			}
		})
	}
	wg.Wait()
	if maxInFlight != len(agents) {
		t.Errorf("at most %d network creates were in flight at once, want all %d", maxInFlight, len(agents))
	}
	slices.Sort(subnets)
	want := []string{"10.213.0.32/28", "10.213.0.48/28", "10.213.0.64/28", "10.213.0.80/28"}
	if !slices.Equal(subnets, want) {
		t.Errorf("subnets = %v, want %v", subnets, want)
	}
	for _, o := range created {
		if !o.Internal || o.Options[inhibitIPv4] != "true" || o.Driver != "bridge" {
			t.Errorf("network options = %+v, want an internal bridge with %s=true", o, inhibitIPv4)
		}
		if o.Labels[drivers.LabelLineage] != testLineage || o.Labels[drivers.LabelConfigHash] != "h" || !strings.HasPrefix(o.Labels[drivers.LabelAddress], "agent.") {
			t.Errorf("labels = %v", o.Labels)
		}
	}
}

func TestCreateNetworkRetriesOnOverlap(t *testing.T) {
	var tried []string
	api := &fakeAPI{
		NetworkListFn: func(network.ListOptions) ([]network.Summary, error) { return nil, nil },
		NetworkCreateFn: func(name string, o network.CreateOptions) (network.CreateResponse, error) {
			s := o.IPAM.Config[0].Subnet
			tried = append(tried, s)
			if len(tried) < 3 {
				// Another process took the block between list and create.
				return network.CreateResponse{}, errors.New("Error response from daemon: Pool overlaps with other one on this address space")
			}
			return network.CreateResponse{ID: "n1"}, nil
		},
	}
	d := fakeDriver(t, api, DefaultSubnetPool)
	resp, err := d.Apply(t.Context(), drivers.ApplyRequest{
		Op: drivers.OpCreate, Lineage: testLineage,
		Object: drivers.Object{Addr: "agent.x.network", Kind: "network"},
	})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	// The first free block first; after a refusal, other processes are
	// at it too, and the next tries start at random blocks of the pool.
	if len(tried) != 3 || tried[0] != "10.213.0.0/28" {
		t.Fatalf("tried %v, want three blocks, the first free one first", tried)
	}
	pool := netip.MustParsePrefix(DefaultSubnetPool)
	for _, s := range tried {
		if p := netip.MustParsePrefix(s); p.Bits() != subnetBits || !pool.Contains(p.Addr()) {
			t.Errorf("tried %s, not a /%d of %s", s, subnetBits, pool)
		}
	}
	if len(slices.Compact(slices.Sorted(slices.Values(tried)))) != 3 {
		t.Errorf("tried %v: a refused block again", tried)
	}
	if resp.ID != "n1" || resp.Computed["subnet"] != tried[2] {
		t.Errorf("resp = %+v, want the block tried last", resp)
	}
}

// TestClaimScattersAfterRefusal: processes racing for the pool's first free
// blocks keep meeting; once refused, a claim starts at a random block, so
// two such claims rarely pick the same one.
func TestClaimScattersAfterRefusal(t *testing.T) {
	api := &fakeAPI{NetworkListFn: func(network.ListOptions) ([]network.Summary, error) { return nil, nil }}
	pool := netip.MustParsePrefix(DefaultSubnetPool)
	refused := []netip.Prefix{netip.MustParsePrefix("10.213.0.0/28")}
	seen := map[netip.Prefix]bool{}
	for range 20 {
		var c subnetClaims // a process of its own each time
		_, p, err := c.claim(t.Context(), api, "bf-x", pool, subnetBits, refused, "subnet_pool", false)
		if err != nil {
			t.Fatal(err)
		}
		if p == refused[0] {
			t.Fatalf("claimed the refused block %s", p)
		}
		seen[p] = true
	}
	// 20 draws from 4,095 blocks: all alike only if not random at all.
	if len(seen) < 10 {
		t.Errorf("20 claims after a refusal picked only %d different blocks: %v", len(seen), seen)
	}
}

func TestCreateNetworkPoolExhausted(t *testing.T) {
	api := &fakeAPI{
		NetworkListFn: func(network.ListOptions) ([]network.Summary, error) {
			return nets("10.50.0.0/28", "10.50.0.16/28"), nil
		},
	}
	d := fakeDriver(t, api, "10.50.0.0/27")
	_, err := d.Apply(t.Context(), drivers.ApplyRequest{
		Op: drivers.OpCreate, Lineage: testLineage,
		Object: drivers.Object{Addr: "agent.x.network", Kind: "network"},
	})
	if err == nil || !strings.Contains(err.Error(), "exhausted") || !strings.Contains(err.Error(), "agent.x.network") {
		t.Fatalf("err = %v, want a pool exhaustion error naming agent.x.network", err)
	}
	if slices.Contains(api.calls(), "NetworkCreate") {
		t.Error("NetworkCreate called on an exhausted pool")
	}
}

func TestCreateNetworkNameTaken(t *testing.T) {
	ours := network.Summary{
		Name: "bf-0f1e2d3c-x", ID: "old", Driver: "bridge", Internal: true,
		Options: map[string]string{inhibitIPv4: "true"},
		IPAM:    network.IPAM{Config: []network.IPAMConfig{{Subnet: "10.213.0.48/28"}}},
		Labels:  map[string]string{drivers.LabelLineage: testLineage, drivers.LabelAddress: "agent.x.network"},
	}
	odd := ours
	odd.Internal = false
	foreign := ours
	foreign.Labels = map[string]string{drivers.LabelLineage: "other", drivers.LabelAddress: "agent.x.network"}
	for _, tt := range []struct {
		name    string
		old     network.Summary
		wantErr string
		wantID  string
		removed bool
	}{
		{"ours from a crash is adopted", ours, "", "old", false},
		{"ours but not as we make it is made again", odd, "", "new", true},
		{"someone else's", foreign, "does not belong", "", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			existing := []network.Summary{tt.old}
			removed := false
			api := &fakeAPI{
				NetworkListFn: func(network.ListOptions) ([]network.Summary, error) { return existing, nil },
				NetworkRemoveFn: func(id string) error {
					removed = id == "old"
					existing = nil
					return nil
				},
				NetworkCreateFn: func(string, network.CreateOptions) (network.CreateResponse, error) {
					return network.CreateResponse{ID: "new"}, nil
				},
			}
			d := fakeDriver(t, api, DefaultSubnetPool)
			resp, err := d.Apply(t.Context(), drivers.ApplyRequest{
				Op: drivers.OpCreate, Lineage: testLineage,
				Object: drivers.Object{Addr: "agent.x.network", Kind: "network"},
			})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
			} else if err != nil || resp.ID != tt.wantID {
				t.Fatalf("resp, err = %+v, %v; want id %s", resp, err, tt.wantID)
			}
			if tt.wantID == "old" && resp.Computed["subnet"] != "10.213.0.48/28" {
				t.Errorf("adopted subnet = %q", resp.Computed["subnet"])
			}
			if removed != tt.removed {
				t.Errorf("removed = %v, want %v", removed, tt.removed)
			}
		})
	}
}

func TestConfigure(t *testing.T) {
	tests := []struct {
		pool    cty.Value
		wantErr string
	}{
		{cty.NullVal(cty.String), ""},
		{cty.StringVal("10.213.0.0/16"), ""},
		{cty.StringVal("192.168.64.0/28"), ""},
		{cty.StringVal("10.213.0.0"), "not a CIDR"},
		{cty.StringVal("banana"), "not a CIDR"},
		{cty.StringVal("10.213.5.0/16"), `did you mean "10.213.0.0/16"`},
		{cty.StringVal("10.213.0.0/29"), "smaller than one /28"},
		{cty.StringVal("fd00::/64"), "IPv4"},
		{cty.UnknownVal(cty.String), "not known"},
	}
	for _, tt := range tests {
		t.Run(tt.pool.GoString(), func(t *testing.T) {
			made := 0
			d := newDriver(testLogger(t), func(engine.Endpoint) (dockerAPI, error) { made++; return &fakeAPI{}, nil })
			cfg := cty.ObjectVal(map[string]cty.Value{"host": cty.NullVal(cty.String), "subnet_pool": tt.pool})
			err := d.Configure(t.Context(), drivers.ConfigureRequest{Runtime: "local", Config: cfg})
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Configure: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), `runtime "local"`) {
				t.Fatalf("err = %v, want one naming the runtime and %q", err, tt.wantErr)
			}
			if made != 0 {
				t.Error("a client was made for an invalid configuration")
			}
		})
	}
}

func TestConfigureTouchesNoEngine(t *testing.T) {
	api := &fakeAPI{}
	var hosts []string
	d := newDriver(nil, func(ep engine.Endpoint) (dockerAPI, error) { hosts = append(hosts, ep.Host); return api, nil })
	cfg := cty.ObjectVal(map[string]cty.Value{"host": cty.StringVal("unix:///nowhere.sock"), "subnet_pool": cty.NullVal(cty.String)})
	if err := d.Configure(t.Context(), drivers.ConfigureRequest{Runtime: "r", Config: cfg}); err != nil {
		t.Fatal(err)
	}
	if len(api.calls()) != 0 {
		t.Errorf("Configure called the engine: %v", api.calls())
	}
	if !slices.Equal(hosts, []string{"unix:///nowhere.sock"}) {
		t.Errorf("hosts = %v", hosts)
	}
	if d.pool.String() != DefaultSubnetPool {
		t.Errorf("pool = %s", d.pool)
	}
	// A real client for a bad host is refused at Configure, without a call.
	real, _ := New(nil)
	bad := cty.ObjectVal(map[string]cty.Value{"host": cty.StringVal("::not a url::"), "subnet_pool": cty.NullVal(cty.String)})
	if err := real.Configure(t.Context(), drivers.ConfigureRequest{Runtime: "r", Config: bad}); err == nil || !strings.Contains(err.Error(), "::not a url::") {
		t.Errorf("bad host: err = %v", err)
	}
}

func TestConfigSpecDecodes(t *testing.T) {
	d, _ := New(nil)
	spec := d.Declare().Schema.Runtime
	for _, name := range []string{"host", "subnet_pool"} {
		if _, ok := spec[name]; !ok {
			t.Errorf("ConfigSpec has no %s", name)
		}
	}
	ty := hcldec.ImpliedType(spec)
	if !ty.HasAttribute("host") || !ty.HasAttribute("subnet_pool") {
		t.Errorf("implied type %s", ty.FriendlyName())
	}
}

func TestNotConfigured(t *testing.T) {
	d, _ := New(nil)
	if _, err := d.Read(t.Context(), drivers.ReadRequest{Lineage: "x"}); err == nil || !strings.Contains(err.Error(), "not configured") {
		t.Errorf("Read: %v", err)
	}
	if _, err := d.Apply(t.Context(), drivers.ApplyRequest{Op: drivers.OpCreate, Lineage: "x"}); err == nil {
		t.Error("Apply before Configure succeeded")
	}
}

func TestReadEmptyLineageCallsNothing(t *testing.T) {
	api := &fakeAPI{}
	d := fakeDriver(t, api, DefaultSubnetPool)
	resp, err := d.Read(t.Context(), drivers.ReadRequest{})
	if err != nil || len(resp.Objects) != 0 {
		t.Fatalf("Read = %+v, %v", resp, err)
	}
	if len(api.calls()) != 0 {
		t.Errorf("calls = %v", api.calls())
	}
}

func TestReadMapsObjects(t *testing.T) {
	want := filters.NewArgs(filters.Arg("label", drivers.LabelLineage+"="+testLineage))
	check := func(kind string, f filters.Args) {
		if f.Get("label")[0] != want.Get("label")[0] || f.Len() != 1 {
			t.Errorf("%s filter = %v", kind, f)
		}
	}
	lbl := func(addr string) map[string]string {
		return map[string]string{drivers.LabelLineage: testLineage, drivers.LabelAddress: addr, drivers.LabelConfigHash: "h-" + addr}
	}
	api := &fakeAPI{
		ContainerListFn: func(o container.ListOptions) ([]container.Summary, error) {
			check("container", o.Filters)
			if !o.All {
				t.Error("ContainerList without All misses stopped containers")
			}
			return []container.Summary{
				{ID: "c1", Names: []string{"/bf-0f1e2d3c-a"}, State: "running", ImageID: "sha256:i1", Labels: lbl("agent.a")},
				{ID: "c2", Names: []string{"/bf-0f1e2d3c-b"}, State: "exited", Status: "Exited (3) Less than a second ago", ImageID: "sha256:i2", Labels: lbl("agent.b")},
				{ID: "c3", Labels: map[string]string{drivers.LabelLineage: testLineage}}, // no address: skipped
				// Made and never started: an agent can be started, a gateway
				// may lack its rules and egress connection.
				{ID: "c4", Names: []string{"/bf-0f1e2d3c-c"}, State: "created", ImageID: "sha256:i1", Labels: lbl("agent.c")},
				{ID: "g4", Names: []string{"/bf-0f1e2d3c-c-gw"}, State: "created", ImageID: "sha256:gw", Labels: withKind(lbl("agent.c.gateway"), gateway.Kind)},
			}, nil
		},
		NetworkListFn: func(o network.ListOptions) ([]network.Summary, error) {
			check("network", o.Filters)
			return []network.Summary{{ID: "n1", Name: "bf-0f1e2d3c-a", Labels: lbl("agent.a.network")}}, nil
		},
		ImageListFn: func(o image.ListOptions) ([]image.Summary, error) {
			check("image", o.Filters)
			return []image.Summary{{ID: "sha256:i2", RepoTags: []string{"x:1", "bf-0f1e2d3c-b:abc"}, Labels: lbl("agent.b.image")}}, nil
		},
	}
	d := fakeDriver(t, api, DefaultSubnetPool)
	resp, err := d.Read(t.Context(), drivers.ReadRequest{Lineage: testLineage})
	if err != nil {
		t.Fatal(err)
	}
	wantObjs := []drivers.LiveObject{
		{Addr: "agent.a", Kind: "container", ID: "c1", Name: "bf-0f1e2d3c-a", Hash: "h-agent.a", Running: true, ImageID: "sha256:i1", State: "running"},
		{Addr: "agent.a.network", Kind: "network", ID: "n1", Name: "bf-0f1e2d3c-a", Hash: "h-agent.a.network"},
		{Addr: "agent.b", Kind: "container", ID: "c2", Name: "bf-0f1e2d3c-b", Hash: "h-agent.b", ImageID: "sha256:i2", State: "exited", ExitCode: 3},
		{Addr: "agent.b.image", Kind: "image", ID: "sha256:i2", Name: "bf-0f1e2d3c-b:abc", Hash: "h-agent.b.image"},
		{Addr: "agent.c", Kind: "container", ID: "c4", Name: "bf-0f1e2d3c-c", Hash: "h-agent.c", ImageID: "sha256:i1", State: "created"},
		{Addr: "agent.c.gateway", Kind: "gateway", ID: "g4", Name: "bf-0f1e2d3c-c-gw", Hash: "h-agent.c.gateway", ImageID: "sha256:gw", Unfinished: true, State: "created"},
	}
	for i := range resp.Objects {
		// Finished is "less than a second" before the read: now.
		if f := resp.Objects[i].Finished; !f.IsZero() && time.Since(f) < time.Minute {
			resp.Objects[i].Finished = time.Time{}
		}
	}
	// How an exited container ended comes from the list's status too.
	for i, o := range resp.Objects {
		if o.Addr == "agent.b" && (o.Exit == nil || o.Exit.Code != 3 || o.Exit.Stopped) {
			t.Errorf("agent.b exited with code 3: Exit = %+v", o.Exit)
		}
		resp.Objects[i].Exit = nil
	}
	if !slices.Equal(resp.Objects, wantObjs) {
		t.Errorf("objects:\n got %+v\nwant %+v", resp.Objects, wantObjs)
	}
	// The lists run at once: in any order.
	if got := slices.Sorted(slices.Values(api.calls())); !slices.Equal(got, []string{"ContainerList", "ImageList", "NetworkList"}) {
		t.Errorf("calls = %v, want one list per kind", got)
	}
}

func withKind(labels map[string]string, kind string) map[string]string {
	labels[labelKind] = kind
	return labels
}

func TestPlan(t *testing.T) {
	api := &fakeAPI{NetworkListFn: func(network.ListOptions) ([]network.Summary, error) { return isolatingEngine(), nil }}
	d := fakeDriver(t, api, DefaultSubnetPool)
	secret := cty.MapVal(map[string]cty.Value{"KEY": cty.StringVal("s3cret")}).Mark("sensitive")
	resp, err := d.Plan(t.Context(), drivers.PlanRequest{Agent: drivers.AgentSpec{
		Addr: "agent.coder",
		Name: "coder",
		Workload: drivers.MustWorkload(map[string]cty.Value{
			"image":   cty.StringVal("busybox:1"),
			"command": cty.ListVal([]cty.Value{cty.StringVal("sleep"), cty.StringVal("60")}),
			"env":     secret,
			"workdir": cty.UnknownVal(cty.String),
			"cpus":    cty.NumberFloatVal(1.5),
		}),
	}})
	if err != nil {
		t.Fatal(err)
	}
	if calls := api.calls(); !slices.Equal(calls, []string{"NetworkList"}) {
		t.Errorf("Plan made calls %v, want one read-only network list (the isolation check)", calls)
	}
	byAddr := map[string]drivers.Object{}
	for _, o := range resp.Objects {
		byAddr[o.Addr] = o
	}
	// No egress block: no gateway, and no egress network for it.
	if len(byAddr) != 2 {
		t.Fatalf("objects = %v, want the network and the container only", resp.Objects)
	}
	n := byAddr["agent.coder.network"]
	if n.Kind != "network" || !n.Attrs["internal"].RawEquals(cty.True) || n.Workload {
		t.Errorf("network = %+v", n)
	}
	c := byAddr["agent.coder"]
	if c.Kind != "container" || !c.Workload || !slices.Equal(c.DependsOn, []string{"agent.coder.network"}) || !slices.Equal(c.InPlace, []string{"cpus", "memory"}) {
		t.Errorf("container = %+v", c)
	}
	if !c.Attrs["env"].RawEquals(secret) {
		t.Errorf("env lost its mark: %#v", c.Attrs["env"])
	}
	if c.Attrs["workdir"].IsKnown() {
		t.Error("workdir became known")
	}
	for _, name := range []string{"image", "build_hash", "command", "entrypoint", "env", "workdir", "user", "cpus", "memory", "labels", "network"} {
		if _, ok := c.Attrs[name]; !ok {
			t.Errorf("container has no %s attribute", name)
		}
		if c.Attrs[name] == cty.NilVal {
			t.Errorf("container attribute %s is cty.NilVal", name)
		}
	}
	if !c.Attrs["build_hash"].IsNull() || !c.Attrs["user"].IsNull() || c.Attrs["network"].AsString() != "agent.coder.network" {
		t.Errorf("attrs = %#v", c.Attrs)
	}
	// Recorded only when set: the hash of a container without one is
	// what it was before healthchecks.
	if _, ok := c.Attrs["healthcheck"]; ok {
		t.Errorf("a container without a healthcheck records one: %#v", c.Attrs["healthcheck"])
	}
}

// TestPlanHealthcheck: a sidecar's healthcheck is an attribute of its
// container, which no change makes in place.
func TestPlanHealthcheck(t *testing.T) {
	api := &fakeAPI{NetworkListFn: func(network.ListOptions) ([]network.Summary, error) { return isolatingEngine(), nil }}
	d := fakeDriver(t, api, DefaultSubnetPool)
	hc := cty.ObjectVal(map[string]cty.Value{
		"command":  cty.ListVal([]cty.Value{cty.StringVal("test"), cty.StringVal("-f"), cty.StringVal("/ready")}),
		"interval": cty.StringVal("1s"), "timeout": cty.StringVal("5s"), "retries": cty.NumberIntVal(3), "start_period": cty.StringVal("0s"),
	})
	img := map[string]cty.Value{"image": cty.StringVal("busybox:1")}
	resp, err := d.Plan(t.Context(), drivers.PlanRequest{Agent: drivers.AgentSpec{
		Addr: "agent.coder", Name: "coder", Workload: drivers.MustWorkload(img),
		Sidecars: []drivers.SidecarSpec{{Addr: "agent.coder.sidecar.db", Name: "db", Workload: drivers.MustWorkload(map[string]cty.Value{"image": cty.StringVal("busybox:1"), "healthcheck": hc})}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range resp.Objects {
		switch o.Addr {
		case "agent.coder":
			if _, ok := o.Attrs["healthcheck"]; ok {
				t.Errorf("the agent records a healthcheck it does not have")
			}
		case "agent.coder.sidecar.db":
			if !o.Attrs["healthcheck"].RawEquals(hc) || slices.Contains(o.InPlace, "healthcheck") {
				t.Errorf("sidecar = %+v", o)
			}
			w, err := drivers.DecodeWorkload(drivers.ObjectAttrs(o))
			if err != nil || w.Healthcheck == nil || w.Healthcheck.Interval != time.Second || w.Healthcheck.Retries != 3 {
				t.Errorf("decoded healthcheck %+v, %v", w.Healthcheck, err)
			}
		}
	}
}

func TestPlanErrors(t *testing.T) {
	d := fakeDriver(t, &fakeAPI{}, DefaultSubnetPool)
	img := cty.StringVal("x:1")
	tests := []struct {
		name  string
		agent drivers.AgentSpec
		want  string
	}{
		{"no image", drivers.AgentSpec{Addr: "agent.a", Name: "a"}, "needs an image or a build block"},
		{"null image", drivers.AgentSpec{Addr: "agent.a", Name: "a", Workload: drivers.MustWorkload(map[string]cty.Value{"image": cty.NullVal(cty.String)})}, "needs an image"},
		{"bad name", drivers.AgentSpec{Addr: "agent.a b", Name: "a b", Workload: drivers.MustWorkload(map[string]cty.Value{"image": img})}, "cannot name"},
		{"reserved label", drivers.AgentSpec{Addr: "agent.a", Name: "a", Workload: drivers.MustWorkload(map[string]cty.Value{"image": img, "labels": cty.MapVal(map[string]cty.Value{"io.bottlefile.lineage": cty.StringVal("x")})})}, "reserved"},
		{"negative cpus", drivers.AgentSpec{Addr: "agent.a", Name: "a", Workload: drivers.MustWorkload(map[string]cty.Value{"image": img, "cpus": cty.NumberIntVal(-1)})}, "cpus"},
		{"missing context", drivers.AgentSpec{Addr: "agent.a", Name: "a", Workload: drivers.MustWorkload(map[string]cty.Value{"build": drivers.BuildValue(filepath.Join(t.TempDir(), "nope"), "")})}, "build context"},
		{"missing dockerfile", drivers.AgentSpec{Addr: "agent.a", Name: "a", Workload: drivers.MustWorkload(map[string]cty.Value{"build": drivers.BuildValue(t.TempDir(), "")})}, "dockerfile"},
		{"escaping dockerfile", drivers.AgentSpec{Addr: "agent.a", Name: "a", Workload: drivers.MustWorkload(map[string]cty.Value{"build": drivers.BuildValue(t.TempDir(), "../Dockerfile")})}, "inside the build context"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := d.Plan(t.Context(), drivers.PlanRequest{Agent: tt.agent})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want %q", err, tt.want)
			}
			if !strings.Contains(err.Error(), tt.agent.Addr) {
				t.Errorf("err %q does not name %s", err, tt.agent.Addr)
			}
		})
	}
}

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestContextHash(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"Dockerfile":    "FROM scratch\nCOPY . /\n",
		"app/main.sh":   "echo hi\n",
		"app/data.txt":  "data\n",
		"logs/big.log":  "ignored\n",
		".dockerignore": "logs\n*.tmp\n",
	})
	hash := func() string {
		t.Helper()
		bc, err := resolveBuildContext(dir, "")
		if err != nil {
			t.Fatal(err)
		}
		h, err := hashContext(bc)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	h0 := hash()
	if len(h0) != 64 {
		t.Fatalf("hash %q is not hex sha256", h0)
	}
	if hash() != h0 {
		t.Fatal("hash is not stable")
	}

	// Touching a file changes nothing.
	future := time.Now().Add(time.Hour)
	if err := os.Chtimes(filepath.Join(dir, "app/main.sh"), future, future); err != nil {
		t.Fatal(err)
	}
	if hash() != h0 {
		t.Error("mtime changed the hash")
	}
	// Ignored files change nothing.
	writeFiles(t, dir, map[string]string{"logs/big.log": "other", "scratch.tmp": "x"})
	if hash() != h0 {
		t.Error("an ignored file changed the hash")
	}

	steps := []struct {
		name string
		do   func()
	}{
		{"content", func() { writeFiles(t, dir, map[string]string{"app/main.sh": "echo bye\n"}) }},
		{"mode", func() { os.Chmod(filepath.Join(dir, "app/main.sh"), 0o755) }},
		{"new file", func() { writeFiles(t, dir, map[string]string{"app/new.txt": ""}) }},
		{"rename", func() { os.Rename(filepath.Join(dir, "app/new.txt"), filepath.Join(dir, "app/new2.txt")) }},
		{"symlink", func() { os.Symlink("main.sh", filepath.Join(dir, "app/link")) }},
		{"empty dir", func() { os.Mkdir(filepath.Join(dir, "empty"), 0o755) }},
		{"dockerignore", func() { writeFiles(t, dir, map[string]string{".dockerignore": "*.tmp\n"}) }},
	}
	prev := h0
	for _, s := range steps {
		s.do()
		h := hash()
		if h == prev {
			t.Errorf("changing %s did not change the hash", s.name)
		}
		prev = h
	}
}

func TestContextTarMatchesHash(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"build/Dockerfile.dev": "FROM scratch\n",
		"a.txt":                "a",
		"secret/key":           "k",
		"secret/keep.txt":      "kept",
		".dockerignore":        "secret\n!secret/keep.txt\nbuild\n",
	})
	bc, err := resolveBuildContext(dir, "build/Dockerfile.dev")
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	tarSum, err := tarContext(bc, &buf)
	if err != nil {
		t.Fatal(err)
	}
	sum, err := hashContext(bc)
	if err != nil {
		t.Fatal(err)
	}
	if tarSum != sum {
		t.Errorf("tar hash %s != plan hash %s", tarSum, sum)
	}
	var names []string
	tr := tar.NewReader(&buf)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Uid != 0 || h.Gid != 0 {
			t.Errorf("%s owned by %d:%d", h.Name, h.Uid, h.Gid)
		}
		names = append(names, h.Name)
	}
	// The Dockerfile stays although its directory is ignored; the secret
	// goes, except the re-included file.
	want := []string{".dockerignore", "a.txt", "build/Dockerfile.dev", "secret/keep.txt"}
	if !slices.Equal(names, want) {
		t.Errorf("tar holds %v, want %v", names, want)
	}

	// Without "!" patterns an ignored directory is skipped whole, but not
	// the Dockerfile inside it.
	writeFiles(t, dir, map[string]string{".dockerignore": "build\nsecret\n"})
	buf.Reset()
	if _, err := tarContext(bc, &buf); err != nil {
		t.Fatal(err)
	}
	names = nil
	for tr := tar.NewReader(&buf); ; {
		h, err := tr.Next()
		if err != nil {
			break
		}
		names = append(names, h.Name)
	}
	want = []string{".dockerignore", "a.txt", "build/Dockerfile.dev"}
	if !slices.Equal(names, want) {
		t.Errorf("tar holds %v, want %v", names, want)
	}
}

func TestNames(t *testing.T) {
	tests := []struct {
		addr, kind, want string
	}{
		{"agent.coder", kindContainer, "bf-0f1e2d3c-coder"},
		{"agent.coder.network", kindNetwork, "bf-0f1e2d3c-coder"},
		{"agent.my_agent-2", kindContainer, "bf-0f1e2d3c-my_agent-2"},
		{"agent.coder.sidecar.gate", kindContainer, "bf-0f1e2d3c-coder-sidecar-gate"},
	}
	for _, tt := range tests {
		got, err := engine.ObjectName(testLineage, tt.addr, tt.kind)
		if err != nil || got != tt.want {
			t.Errorf("engine.ObjectName(%s) = %q, %v; want %q", tt.addr, got, err, tt.want)
		}
	}
	if _, err := engine.ObjectName("", "agent.x", kindContainer); err == nil {
		t.Error("no error for an empty lineage")
	}
	if _, err := engine.ObjectName(testLineage, "snapshot.x", kindContainer); err == nil {
		t.Error("no error for an address outside agent.")
	}
	tag, err := engine.ImageTag(testLineage, "agent.coder.image", strings.Repeat("ab", 32))
	if err != nil || tag != "bf-0f1e2d3c-coder:abababababab" {
		t.Errorf("engine.ImageTag = %q, %v", tag, err)
	}
	// Upper case and underscores fold into a valid repository, kept apart
	// from an agent whose name already was the folded one.
	a, _ := engine.ImageRepo(testLineage, "agent.My_Agent")
	b, _ := engine.ImageRepo(testLineage, "agent.my-agent")
	if a == b || strings.ToLower(a) != a || b != "bf-0f1e2d3c-my-agent" {
		t.Errorf("engine.ImageRepo: %q vs %q", a, b)
	}
}

func TestApplyOddInput(t *testing.T) {
	d := fakeDriver(t, &fakeAPI{}, DefaultSubnetPool)
	tests := []struct {
		name string
		req  drivers.ApplyRequest
		want string
	}{
		{"no lineage", drivers.ApplyRequest{Op: drivers.OpCreate, Object: drivers.Object{Addr: "agent.a", Kind: "container"}}, "lineage"},
		{"unknown kind", drivers.ApplyRequest{Op: drivers.OpCreate, Lineage: testLineage, Object: drivers.Object{Addr: "agent.a", Kind: "volume"}}, "no object kind"},
		{"start a network", drivers.ApplyRequest{Op: drivers.OpStart, Lineage: testLineage, Object: drivers.Object{Addr: "agent.a.network", Kind: "network"}}, "cannot start"},
		{"unknown env", drivers.ApplyRequest{Op: drivers.OpCreate, Lineage: testLineage, Object: drivers.Object{Addr: "agent.a", Kind: "container", Attrs: map[string]cty.Value{
			"image": cty.StringVal("x"), "env": cty.UnknownVal(cty.Map(cty.String)),
		}}}, "env: value is not known"},
		{"wrong type", drivers.ApplyRequest{Op: drivers.OpCreate, Lineage: testLineage, Object: drivers.Object{Addr: "agent.a", Kind: "container", Attrs: map[string]cty.Value{
			"image": cty.StringVal("x"), "command": cty.StringVal("sh"),
		}}}, "command"},
		{"no image", drivers.ApplyRequest{Op: drivers.OpCreate, Lineage: testLineage, Object: drivers.Object{Addr: "agent.a", Kind: "container"}}, "no image"},
		{"image without hash", drivers.ApplyRequest{Op: drivers.OpCreate, Lineage: testLineage, Object: drivers.Object{Addr: "agent.a.image", Kind: "image"}}, "too short"},
		{"delete image without id", drivers.ApplyRequest{Op: drivers.OpDelete, Lineage: testLineage, Object: drivers.Object{Addr: "agent.a.image", Kind: "image"}}, "no image id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := d.Apply(context.Background(), tt.req)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want %q", err, tt.want)
			}
		})
	}
}

func TestReadStream(t *testing.T) {
	ok := `{"stream":"Step 1/2 : FROM scratch\n"}{"aux":{"ID":"sha256:abc"}}{"stream":"Successfully built abc\n"}`
	res, err := readStream(strings.NewReader(ok))
	if err != nil || res.imageID != "sha256:abc" || len(res.tail) != 2 {
		t.Errorf("res = %+v, err = %v", res, err)
	}
	bad := `{"stream":"Step 1/2 : RUN false\n"}{"errorDetail":{"code":1,"message":"The command '/bin/sh -c false' returned a non-zero code: 1"},"error":"x"}`
	_, err = readStream(strings.NewReader(bad))
	if err == nil || !strings.Contains(err.Error(), "non-zero code") {
		t.Errorf("err = %v", err)
	}
	if _, err := readStream(strings.NewReader(`{"stream":`)); err == nil {
		t.Error("no error for a truncated stream")
	}
}

// TestCreateNetworkRemovesTwin: a network of the same name and lineage that
// landed beside the new one (the create of a killed apply) is removed; one
// of another lineage is left alone.
func TestCreateNetworkRemovesTwin(t *testing.T) {
	lineage := testLineage
	name := "bf-0f1e2d3c-a"
	var created bool
	var removed []string
	api := &fakeAPI{
		NetworkListFn: func(network.ListOptions) ([]network.Summary, error) {
			if !created {
				return nil, nil
			}
			return []network.Summary{
				{ID: "ours", Name: name, Labels: map[string]string{drivers.LabelLineage: lineage}},
				{ID: "twin", Name: name, Labels: map[string]string{drivers.LabelLineage: lineage}},
				{ID: "theirs", Name: name, Labels: map[string]string{drivers.LabelLineage: "other"}},
			}, nil
		},
		NetworkCreateFn: func(string, network.CreateOptions) (network.CreateResponse, error) {
			created = true
			return network.CreateResponse{ID: "ours"}, nil
		},
		NetworkRemoveFn: func(id string) error { removed = append(removed, id); return nil },
	}
	d := fakeDriver(t, api, DefaultSubnetPool)
	resp, err := d.Apply(t.Context(), drivers.ApplyRequest{
		Op: drivers.OpCreate, Lineage: lineage, Hash: "h",
		Object: drivers.Object{Addr: "agent.a.network", Kind: "network", Attrs: map[string]cty.Value{"internal": cty.True}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if resp.ID != "ours" || len(removed) != 1 || removed[0] != "twin" {
		t.Errorf("id %s, removed %v: want ours kept and only the twin removed", resp.ID, removed)
	}
}

// TestClaimsShareAList: the bottle networks of one run share a list of
// the engine's networks taken in the last second (each listed under the
// lock before, one after another); the blocks made since are not handed
// out again, a claim that may not reuse lists anew, and another engine
// has a list of its own.
func TestClaimsShareAList(t *testing.T) {
	pool := netip.MustParsePrefix("10.9.0.0/24")
	lists := 0
	engine := func() *fakeAPI {
		return &fakeAPI{NetworkListFn: func(network.ListOptions) ([]network.Summary, error) {
			lists++
			return nets("10.9.0.0/28"), nil
		}}
	}
	var c subnetClaims
	api := engine()
	claim := func(api dockerAPI, reuse bool) netip.Prefix {
		t.Helper()
		_, p, err := c.claim(t.Context(), api, "bf-x", pool, subnetBits, nil, "subnet_pool", reuse)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	first := claim(api, true)
	c.release(api, first, true) // made
	second := claim(api, true)
	if lists != 1 {
		t.Errorf("two claims on one engine within a second listed %d times, want 1", lists)
	}
	if first == second || first.String() != "10.9.0.16/28" || second.String() != "10.9.0.32/28" {
		t.Errorf("claims %s then %s on a shared list, want 10.9.0.16/28 then 10.9.0.32/28", first, second)
	}
	c.release(api, second, false) // its create failed: free again
	if third := claim(api, true); third != second {
		t.Errorf("a block whose create failed was not handed out again: %s, want %s", third, second)
	}
	claim(api, false)
	if lists != 2 {
		t.Errorf("a claim that may not reuse the list did not list (%d lists)", lists)
	}
	claim(engine(), true)
	if lists != 3 {
		t.Errorf("another engine's claim used this engine's list (%d lists)", lists)
	}
}
