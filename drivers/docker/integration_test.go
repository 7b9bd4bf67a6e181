package docker

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"
	"github.com/zclconf/go-cty/cty"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/docker/dockertest"
	"github.com/bottlefile/bottlefile/drivers/engine"
	"github.com/bottlefile/bottlefile/drivers/gateway"
)

// engineTest is one integration test's driver, engine and lineage.
type engineTest struct {
	t       *testing.T
	d       *Driver
	api     *countingAPI
	cli     *client.Client
	lineage string
	cfg     cty.Value // the runtime block
}

// newEngineTest configures a driver against the real engine, through a
// counting wrapper, with a fresh lineage cleaned up by label at the end.
func newEngineTest(t *testing.T) *engineTest {
	t.Helper()
	return newEngineTestGateway(t, dockertest.GatewayBinary(t))
}

// newEngineTestGateway is newEngineTest with the given gateway_binary.
func newEngineTestGateway(t *testing.T, gatewayBinary string) *engineTest {
	t.Helper()
	cli := dockertest.Client(t)
	lineage := dockertest.NewLineage()
	dockertest.Cleanup(t, cli, lineage)
	counter := &countingAPI{}
	d := newDriver(testLogger(t), func(ep engine.Endpoint) (dockerAPI, error) {
		api, err := newClient(ep)
		if err != nil {
			return nil, err
		}
		counter.api = api
		return counter, nil
	})
	cfg := cty.ObjectVal(map[string]cty.Value{"host": cty.NullVal(cty.String), "subnet_pool": cty.StringVal(DefaultSubnetPool), "gateway_binary": cty.StringVal(gatewayBinary)})
	if err := d.Configure(t.Context(), drivers.ConfigureRequest{Runtime: "default", Config: cfg}); err != nil {
		t.Fatalf("Configure: %v", err)
	}
	t.Cleanup(func() { d.Close() })
	return &engineTest{t: t, d: d, api: counter, cli: cli, lineage: lineage, cfg: cfg}
}

// reopen closes the driver, as the end of a run does, and configures it
// again.
func (e *engineTest) reopen() {
	e.t.Helper()
	if err := e.d.Close(); err != nil {
		e.t.Fatalf("Close: %v", err)
	}
	if err := e.d.Configure(e.t.Context(), drivers.ConfigureRequest{Runtime: "default", Config: e.cfg}); err != nil {
		e.t.Fatalf("Configure: %v", err)
	}
}

func (e *engineTest) plan(a drivers.AgentSpec) map[string]drivers.Object {
	e.t.Helper()
	resp, err := e.d.Plan(e.t.Context(), drivers.PlanRequest{Agent: a})
	if err != nil {
		e.t.Fatalf("Plan: %v", err)
	}
	out := map[string]drivers.Object{}
	for _, o := range resp.Objects {
		out[o.Addr] = o
	}
	return out
}

// order sorts planned objects so that each comes after what it depends on.
func order(t *testing.T, objs map[string]drivers.Object) []drivers.Object {
	t.Helper()
	var out []drivers.Object
	done := map[string]bool{}
	var visit func(addr string, depth int)
	visit = func(addr string, depth int) {
		if done[addr] {
			return
		}
		if depth > len(objs) {
			t.Fatalf("dependency cycle at %s", addr)
		}
		o, ok := objs[addr]
		if !ok {
			t.Fatalf("dependency %s is not planned", addr)
		}
		for _, dep := range o.DependsOn {
			visit(dep, depth+1)
		}
		done[addr] = true
		out = append(out, o)
	}
	for _, addr := range slices.Sorted(mapsKeys(objs)) {
		visit(addr, 0)
	}
	return out
}

func mapsKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func (e *engineTest) apply(op drivers.Op, o drivers.Object, id string) drivers.ApplyResponse {
	e.t.Helper()
	resp, err := e.try(op, o, id)
	if err != nil {
		e.t.Fatalf("%s %s: %v", op, o.Addr, err)
	}
	return resp
}

func (e *engineTest) try(op drivers.Op, o drivers.Object, id string) (drivers.ApplyResponse, error) {
	if op == drivers.OpDelete {
		o = drivers.Object{Addr: o.Addr, Kind: o.Kind}
	}
	return e.d.Apply(e.t.Context(), drivers.ApplyRequest{Op: op, Lineage: e.lineage, Object: o, Hash: "hash-of-" + o.Addr, ID: id})
}

