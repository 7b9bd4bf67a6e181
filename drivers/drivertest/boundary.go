package drivertest

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/zclconf/go-cty/cty"

	"github.com/bottlefile/bottlefile/drivers"
)

// The boundary cases (issue 27): what a driver promises about a bottle's
// walls, each exercised when the driver declares the capability it rests
// on and skipped, naming that capability, when it does not. They run on
// two bottles in a lineage of their own:
//
//   - "reach": an agent whose egress allows the harness's outside server,
//     that prints a line when it starts, with (Sidecars) a sidecar "web"
//     serving a page, which (Healthcheck) is healthy only once it has
//     written its ready file;
//   - "other": an agent whose egress allows something else; at the end it
//     writes a file, is snapshotted, and is made again from the snapshot
//     (Snapshots.Take), then removed behind the driver's back
//     (Harness.RemoveOutside).
//
// Commands run in the workloads through the driver's own Exec, so they
// need the Exec capability; the workload image is the harness's, which
// must have busybox's sh, wget, httpd and timeout (the busybox image the
// Docker-engine harnesses use has them).

const (
	sidecarBody = "conformance-sidecar-ok"
	startLine   = "conformance-log-line"
	// deniedRule is what "other" allows: an address of TEST-NET-1, so its
	// gateway exists and refuses the outside server.
	deniedRule = "192.0.2.1:80"
)

// boundary is the running pair of bottles and what the cases need.
type boundary struct {
	d       drivers.Driver
	caps    drivers.Capabilities
	lineage string
	outside string // "host:port", "" without one
	body    string // what the outside server answers
	live    map[string]drivers.LiveObject
	// settled is how long Settle took to report the sidecar healthy, and
	// settleErr what it returned (Healthcheck).
	settled   time.Duration
	settleErr error
}

// checkBoundary runs the boundary cases; see TestDriver.
func checkBoundary(t *testing.T, d drivers.Driver, h Harness, caps drivers.Capabilities) {
	if h.Inert {
		t.Skip("the harness's runtime runs no process (Harness.Inert): nothing to probe a wall with")
	}
	if !caps.Exec {
		t.Skipf("the %s driver declares no exec: the boundary cases run their probes in the workloads", d.Name())
	}
	b := &boundary{d: d, caps: caps, lineage: uuid.NewString(), live: map[string]drivers.LiveObject{}}
	if h.Outside != nil && caps.Egress.Addresses && caps.Egress.Ports {
		b.outside, b.body = h.Outside(t)
	}
	var planned []drivers.Object
	t.Cleanup(func() { deleteLineage(t, d, b.lineage, planned) })
	for _, a := range []drivers.AgentSpec{b.reachAgent(h.Image), b.otherAgent(h.Image)} {
		resp, err := d.Plan(t.Context(), drivers.PlanRequest{Agent: a})
		if err != nil {
			t.Fatalf("Plan %s: %v", a.Addr, err)
		}
		// Ordered only: what checkPlan checks of a plan, the Plan case
		// has (and the docker gateway's InPlace names "credentials",
		// which it sets only when the agent has some).
		order, err := dependencyOrder(resp.Objects)
		if err != nil {
			t.Fatalf("Plan %s: %v", a.Addr, err)
		}
		planned = append(planned, order...)
		b.create(t, order)
	}

	t.Run("Exec", b.checkExec)
	t.Run("Logs", b.checkLogs)
	t.Run("SidecarByName", b.checkSidecar)
	t.Run("HealthcheckOrder", b.checkHealthcheck)
	t.Run("EgressAllowed", b.checkEgressAllowed)
	t.Run("EgressDenied", b.checkEgressDenied)
	t.Run("OtherBottleUnreachable", b.checkOtherBottle)
	// These two re-make and remove agent.other: last.
	t.Run("SnapshotResumes", func(t *testing.T) { b.checkResume(t, h.Image) })
	t.Run("DriftRemovedOutside", func(t *testing.T) { b.checkRemovedOutside(t, h) })
}

