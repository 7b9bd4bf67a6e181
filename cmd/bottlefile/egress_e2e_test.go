package main

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/docker/docker/api/types/network"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/docker/dockertest"
)

// egressAddRemoveBottlefile is one agent on a runtime whose egress network
// is the test's outside world; %[3]s is its egress block, or nothing.
const egressAddRemoveBottlefile = `
runtime "local" {
  driver         = "docker"
  egress_network = %q
}

agent "coder" {
  runtime = runtime.local
  image   = %q
  command = ["sleep", "3600"]
%s}
`

// TestE2EEgressAddRemove is issue 14's "no idle gateways" on the real
// engine. A bottle without an egress block has no gateway container, and
// its agent still reaches nothing: not a host of another network (by name
// through its proxy settings, or by address), not a service on the docker
// host on any of its addresses. Adding an egress block creates the gateway
// and nothing else: the agent keeps its container id and start time, and
// reaches the allowed host (a container this test started) through the
// gateway. Removing the block deletes the gateway, again without touching
// the agent, and the way out is closed again.
func TestE2EEgressAddRemove(t *testing.T) {
	parallel(t)
	cli := dockertest.Client(t)
	r := &escapeRig{t: t, cli: cli, img: dockertest.BusyboxImage(t, cli), run: randomHex(4), dir: t.TempDir()}
	r.makeOutside()
	t.Cleanup(r.removeWorld)
	r.allowedID, r.allowedIP = r.outsider("allowed-host", r.img, []string{"sh", "-c", "mkdir -p /www && echo allowed-host-content > /www/index.html && exec httpd -f -p 8080 -h /www"})
	r.host = startHostService(t)

	write := func(egress string) {
		t.Helper()
		writeBottlefile(t, r.dir, egressAddRemoveBottlefile, r.outside, r.img, egress)
	}
	gateways := func() int {
		t.Helper()
		return len(containersWith(t, cli, drivers.LabelLineage+"="+r.lineage, drivers.LabelAddress+"=agent.coder.gateway"))
	}
	type agentRun struct{ id, started, proxy string }
	agentNow := func() agentRun {
		t.Helper()
		w := r.find(t, "agent.coder")
		info, err := cli.ContainerInspect(context.Background(), w.id)
		if err != nil {
			t.Fatal(err)
		}
		a := agentRun{id: info.ID, started: info.State.StartedAt}
		for _, kv := range info.Config.Env {
			if v, ok := strings.CutPrefix(kv, "HTTP_PROXY="); ok {
				a.proxy = v
			}
		}
		return a
	}
	closed := func(when string) {
		t.Helper()
		agent := r.find(t, "agent.coder")
		probes := []probe{
			{"the allowed host by name, through the proxy settings", viaProxy("http://allowed-host:8080/")},
			{"the allowed host by address", direct(fmt.Sprintf("http://%s:8080/", r.allowedIP))},
			{"the allowed host by address, through the proxy settings", viaProxy(fmt.Sprintf("http://%s:8080/", r.allowedIP))},
		}
		for _, a := range r.hostAddrs() {
			probes = append(probes, probe{"the docker host at " + a.String(), direct(r.hostURL(a))})
		}
		before := len(r.host.seen())
		res := r.probeAll(t, agent.id, probes)
		for _, p := range probes {
			marker := "allowed-host-content"
			if strings.HasPrefix(p.name, "the docker host") {
				marker = "host-service-secret"
			}
			if got := res[p.name]; got.code == 0 || strings.Contains(got.out, marker) {
				t.Errorf("%s: the agent reached %s (exit %d): %q", when, p.name, got.code, got.out)
			}
		}
		if seen := r.host.seen(); len(seen) != before {
			t.Errorf("%s: the host service was connected to from %v", when, seen[before:])
		}
	}

	// No egress block: no gateway, and no way out.
	write("")
	mustRun(t, r.dir, "apply", "-auto-approve")
	r.lineage = lineageOf(t, cli, r.dir)
	if n := gateways(); n != 0 {
		t.Fatalf("a bottle without an egress block has %d gateway containers", n)
	}
	first := agentNow()
	gwName := "bf-" + r.lineage[:8] + "-coder-gateway"
	if first.proxy != "http://"+gwName+":3128" {
		t.Errorf("HTTP_PROXY = %q, want the reserved gateway name %s from the start", first.proxy, gwName)
	}
	closed("without an egress block")

	// Adding an egress block creates the gateway, and only it.
	write(fmt.Sprintf("  egress {\n    allow = [\"allowed-host:8080\", \"%s:8080\"]\n  }\n", r.allowedIP))
	res := mustRun(t, r.dir, "plan")
	wantAll(t, "plan adding egress", res.stdout, "+ agent.coder.gateway (gateway)", "Plan: 1 to add, 0 to change, 0 to destroy.")
	mustRun(t, r.dir, "apply", "-auto-approve")
	if now := agentNow(); now != first {
		t.Errorf("adding an egress block touched the agent: %+v, was %+v", now, first)
	}
	gw := r.find(t, "agent.coder.gateway")
	if gw.name != gwName {
		t.Errorf("gateway name %s, want the reserved %s", gw.name, gwName)
	}
	agent := r.find(t, "agent.coder")
	bottle, err := cli.NetworkInspect(context.Background(), "bf-"+r.lineage[:8]+"-coder", network.InspectOptions{})
	if err != nil || len(bottle.IPAM.Config) != 1 {
		t.Fatalf("bottle network: %v %+v", err, bottle.IPAM)
	}
	if subnet := netip.MustParsePrefix(bottle.IPAM.Config[0].Subnet); gw.ip != lastUsable(subnet) {
		t.Errorf("gateway address %s, want the reserved %s (the highest of %s)", gw.ip, lastUsable(subnet), subnet)
	}
	got := r.probeAll(t, agent.id, []probe{{"allowed", viaProxy("http://allowed-host:8080/")}})
	wantContent(t, got, "allowed", "allowed-host-content")
	if res := mustRun(t, r.dir, "plan"); !strings.Contains(res.stdout, "No changes.") {
		t.Errorf("plan after adding egress:\n%s", res.stdout)
	}

	// Removing it deletes the gateway, and only it.
	write("")
	res = mustRun(t, r.dir, "plan")
	wantAll(t, "plan removing egress", res.stdout, "- agent.coder.gateway (gateway)", "Plan: 0 to add, 0 to change, 1 to destroy.")
	mustRun(t, r.dir, "apply", "-auto-approve")
	if now := agentNow(); now != first {
		t.Errorf("removing the egress block touched the agent: %+v, was %+v", now, first)
	}
	if n := gateways(); n != 0 {
		t.Errorf("%d gateway containers left after removing the egress block", n)
	}
	closed("after removing the egress block")
	if res := mustRun(t, r.dir, "plan"); !strings.Contains(res.stdout, "No changes.") {
		t.Errorf("plan after removing egress:\n%s", res.stdout)
	}
	mustRun(t, r.dir, "destroy", "-auto-approve")
}

// lastUsable is the highest host address of an IPv4 subnet.
func lastUsable(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().As4()
	n := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	n |= 1<<(32-p.Bits()) - 1
	n--
	return netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)})
}