// createAll applies every planned object in dependency order.
func (e *engineTest) createAll(objs map[string]drivers.Object) map[string]drivers.ApplyResponse {
	e.t.Helper()
	out := map[string]drivers.ApplyResponse{}
	for _, o := range order(e.t, objs) {
		out[o.Addr] = e.apply(drivers.OpCreate, o, "")
	}
	return out
}

// deleteAll deletes in reverse dependency order.
func (e *engineTest) deleteAll(objs map[string]drivers.Object, ids map[string]drivers.ApplyResponse) {
	e.t.Helper()
	ordered := order(e.t, objs)
	slices.Reverse(ordered)
	for _, o := range ordered {
		e.apply(drivers.OpDelete, o, ids[o.Addr].ID)
	}
}

func (e *engineTest) read() map[string]drivers.LiveObject {
	e.t.Helper()
	e.api.take()
	resp, err := e.d.Read(e.t.Context(), drivers.ReadRequest{Lineage: e.lineage})
	if err != nil {
		e.t.Fatalf("Read: %v", err)
	}
	calls := e.api.take()
	want := map[string]int{"ContainerList": 1, "NetworkList": 1, "ImageList": 1}
	if fmt.Sprint(calls) != fmt.Sprint(want) {
		e.t.Errorf("Read made calls %v, want exactly one list per kind %v", calls, want)
	}
	out := map[string]drivers.LiveObject{}
	for _, o := range resp.Objects {
		if _, dup := out[o.Addr]; dup {
			e.t.Errorf("Read reports %s twice", o.Addr)
		}
		out[o.Addr] = o
	}
	return out
}

// assertGone checks that nothing of the lineage is left on the engine.
func (e *engineTest) assertGone() {
	e.t.Helper()
	if live := e.read(); len(live) != 0 {
		e.t.Errorf("left behind: %v", live)
	}
	f := filters.NewArgs(filters.Arg("label", drivers.LabelLineage+"="+e.lineage))
	cs, _ := e.cli.ContainerList(context.Background(), container.ListOptions{All: true, Filters: f})
	ns, _ := e.cli.NetworkList(context.Background(), network.ListOptions{Filters: f})
	is, _ := e.cli.ImageList(context.Background(), image.ListOptions{All: true, Filters: f})
	if len(cs)+len(ns)+len(is) != 0 {
		e.t.Errorf("left behind %d containers, %d networks, %d images", len(cs), len(ns), len(is))
	}
}

func strList(s ...string) cty.Value {
	var vs []cty.Value
	for _, x := range s {
		vs = append(vs, cty.StringVal(x))
	}
	return cty.ListVal(vs)
}

const mib = 1 << 20