// reachAgent is the bottle the probes start from.
func (b *boundary) reachAgent(image string) drivers.AgentSpec {
	attrs := map[string]cty.Value{
		"image":   cty.StringVal(image),
		"command": cty.ListVal([]cty.Value{cty.StringVal("sh"), cty.StringVal("-c"), cty.StringVal("echo " + startLine + "; exec sleep 600")}),
	}
	if b.outside != "" {
		attrs["egress"] = cty.ListVal([]cty.Value{cty.StringVal(b.outside)})
	}
	a := drivers.AgentSpec{Addr: "agent.reach", Name: "reach", Workload: drivers.MustWorkload(attrs)}
	if !b.caps.Sidecars {
		return a
	}
	// The sidecar writes its ready file three seconds after it starts,
	// then serves its page: healthy only from then on.
	web := map[string]cty.Value{
		"image": cty.StringVal(image),
		"command": cty.ListVal([]cty.Value{cty.StringVal("sh"), cty.StringVal("-c"), cty.StringVal(
			"mkdir -p /www && echo " + sidecarBody + " > /www/index.html && sleep 3 && touch /tmp/ready && exec httpd -f -p 8080 -h /www")}),
	}
	if b.caps.Healthcheck {
		web["healthcheck"] = cty.ObjectVal(map[string]cty.Value{
			"command":      cty.ListVal([]cty.Value{cty.StringVal("test"), cty.StringVal("-f"), cty.StringVal("/tmp/ready")}),
			"interval":     cty.StringVal("1s"),
			"timeout":      cty.StringVal("5s"),
			"retries":      cty.NumberIntVal(30),
			"start_period": cty.StringVal("0s"),
		})
	}
	a.Sidecars = []drivers.SidecarSpec{{Addr: "agent.reach.sidecar.web", Name: "web", Workload: drivers.MustWorkload(web)}}
	return a
}

// otherAgent is another bottle, allowed somewhere else.
func (b *boundary) otherAgent(image string) drivers.AgentSpec {
	attrs := map[string]cty.Value{
		"image":   cty.StringVal(image),
		"command": cty.ListVal([]cty.Value{cty.StringVal("sleep"), cty.StringVal("600")}),
	}
	if b.outside != "" {
		attrs["egress"] = cty.ListVal([]cty.Value{cty.StringVal(deniedRule)})
	}
	return drivers.AgentSpec{Addr: "agent.other", Name: "other", Workload: drivers.MustWorkload(attrs)}
}

// create applies one agent's objects in order. A workload with a
// healthcheck is settled before what follows it is created, as the core
// does for an agent that waits for its sidecars.
func (b *boundary) create(t *testing.T, order []drivers.Object) {
	t.Helper()
	settler, canSettle := drivers.As[drivers.Settler](b.d)
	for _, o := range order {
		resp, err := b.d.Apply(t.Context(), drivers.ApplyRequest{Op: drivers.OpCreate, Lineage: b.lineage, Object: o, Hash: testHash(b.lineage, o.Addr)})
		if err != nil {
			t.Fatalf("create %s: %v", o.Addr, err)
		}
		if hc, ok := o.Attrs["healthcheck"]; ok && !hc.IsNull() && canSettle {
			start := time.Now()
			b.settleErr = settler.Settle(t.Context(), drivers.SettleRequest{Lineage: b.lineage, Object: o, ID: resp.ID, Wait: time.Second})
			b.settled = time.Since(start)
		}
	}
	read, err := b.d.Read(t.Context(), drivers.ReadRequest{Lineage: b.lineage})
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	for _, o := range read.Objects {
		b.live[o.Addr] = o
	}
}

// exec runs a shell script in the workload at addr and returns its
// output and exit code.
func (b *boundary) exec(t *testing.T, addr, script string) (string, int) {
	t.Helper()
	return b.run(t, addr, "sh", "-c", script)
}

// run runs argv in the workload at addr, as exec.
func (b *boundary) run(t *testing.T, addr string, argv ...string) (string, int) {
	t.Helper()
	obj, ok := b.live[addr]
	if !ok {
		t.Fatalf("Read does not report %s", addr)
	}
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	x, ok := drivers.As[drivers.Execer](b.d)
	if !ok {
		t.Fatalf("the %s driver declares exec but does not implement drivers.Execer", b.d.Name())
	}
	code, err := x.Exec(ctx, b.lineage, obj, drivers.ExecRequest{Command: argv, Stdout: &out, Stderr: &out})
	if err != nil {
		t.Fatalf("exec in %s: %v", addr, err)
	}
	return out.String(), code
}

// fetch is a script that GETs url with busybox wget, through the proxy
// settings the driver gave the workload unless direct, and prints its
// exit code last.
func fetch(url string, direct bool) string {
	s := "timeout 10 wget -q -O - " + url + " 2>&1; echo rc=$?"
	if direct {
		s = "unset http_proxy HTTP_PROXY https_proxy HTTPS_PROXY; " + s
	}
	return s
}

// eventually retries probe for up to 30 s until it reports success: a
// gateway or sidecar may take a moment to answer after its create.
func eventually(probe func() (string, bool)) (string, bool) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, ok := probe()
		if ok || time.Now().After(deadline) {
			return out, ok
		}
		time.Sleep(time.Second)
	}
}

func (b *boundary) checkExec(t *testing.T) {
	out, code := b.exec(t, "agent.reach", "echo conformance-exec-ok")
	if code != 0 || strings.TrimSpace(out) != "conformance-exec-ok" {
		t.Errorf("exec echo: exit %d, %q", code, out)
	}
	if _, code := b.exec(t, "agent.reach", "exit 3"); code != 3 {
		t.Errorf("exec of a command that exits 3: exit %d", code)
	}
}

