package swarmtest

import (
	"fmt"
	"strconv"
	"testing"
)

// Partition cuts node i off the hub, as a link that silently drops
// everything would: what it sends to the registry (and the outside host)
// is lost without an answer, so its pushes and pulls hang until their
// own timeouts (minutes, the kernel's). Its engine's socket still answers
// this process, and its swarm traffic to the other nodes still flows:
// the cluster keeps its task. It ends with Heal, which a cleanup of the
// test calls if the test did not.
func (f *Fixture) Partition(t testing.TB, i int) {
	t.Helper()
	if err := f.hub(append([]string{"iptables", "-I"}, partitionRule(f.Nodes[i])...)...); err != nil {
		t.Fatalf("partitioning %s: %v", f.Nodes[i].Name, err)
	}
	t.Cleanup(func() { f.Heal(t, i) })
}

// Heal ends a Partition of node i.
func (f *Fixture) Heal(t testing.TB, i int) {
	t.Helper()
	rule := partitionRule(f.Nodes[i])
	for f.hub(append([]string{"iptables", "-C"}, rule...)...) == nil {
		if err := f.hub(append([]string{"iptables", "-D"}, rule...)...); err != nil {
			t.Errorf("healing %s: %v", f.Nodes[i].Name, err)
			return
		}
	}
}

func partitionRule(n Node) []string { return []string{"INPUT", "-s", n.Addr, "-j", "DROP"} }

// Stall makes node i's transfers to the hub stall mid-way, as a link
// that dies under load does: every full-sized segment it sends to the
// registry is lost, while handshakes and small requests still pass. A
// push then connects, starts its upload and hangs on it without an
// error (the engine has no timeout for an upload in progress). It ends
// with Unstall, which a cleanup of the test calls if the test did not.
func (f *Fixture) Stall(t testing.TB, i int) {
	t.Helper()
	if err := f.hub(append([]string{"iptables", "-I"}, stallRule(f.Nodes[i])...)...); err != nil {
		t.Fatalf("stalling %s: %v", f.Nodes[i].Name, err)
	}
	t.Cleanup(func() { f.Unstall(t, i) })
}

// Unstall ends a Stall of node i.
func (f *Fixture) Unstall(t testing.TB, i int) {
	t.Helper()
	rule := stallRule(f.Nodes[i])
	for f.hub(append([]string{"iptables", "-C"}, rule...)...) == nil {
		if err := f.hub(append([]string{"iptables", "-D"}, rule...)...); err != nil {
			t.Errorf("unstalling %s: %v", f.Nodes[i].Name, err)
			return
		}
	}
}

func stallRule(n Node) []string {
	return []string{"INPUT", "-s", n.Addr, "-p", "tcp", "--dport", "5000", "-m", "length", "--length", "1200:65535", "-j", "DROP"}
}

// registryRule refuses every connection to the registry's port, as a
// registry that is down would (a reset, at once).
var registryRule = []string{"INPUT", "-p", "tcp", "--dport", "5000", "-j", "REJECT", "--reject-with", "tcp-reset"}

// StopRegistry makes the registry refuse every connection, from the
// nodes and from this process (RegistryURL), until StartRegistry, which a
// cleanup of the test calls if the test did not. The registry keeps what
// it stores.
func (f *Fixture) StopRegistry(t testing.TB) {
	t.Helper()
	if err := f.hub(append([]string{"iptables", "-I"}, registryRule...)...); err != nil {
		t.Fatalf("stopping the registry: %v", err)
	}
	t.Cleanup(func() { f.StartRegistry(t) })
}

// StartRegistry lets connections reach the registry again.
func (f *Fixture) StartRegistry(t testing.TB) {
	t.Helper()
	for f.hub(append([]string{"iptables", "-C"}, registryRule...)...) == nil {
		if err := f.hub(append([]string{"iptables", "-D"}, registryRule...)...); err != nil {
			t.Errorf("starting the registry: %v", err)
			return
		}
	}
}

// hub runs a command in the hub's network namespace.
func (f *Fixture) hub(args ...string) error {
	if len(f.procs) == 0 || f.procs[0].Name != "hub" {
		return fmt.Errorf("the fixture has no hub")
	}
	out, err := run("", "nsenter", append([]string{"-t", strconv.Itoa(f.procs[0].PID), "-n", "--"}, args...)...)
	if err != nil {
		return fmt.Errorf("%v: %s", err, out)
	}
	return nil
}