func TestIntegrationLifecycle(t *testing.T) {
	t.Parallel()
	e := newEngineTest(t)
	img := dockertest.BusyboxImage(t, e.cli)
	ctx := t.Context()

	agent := drivers.AgentSpec{
		Addr: "agent.coder",
		Name: "coder",
		Workload: drivers.MustWorkload(map[string]cty.Value{
			"image":   cty.StringVal(img),
			"command": strList("sleep", "600"),
			"env":     cty.MapVal(map[string]cty.Value{"API_KEY": cty.StringVal("s3cret")}).Mark("sensitive"),
			"workdir": cty.StringVal("/tmp"),
			"cpus":    cty.NumberFloatVal(0.5),
			"memory":  cty.NumberIntVal(64 * mib),
			"labels":  cty.MapVal(map[string]cty.Value{"team": cty.StringVal("infra")}),
		}),
	}
	e.api.take()
	objs := e.plan(agent)
	if calls := e.api.take(); len(calls) > 1 || calls["NetworkList"] > 1 {
		t.Errorf("Plan called the engine: %v, want at most one network list (the isolation check)", calls)
	}

	ids := e.createAll(objs)
	netResp, ctrResp := ids["agent.coder.network"], ids["agent.coder"]
	netName := "bf-" + e.lineage[:8] + "-coder"
	if netResp.Computed["name"] != netName || ctrResp.Computed["name"] != netName {
		t.Errorf("names: network %q, container %q, want %q", netResp.Computed["name"], ctrResp.Computed["name"], netName)
	}
	subnet, err := netip.ParsePrefix(netResp.Computed["subnet"])
	if err != nil || subnet.Bits() != 28 || !netip.MustParsePrefix(DefaultSubnetPool).Overlaps(subnet) {
		t.Errorf("subnet %q is not a /28 of the pool", netResp.Computed["subnet"])
	}
	ip, err := netip.ParseAddr(ctrResp.Computed["ip"])
	if err != nil || !subnet.Contains(ip) {
		t.Errorf("container ip %q is not in %s", ctrResp.Computed["ip"], subnet)
	}

	// Read finds both, with one list call per kind.
	live := e.read()
	busybox, err := e.cli.ImageInspect(ctx, img)
	if err != nil {
		t.Fatal(err)
	}
	wantCtr := drivers.LiveObject{Addr: "agent.coder", Kind: "container", ID: ctrResp.ID, Name: netName, Hash: "hash-of-agent.coder", Runtime: "default", Running: true, ImageID: busybox.ID, State: "running"}
	gotCtr := live["agent.coder"]
	if gotCtr.Created.IsZero() || gotCtr.Started.Before(gotCtr.Created.Add(-time.Minute)) || time.Since(gotCtr.Started) > 10*time.Minute {
		t.Errorf("live container created %v, started %v: want both, started after created", gotCtr.Created, gotCtr.Started)
	}
	gotCtr.Created, gotCtr.Started = time.Time{}, time.Time{}
	if gotCtr != wantCtr {
		t.Errorf("live container = %+v, want %+v", gotCtr, wantCtr)
	}
	wantNet := drivers.LiveObject{Addr: "agent.coder.network", Kind: "network", ID: netResp.ID, Name: netName, Hash: "hash-of-agent.coder.network", Runtime: "default"}
	if live["agent.coder.network"] != wantNet {
		t.Errorf("live network = %+v, want %+v", live["agent.coder.network"], wantNet)
	}

	// The container as the engine sees it.
	info, err := e.cli.ContainerInspect(ctx, ctrResp.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !info.State.Running {
		t.Error("container is not running")
	}
	if info.HostConfig.Init == nil || !*info.HostConfig.Init {
		t.Error("container runs without an init process")
	}
	if !slices.Equal(info.HostConfig.DNSOptions, []string{"timeout:1", "attempts:1"}) {
		t.Errorf("DNSOptions = %v", info.HostConfig.DNSOptions)
	}
	if info.HostConfig.NanoCPUs != 5e8 || info.HostConfig.Memory != 64*mib {
		t.Errorf("limits = %d nano-CPUs, %d bytes", info.HostConfig.NanoCPUs, info.HostConfig.Memory)
	}
	wantLabels := map[string]string{
		drivers.LabelLineage: e.lineage, drivers.LabelAddress: "agent.coder", drivers.LabelConfigHash: "hash-of-agent.coder", "team": "infra",
	}
	for k, v := range wantLabels {
		if info.Config.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, info.Config.Labels[k], v)
		}
	}
	if !slices.Contains(info.Config.Env, "API_KEY=s3cret") || info.Config.WorkingDir != "/tmp" || !slices.Equal(info.Config.Cmd, []string{"sleep", "600"}) {
		t.Errorf("config = env %v, workdir %q, cmd %v", info.Config.Env, info.Config.WorkingDir, info.Config.Cmd)
	}
	if nets := slices.Collect(mapsKeys(info.NetworkSettings.Networks)); !slices.Equal(nets, []string{netName}) {
		t.Errorf("container is on networks %v, want only %s", nets, netName)
	}

	// The network as the engine sees it.
	ninfo, err := e.cli.NetworkInspect(ctx, netResp.ID, network.InspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !ninfo.Internal || ninfo.Options[inhibitIPv4] != "true" || len(ninfo.IPAM.Config) != 1 || ninfo.IPAM.Config[0].Subnet != subnet.String() {
		t.Errorf("network = internal %v, options %v, ipam %+v", ninfo.Internal, ninfo.Options, ninfo.IPAM.Config)
	}
	if ninfo.Labels[drivers.LabelLineage] != e.lineage || ninfo.Labels[drivers.LabelAddress] != "agent.coder.network" {
		t.Errorf("network labels = %v", ninfo.Labels)
	}

	// Stopped out of band: Read says so, and start runs it again.
	stopTimeout := 1
	start := time.Now()
	if err := e.cli.ContainerStop(ctx, ctrResp.ID, container.StopOptions{Timeout: &stopTimeout}); err != nil {
		t.Fatal(err)
	}
	t.Logf("stop took %v (init forwards SIGTERM)", time.Since(start))
	if live := e.read(); live["agent.coder"].Running {
		t.Error("Read reports a stopped container running")
	}
	started := e.apply(drivers.OpStart, objs["agent.coder"], ctrResp.ID)
	if started.ID != ctrResp.ID || started.Computed["ip"] == "" {
		t.Errorf("start = %+v", started)
	}
	if live := e.read(); !live["agent.coder"].Running {
		t.Error("Read reports the started container stopped")
	}

	// cpus and memory change in place: same container.
	upd := objs["agent.coder"]
	upd.Attrs = maps2(upd.Attrs)
	upd.Attrs["cpus"] = cty.NumberIntVal(1)
	upd.Attrs["memory"] = cty.NumberIntVal(128 * mib)
	updated, err := e.d.Apply(ctx, drivers.ApplyRequest{Op: drivers.OpUpdate, Lineage: e.lineage, Object: upd, Hash: "hash-after-update", ID: ctrResp.ID})
	if err != nil {
		t.Fatalf("update: %v", err)
	}
	if updated.ID != ctrResp.ID {
		t.Errorf("update changed the id: %s -> %s", ctrResp.ID, updated.ID)
	}
	// Labels are fixed at create: Read reports the creation hash still.
	if got := e.read()["agent.coder"]; got.Hash != "hash-of-agent.coder" || got.ID != ctrResp.ID || !got.Running {
		t.Errorf("after update, live = %+v", got)
	}
	info, err = e.cli.ContainerInspect(ctx, ctrResp.ID)
	if err != nil {
		t.Fatal(err)
	}
	if info.HostConfig.NanoCPUs != 1e9 || info.HostConfig.Memory != 128*mib || !info.State.Running {
		t.Errorf("after update: %d nano-CPUs, %d bytes, running %v", info.HostConfig.NanoCPUs, info.HostConfig.Memory, info.State.Running)
	}
	// Removing the limits lifts them to the engine's capacity.
	upd.Attrs["cpus"] = cty.NullVal(cty.Number)
	upd.Attrs["memory"] = cty.NullVal(cty.Number)
	e.apply(drivers.OpUpdate, upd, ctrResp.ID)
	sys, err := e.cli.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	info, _ = e.cli.ContainerInspect(ctx, ctrResp.ID)
	if info.HostConfig.NanoCPUs != int64(sys.NCPU)*1e9 || info.HostConfig.Memory != sys.MemTotal {
		t.Errorf("after lifting: %d nano-CPUs, %d bytes; engine has %d CPUs, %d bytes", info.HostConfig.NanoCPUs, info.HostConfig.Memory, sys.NCPU, sys.MemTotal)
	}

	// Delete in reverse order; deleting again tolerates "not found".
	e.deleteAll(objs, ids)
	e.assertGone()
	e.deleteAll(objs, ids)
}