func (b *boundary) checkLogs(t *testing.T) {
	if !b.caps.Logs {
		t.Skipf("the %s driver declares no logs", b.d.Name())
	}
	lr, ok := drivers.As[drivers.LogReader](b.d)
	if !ok {
		t.Fatalf("the %s driver declares logs but does not implement drivers.LogReader", b.d.Name())
	}
	out, ok := eventually(func() (string, bool) {
		var stdout, stderr bytes.Buffer
		if err := lr.Logs(t.Context(), b.lineage, b.live["agent.reach"], drivers.LogOptions{}, &stdout, &stderr); err != nil {
			return err.Error(), false
		}
		return stdout.String(), strings.Contains(stdout.String(), startLine)
	})
	if !ok {
		t.Errorf("the agent's log lacks the line it printed at start: %q", out)
	}
}

func (b *boundary) checkSidecar(t *testing.T) {
	if !b.caps.Sidecars {
		t.Skipf("the %s driver declares no sidecars", b.d.Name())
	}
	out, ok := eventually(func() (string, bool) {
		out, _ := b.exec(t, "agent.reach", fetch("http://web:8080/", true))
		return out, strings.Contains(out, sidecarBody)
	})
	if !ok {
		t.Errorf("the agent does not reach its sidecar by its name, web: %q", out)
	}
}

func (b *boundary) checkHealthcheck(t *testing.T) {
	if !b.caps.Sidecars || !b.caps.Healthcheck {
		t.Skipf("the %s driver declares no healthchecks on sidecars (sidecars %v, healthcheck %v)", b.d.Name(), b.caps.Sidecars, b.caps.Healthcheck)
	}
	if _, ok := drivers.As[drivers.Settler](b.d); !ok {
		t.Fatalf("the %s driver declares healthchecks but cannot settle a workload (drivers.Settler)", b.d.Name())
	}
	if b.settleErr != nil {
		t.Fatalf("Settle of the sidecar: %v", b.settleErr)
	}
	// Settle returned once the sidecar was healthy: its ready file, written
	// three seconds after its start, is there, and the agent created after
	// it finds it ready.
	if out, code := b.exec(t, "agent.reach.sidecar.web", "test -f /tmp/ready && echo ready"); code != 0 {
		t.Errorf("Settle returned after %v, before the sidecar was healthy: %q exit %d", b.settled, out, code)
	}
	if b.settled < 2*time.Second {
		t.Errorf("Settle returned after %v, before the sidecar could be healthy (it writes its ready file after 3 s)", b.settled)
	}
}

func (b *boundary) egressCase(t *testing.T) {
	t.Helper()
	e := b.caps.Egress
	if !e.Addresses || !e.Ports {
		t.Skipf("the %s driver declares no egress rules by address and port", b.d.Name())
	}
	if b.outside == "" {
		t.Skip("the harness starts no outside server (Harness.Outside)")
	}
}

func (b *boundary) checkEgressAllowed(t *testing.T) {
	b.egressCase(t)
	url := "http://" + b.outside + "/"
	out, ok := eventually(func() (string, bool) {
		out, _ := b.exec(t, "agent.reach", fetch(url, false))
		return out, strings.Contains(out, b.body)
	})
	if !ok {
		t.Errorf("the agent does not reach %s, which its egress allows, through its gateway: %q", b.outside, out)
	}
	if out, _ := b.exec(t, "agent.reach", fetch(url, true)); strings.Contains(out, b.body) {
		t.Errorf("the agent reaches %s without its gateway: %q", b.outside, out)
	}
}

func (b *boundary) checkEgressDenied(t *testing.T) {
	b.egressCase(t)
	// The gateway must be up for its refusal to mean anything: it answers
	// (a 403) rather than the connection failing.
	url := "http://" + b.outside + "/"
	out, ok := eventually(func() (string, bool) {
		out, _ := b.exec(t, "agent.other", fetch(url, false))
		return out, strings.Contains(out, "403")
	})
	if !ok || strings.Contains(out, b.body) {
		t.Errorf("the other agent, whose egress allows only %s, asked its gateway for %s: %q, want a 403 and not the page", deniedRule, b.outside, out)
	}
	if out, _ := b.exec(t, "agent.other", fetch(url, true)); strings.Contains(out, b.body) {
		t.Errorf("the other agent reaches %s without its gateway: %q", b.outside, out)
	}
}