func maps2(m map[string]cty.Value) map[string]cty.Value {
	out := make(map[string]cty.Value, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func TestIntegrationBuild(t *testing.T) {
	t.Parallel()
	e := newEngineTest(t)
	img := dockertest.BusyboxImage(t, e.cli)
	ctx := t.Context()

	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"Dockerfile":    "FROM " + img + "\nCOPY hello.txt /hello.txt\nCMD [\"sh\", \"-c\", \"cat /hello.txt; exec sleep 600\"]\n",
		"hello.txt":     "hello from the build context\n",
		"junk/big.bin":  "never sent",
		".dockerignore": "junk\n",
	})
	agent := drivers.AgentSpec{Addr: "agent.builder", Name: "builder", Workload: drivers.MustWorkload(map[string]cty.Value{"build": drivers.BuildValue(dir, "")})}
	e.api.take()
	objs := e.plan(agent)
	if calls := e.api.take(); len(calls) > 1 || calls["NetworkList"] > 1 {
		t.Errorf("Plan called the engine: %v, want at most one network list (the isolation check)", calls)
	}
	imgObj, ok := objs["agent.builder.image"]
	if !ok {
		t.Fatalf("no image object planned: %v", objs)
	}
	hash := imgObj.Attrs["context_hash"].AsString()
	tag := "bf-" + e.lineage[:8] + "-builder:" + hash[:12]
	if _, err := e.cli.ImageInspect(ctx, tag); !cerrdefs.IsNotFound(err) {
		t.Errorf("after Plan, inspecting %s: %v; want not found (plan must not build)", tag, err)
	}
	ctr := objs["agent.builder"]
	if !ctr.Attrs["image"].IsNull() || ctr.Attrs["build_hash"].AsString() != hash || !slices.Contains(ctr.DependsOn, "agent.builder.image") {
		t.Errorf("container = %+v", ctr)
	}

	ids := e.createAll(objs)
	built := ids["agent.builder.image"]
	if built.Computed["tag"] != tag || built.Computed["image_id"] != built.ID || !strings.HasPrefix(built.ID, "sha256:") {
		t.Errorf("image apply = %+v, want tag %s", built, tag)
	}
	live := e.read()
	if live["agent.builder.image"].ID != built.ID || live["agent.builder.image"].Hash != "hash-of-agent.builder.image" {
		t.Errorf("live image = %+v", live["agent.builder.image"])
	}
	if c := live["agent.builder"]; !c.Running || c.ImageID != built.ID {
		t.Errorf("live container = %+v, want running from %s", c, built.ID)
	}
	iinfo, err := e.cli.ImageInspect(ctx, tag)
	if err != nil {
		t.Fatal(err)
	}
	if iinfo.Config.Labels[drivers.LabelLineage] != e.lineage || iinfo.Config.Labels[drivers.LabelAddress] != "agent.builder.image" {
		t.Errorf("image labels = %v", iinfo.Config.Labels)
	}

	// The context file made it in.
	var out string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		rc, err := e.cli.ContainerLogs(ctx, ids["agent.builder"].ID, container.LogsOptions{ShowStdout: true, ShowStderr: true})
		if err != nil {
			t.Fatal(err)
		}
		var stdout, stderr bytes.Buffer
		stdcopy.StdCopy(&stdout, &stderr, rc)
		rc.Close()
		if out = stdout.String() + stderr.String(); out != "" {
			break
		}
	}
	if out != "hello from the build context\n" {
		t.Errorf("container printed %q", out)
	}

	// A change to the context after the plan is refused at apply.
	writeFiles(t, dir, map[string]string{"hello.txt": "changed\n"})
	if _, err := e.try(drivers.OpCreate, imgObj, ""); err == nil || !strings.Contains(err.Error(), "changed since the plan") {
		t.Errorf("stale build: err = %v", err)
	}
	if objs2 := e.plan(agent); objs2["agent.builder.image"].Attrs["context_hash"].AsString() == hash {
		t.Error("a changed context did not change the planned hash")
	}

	e.deleteAll(objs, ids)
	e.assertGone()
	if _, err := e.cli.ImageInspect(ctx, tag); !cerrdefs.IsNotFound(err) {
		t.Errorf("the built image is still there: %v", err)
	}
	if _, err := e.cli.ImageInspect(ctx, img); err != nil {
		t.Errorf("deleting the built image took its base with it: %v", err)
	}
}