func (b *boundary) checkOtherBottle(t *testing.T) {
	if !b.caps.Sidecars {
		t.Skipf("the %s driver declares no sidecars: no service in a bottle to reach", b.d.Name())
	}
	// The sidecar's own addresses, as it sees them.
	ips, code := b.exec(t, "agent.reach.sidecar.web", "hostname -i")
	if code != 0 || strings.TrimSpace(ips) == "" {
		t.Fatalf("the sidecar's address: exit %d, %q", code, ips)
	}
	// The reach agent does reach it at those addresses, so a failure from
	// the other bottle is the wall, not a wrong address.
	targets := []string{"web:8080"}
	for _, ip := range strings.Fields(ips) {
		targets = append(targets, ip+":8080")
	}
	for _, target := range targets[1:] {
		if out, ok := eventually(func() (string, bool) {
			out, _ := b.exec(t, "agent.reach", fetch("http://"+target+"/", true))
			return out, strings.Contains(out, sidecarBody)
		}); !ok {
			t.Fatalf("the reach agent does not reach its own sidecar at %s: %q", target, out)
		}
	}
	for _, target := range targets {
		for _, direct := range []bool{true, false} {
			if out, _ := b.exec(t, "agent.other", fetch("http://"+target+"/", direct)); strings.Contains(out, sidecarBody) {
				t.Errorf("another bottle's agent reaches agent.reach's sidecar at %s (without its gateway: %v): %q", target, direct, out)
			}
		}
	}
}

func (b *boundary) checkResume(t *testing.T, image string) {
	if !b.caps.Snapshots.Take {
		t.Skipf("the %s driver declares no snapshots", b.d.Name())
	}
	// touch and test, without a shell: what a smolvm fake's guest answers.
	const work = "/conformance-work"
	if out, code := b.run(t, "agent.other", "touch", work); code != 0 {
		t.Fatalf("writing in the agent: exit %d, %q", code, out)
	}
	agent := b.otherAgent(image)
	snap := snapshotObject("agent.other.snapshot.1", agent.Addr)
	taken, err := b.d.Apply(t.Context(), drivers.ApplyRequest{Op: drivers.OpCreate, Lineage: b.lineage, Object: snap, Hash: testHash(b.lineage, snap.Addr), Agent: &agent})
	if err != nil {
		t.Fatalf("taking a snapshot: %v", err)
	}
	if snapshotImage(taken) == "" {
		t.Fatalf("the snapshot has no image to boot from")
	}
	resp, err := b.d.Plan(t.Context(), drivers.PlanRequest{Agent: agent})
	if err != nil {
		t.Fatalf("Plan: %v", err)
	}
	i := slices.IndexFunc(resp.Objects, func(o drivers.Object) bool { return o.Addr == agent.Addr })
	if i < 0 {
		t.Fatalf("Plan has no %s", agent.Addr)
	}
	self := resp.Objects[i]
	old := b.live[agent.Addr]
	if _, err := b.d.Apply(t.Context(), drivers.ApplyRequest{Op: drivers.OpDelete, Lineage: b.lineage, ID: old.ID, Object: drivers.Object{Addr: self.Addr, Kind: self.Kind}}); err != nil {
		t.Fatalf("deleting the agent: %v", err)
	}
	if _, err := b.d.Apply(t.Context(), drivers.ApplyRequest{Op: drivers.OpCreate, Lineage: b.lineage, Object: self, Hash: testHash(b.lineage, self.Addr), BootImage: snapshotImage(taken)}); err != nil {
		t.Fatalf("creating the agent from its snapshot: %v", err)
	}
	b.reread(t)
	// A driver may name its workloads by their ID (smolvm): the same ID
	// can come back.
	if got := b.live[agent.Addr]; !got.Running {
		t.Fatalf("after the create from the snapshot: %+v, want it running", got)
	}
	if out, code := b.run(t, "agent.other", "test", "-e", work); code != 0 {
		t.Errorf("the workload made from the snapshot lacks what was written before it: exit %d, %q", code, out)
	}
}

func (b *boundary) checkRemovedOutside(t *testing.T, h Harness) {
	if h.RemoveOutside == nil {
		t.Skip("the harness cannot remove a workload behind the driver's back (Harness.RemoveOutside)")
	}
	obj, ok := b.live["agent.other"]
	if !ok {
		t.Fatal("Read does not report agent.other")
	}
	h.RemoveOutside(t, b.lineage, obj)
	b.reread(t)
	if got, ok := b.live["agent.other"]; ok && got.ID == obj.ID && got.Running {
		t.Errorf("a workload removed outside the driver still reads as running: %+v", got)
	}
	if _, ok := b.live["agent.reach"]; !ok {
		t.Errorf("removing agent.other outside lost agent.reach from Read")
	}
}

// reread replaces what the boundary knows is live with what Read says.
func (b *boundary) reread(t *testing.T) {
	t.Helper()
	read, err := b.d.Read(t.Context(), drivers.ReadRequest{Lineage: b.lineage})
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	b.live = map[string]drivers.LiveObject{}
	for _, o := range read.Objects {
		b.live[o.Addr] = o
	}
}