func TestIntegrationBuildFailure(t *testing.T) {
	t.Parallel()
	e := newEngineTest(t)
	img := dockertest.BusyboxImage(t, e.cli)
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"Dockerfile": "FROM " + img + "\nRUN [\"sh\", \"-c\", \"echo about to fail; exit 3\"]\n"})
	objs := e.plan(drivers.AgentSpec{Addr: "agent.broken", Name: "broken", Workload: drivers.MustWorkload(map[string]cty.Value{"build": drivers.BuildValue(dir, "")})})
	_, err := e.try(drivers.OpCreate, objs["agent.broken.image"], "")
	if err == nil {
		t.Fatal("a failing build succeeded")
	}
	for _, want := range []string{"building image bf-", "agent.broken.image", "non-zero code: 3", "about to fail"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

func TestIntegrationMissingImage(t *testing.T) {
	t.Parallel()
	e := newEngineTest(t)
	const ref = "bottlefile-test/does-not-exist:404"
	objs := e.plan(drivers.AgentSpec{Addr: "agent.lost", Name: "lost", Workload: drivers.MustWorkload(map[string]cty.Value{"image": cty.StringVal(ref)})})
	netResp := e.apply(drivers.OpCreate, objs["agent.lost.network"], "")
	e.api.take()
	_, err := e.try(drivers.OpCreate, objs["agent.lost"], "")
	if err == nil {
		t.Fatal("creating a container from a missing image succeeded")
	}
	t.Logf("the error: %v", err)
	for _, want := range []string{ref, "creating container bf-", "for agent.lost", "pulling it failed"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	calls := e.api.take()
	// Created straight away, as docker run does: the engine refuses the
	// create for the missing image, the pull fails, and nothing is made.
	if calls["ImagePull"] != 1 || calls["ContainerCreate"] != 1 {
		t.Errorf("calls = %v, want one create refused and one pull", calls)
	}
	e.apply(drivers.OpDelete, objs["agent.lost.network"], netResp.ID)
	e.assertGone()
}

func TestIntegrationCrashBetweenCreateAndRecord(t *testing.T) {
	t.Parallel()
	e := newEngineTest(t)
	img := dockertest.BusyboxImage(t, e.cli)
	ctx := t.Context()
	objs := e.plan(drivers.AgentSpec{Addr: "agent.crash", Name: "crash", Workload: drivers.MustWorkload(map[string]cty.Value{"image": cty.StringVal(img), "command": strList("sleep", "600")})})

	// Both objects were created, and nothing was recorded: creating again
	// adopts the network and replaces the container instead of failing on
	// the names.
	first := e.createAll(objs)
	second := e.createAll(objs)
	if a, b := first["agent.crash.network"], second["agent.crash.network"]; a.ID != b.ID || a.Computed["subnet"] != b.Computed["subnet"] {
		t.Errorf("network not adopted: %+v then %+v", a, b)
	}
	if first["agent.crash"].ID == second["agent.crash"].ID {
		t.Errorf("container create reused %s", first["agent.crash"].ID)
	}
	if _, err := e.cli.ContainerInspect(ctx, first["agent.crash"].ID); !cerrdefs.IsNotFound(err) {
		t.Errorf("the unrecorded container is still there: %v", err)
	}
	live := e.read()
	if len(live) != 2 || live["agent.crash"].ID != second["agent.crash"].ID || !live["agent.crash"].Running {
		t.Errorf("live = %+v", live)
	}

	// A container of that name that is not ours is left alone.
	e.apply(drivers.OpDelete, objs["agent.crash"], second["agent.crash"].ID)
	name := "bf-" + e.lineage[:8] + "-crash"
	foreign, err := e.cli.ContainerCreate(ctx, &container.Config{Image: img, Cmd: []string{"true"}}, nil, nil, nil, name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		e.cli.ContainerRemove(context.Background(), foreign.ID, container.RemoveOptions{Force: true})
	})
	_, err = e.try(drivers.OpCreate, objs["agent.crash"], "")
	if err == nil || !strings.Contains(err.Error(), "is not this state's agent.crash") || !strings.Contains(err.Error(), name) {
		t.Errorf("err = %v, want a refusal naming %s", err, name)
	}
	if _, err := e.cli.ContainerInspect(ctx, foreign.ID); err != nil {
		t.Errorf("the foreign container was touched: %v", err)
	}
}

func TestIntegrationManyNetworksInParallel(t *testing.T) {
	t.Parallel()
	e := newEngineTest(t)
	const n = 12
	errs := make(chan error, n)
	subnets := make(chan string, n)
	for i := range n {
		go func() {
			resp, err := e.try(drivers.OpCreate, drivers.Object{Addr: fmt.Sprintf("agent.n%d.network", i), Kind: "network", Attrs: map[string]cty.Value{"internal": cty.True}}, "")
			subnets <- resp.Computed["subnet"]
			errs <- err
		}()
	}
	seen := map[string]bool{}
	for range n {
		if err := <-errs; err != nil {
			t.Error(err)
		}
		s := <-subnets
		if seen[s] {
			t.Errorf("subnet %s handed out twice", s)
		}
		seen[s] = true
	}
	if live := e.read(); len(live) != n {
		t.Errorf("Read found %d networks, want %d", len(live), n)
	}
}

// TestIntegrationGatewayImageSweep: the gateway image is shared; a run
// that deleted a gateway removes it as it ends once no container uses it,
// and not before, unless the lineage still has a snapshot image (its
// resume runs a gateway from it, issue 28): then the run that deletes the
// last snapshot removes it.
func TestIntegrationGatewayImageSweep(t *testing.T) {
	t.Parallel()
	// A gateway binary of this test's own (the shared one plus bytes the
	// loader ignores) gives it a gateway image no other test uses.
	data, err := os.ReadFile(dockertest.GatewayBinary(t))
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "bottlefile")
	if err := os.WriteFile(bin, append(data, []byte("sweep test "+t.Name()+dockertest.NewLineage())...), 0o755); err != nil {
		t.Fatal(err)
	}
	gb, err := gateway.ReadBinary(bin)
	if err != nil {
		t.Fatal(err)
	}
	sum := gb.Sum
	e := newEngineTestGateway(t, bin)
	ours := filters.NewArgs(filters.Arg("label", "io.bottlefile.gateway-binary="+sum))
	t.Cleanup(func() { // whatever the test left, by label
		imgs, _ := e.cli.ImageList(context.Background(), image.ListOptions{Filters: ours})
		for _, img := range imgs {
			e.cli.ImageRemove(context.Background(), img.ID, image.RemoveOptions{Force: true, PruneChildren: true})
		}
	})
	images := func() int {
		t.Helper()
		imgs, err := e.cli.ImageList(t.Context(), image.ListOptions{Filters: ours})
		if err != nil {
			t.Fatal(err)
		}
		return len(imgs)
	}

	img := dockertest.BusyboxImage(t, e.cli)
	objs := map[string]drivers.Object{}
	for _, name := range []string{"a", "b"} {
		maps.Copy(objs, e.plan(drivers.AgentSpec{Addr: "agent." + name, Name: name, Workload: drivers.MustWorkload(map[string]cty.Value{"image": cty.StringVal(img), "command": strList("sleep", "600"), "egress": cty.ListValEmpty(cty.String)})}))
	}
	e.api.take()
	ids := e.createAll(objs)
	// One import for both gateways (and the engine host probe). Another
	// test process's sweep may take the image between its import and a
	// create, even untag it under a create that then uses it: each create
	// the engine refused for its image may add an import, and the image
	// left untagged is one more of this binary until its container goes.
	calls := e.api.take()
	if imports, refused := calls["ImageImport"], calls["ContainerCreate NotFound"]; imports < 1 || imports > 1+refused {
		t.Fatalf("%d gateway image imports for two gateways with %d creates refused for a missing image, want 1 (+1 per refusal)", imports, refused)
	}
	insp, err := e.cli.ContainerInspect(t.Context(), ids["agent.b.gateway"].ID)
	if err != nil {
		t.Fatal(err)
	}
	gwImage := insp.Image
	// A snapshot image of the lineage, as a policy snapshot leaves it.
	snap, err := e.cli.ContainerCommit(t.Context(), ids["agent.a"].ID, container.CommitOptions{Config: &container.Config{Labels: map[string]string{labelSnapshotOf: "agent.a"}}})
	if err != nil {
		t.Fatal(err)
	}
	e.apply(drivers.OpDelete, objs["agent.a.gateway"], ids["agent.a.gateway"].ID)
	e.reopen()
	if _, err := e.cli.ImageInspect(t.Context(), gwImage); err != nil {
		t.Errorf("a run deleting one of two gateways removed the image the other runs from: %v", err)
	}
	// (That the sweep waits for Close is TestDeleteGatewaySweepsImages'.)
	// The last gateway goes, the snapshot stays: the image is kept for
	// the resume. Another test process's sweep may still take it (it
	// keeps only its own binary's image), so the assertion is that this
	// driver did not ask for its removal.
	e.apply(drivers.OpDelete, objs["agent.b.gateway"], ids["agent.b.gateway"].ID)
	e.reopen()
	if e.api.removedImage(gwImage) {
		t.Errorf("a run deleting the last gateway of a lineage with a snapshot removed the gateway image its resume needs")
	}
	// The last snapshot goes: the image with it.
	e.apply(drivers.OpDelete, drivers.Object{Addr: "agent.a.snapshot.1", Kind: drivers.KindSnapshot}, snap.ID)
	e.reopen()
	if n := images(); n != 0 {
		t.Errorf("%d gateway images left after a run deleted the last snapshot of the last lineage using it, want 0", n)
	}
	delete(objs, "agent.a.gateway")
	delete(objs, "agent.b.gateway")
	e.deleteAll(objs, ids)
	e.assertGone()
}

// TestIntegrationSharedBuild: two agents and a sidecar with the same build
// context and Dockerfile are built once in a run. The others get the same
// layers and config under their own tag and labels, so each is its own
// object (Read finds each, deleting one leaves the others running), and
// another Dockerfile in the same context is a build of its own.
func TestIntegrationSharedBuild(t *testing.T) {
	t.Parallel()
	e := newEngineTest(t)
	img := dockertest.BusyboxImage(t, e.cli)
	ctx := t.Context()

	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"Dockerfile":       "FROM " + img + "\nCOPY hello.txt /hello.txt\nENV BUILT=yes\nCMD [\"sh\", \"-c\", \"cat /hello.txt; exec sleep 600\"]\n",
		"Dockerfile.other": "FROM " + img + "\nCOPY hello.txt /other.txt\nCMD [\"sleep\", \"600\"]\n",
		"hello.txt":        "hello from the shared context\n",
	})
	all := map[string]drivers.Object{}
	for _, a := range []drivers.AgentSpec{
		{Addr: "agent.a", Name: "a", Workload: drivers.MustWorkload(map[string]cty.Value{"build": drivers.BuildValue(dir, "")})},
		{
			Addr:     "agent.b",
			Name:     "b",
			Workload: drivers.MustWorkload(map[string]cty.Value{"build": drivers.BuildValue(dir, "")}),
			Sidecars: []drivers.SidecarSpec{
				{Addr: "agent.b.sidecar.helper", Name: "helper", Workload: drivers.MustWorkload(map[string]cty.Value{"build": drivers.BuildValue(dir, "")})},
			},
		},
		{Addr: "agent.c", Name: "c", Workload: drivers.MustWorkload(map[string]cty.Value{"build": drivers.BuildValue(dir, "Dockerfile.other")})},
	} {
		maps.Copy(all, e.plan(a))
	}
	images := []string{"agent.a.image", "agent.b.image", "agent.b.sidecar.helper.image", "agent.c.image"}
	for _, addr := range images {
		if _, ok := all[addr]; !ok {
			t.Fatalf("no %s planned: %v", addr, slices.Sorted(maps.Keys(all)))
		}
	}

	// The image objects are created at once, as the executor does.
	e.api.take()
	built := make([]drivers.ApplyResponse, len(images))
	errs := make([]error, len(images))
	done := make(chan int)
	for i, addr := range images {
		go func() {
			built[i], errs[i] = e.try(drivers.OpCreate, all[addr], "")
			done <- i
		}()
	}
	for range images {
		<-done
	}
	for i, err := range errs {
		if err != nil {
			t.Fatalf("creating %s: %v", images[i], err)
		}
	}
	if calls := e.api.take(); calls["ImageBuild"] != 2 || calls["ImageLoad"] != 2 {
		t.Errorf("calls %v, want 2 builds (one per distinct Dockerfile) and 2 loads (the shared copies)", calls)
	}
	ids := map[string]drivers.ApplyResponse{}
	for i, addr := range images {
		ids[addr] = built[i]
	}
	seen := map[string]bool{}
	for _, addr := range images {
		r := ids[addr]
		if seen[r.ID] || seen[r.Computed["tag"]] {
			t.Errorf("%s shares its id or tag with another object: %+v", addr, r)
		}
		seen[r.ID], seen[r.Computed["tag"]] = true, true
		info, err := e.cli.ImageInspect(ctx, r.Computed["tag"])
		if err != nil {
			t.Fatal(err)
		}
		if info.ID != r.ID || info.Config.Labels[drivers.LabelAddress] != addr || info.Config.Labels[drivers.LabelLineage] != e.lineage || info.Config.Labels[labelBuildOf] != e.lineage {
			t.Errorf("%s: image %s labels %v", addr, shortID(info.ID), info.Config.Labels)
		}
	}
	a, _ := e.cli.ImageInspect(ctx, ids["agent.a.image"].ID)
	b, _ := e.cli.ImageInspect(ctx, ids["agent.b.image"].ID)
	if !slices.Equal(a.RootFS.Layers, b.RootFS.Layers) || !slices.Contains(b.Config.Env, "BUILT=yes") || !slices.Equal(a.Config.Cmd, b.Config.Cmd) {
		t.Errorf("shared copy differs: layers %v / %v, env %v, cmd %v / %v", a.RootFS.Layers, b.RootFS.Layers, b.Config.Env, a.Config.Cmd, b.Config.Cmd)
	}

	// The containers, each from its own image.
	for _, addr := range []string{"agent.a.network", "agent.b.network", "agent.c.network", "agent.a", "agent.b", "agent.b.sidecar.helper", "agent.c"} {
		ids[addr] = e.apply(drivers.OpCreate, all[addr], "")
	}
	live := e.read()
	for _, addr := range images {
		if live[addr].ID != ids[addr].ID {
			t.Errorf("live %s = %+v, want %s", addr, live[addr], shortID(ids[addr].ID))
		}
	}
	if live["agent.b"].ImageID != ids["agent.b.image"].ID || !live["agent.b"].Running {
		t.Errorf("agent.b = %+v, want running from its own image %s", live["agent.b"], shortID(ids["agent.b.image"].ID))
	}

	// Deleting a's container and image leaves b's image and container.
	e.apply(drivers.OpDelete, all["agent.a"], ids["agent.a"].ID)
	e.apply(drivers.OpDelete, all["agent.a.image"], ids["agent.a.image"].ID)
	out, code := dockertest.Exec(t, e.cli, ids["agent.b"].ID, "cat", "/hello.txt")
	if code != 0 || out != "hello from the shared context\n" {
		t.Errorf("agent.b after a's image went: exit %d, %q", code, out)
	}
	if _, err := e.cli.ImageInspect(ctx, ids["agent.b.image"].ID); err != nil {
		t.Errorf("b's image went with a's: %v", err)
	}
	delete(all, "agent.a")
	delete(all, "agent.a.image")
	e.deleteAll(all, ids)
	e.assertGone()
}
