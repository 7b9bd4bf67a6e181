package docker

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"sync"

	"github.com/docker/docker/api/types/network"

	"github.com/bottlefile/bottlefile/drivers/gateway"
	"github.com/bottlefile/bottlefile/egress"
)

// engineChecks caches, per configured driver, the read-only engine facts
// Plan asks (the isolation check, whether writes can be measured) and the
// gateway binary's hash, so that a plan of many agents asks the engine
// once and hashes the binary once.
type engineChecks struct {
	mu sync.Mutex

	isolationDone bool
	isolationErr  error

	binaryDone bool
	binary     gateway.Binary
	binaryErr  error

	// sizesDone, sizesOK and sizesWhy: whether the engine's storage sizes
	// a container's layer cheaply (sizes.go).
	sizesDone bool
	sizesOK   bool
	sizesWhy  string

	// engineID is the engine's ID from its info (EngineID), once known.
	engineID string
}

// checksFor returns the driver's cache; a driver never configured gets a
// throwaway one.
func (d *Driver) checksFor() *engineChecks {
	d.mu.RLock()
	defer d.mu.RUnlock()
	if d.checks == nil {
		return &engineChecks{}
	}
	return d.checks
}

// Docker's bridge driver options the isolation check reads.
const (
	optDefaultBridge = "com.docker.network.bridge.default_bridge"
	optIPMasquerade  = "com.docker.network.bridge.enable_ip_masquerade"
)

// checkIsolation refuses an engine on which a bottle's isolation cannot
// hold. It makes one read-only call (a network list) per driver instance.
//
// An internal network isolates only through the iptables rules dockerd
// writes; with dockerd --iptables=false it isolates nothing. The engine's
// info does not say whether iptables is on (API 1.41 has no field for it,
// and newer engines report a firewall backend either way), but dockerd
// forces IP masquerading off when iptables is off, and shows it on its
// default bridge network: com.docker.network.bridge.enable_ip_masquerade
// is "false" there exactly when dockerd runs with --iptables=false (or
// --ip-masq=false, which leaves isolation in place but is refused too: the
// two cannot be told apart). An engine without a default bridge
// (dockerd --bridge=none) gives no way to tell, and is refused as well.
//
// A runtime block with insecure_skip_isolation_check = true skips the
// check: bottles there are planned and made as anywhere else, but nothing
// but the gateway's own refusals holds (a throwaway test engine).
func (d *Driver) checkIsolation(ctx context.Context, api dockerAPI) error {
	if ec, _ := d.egressConf(); ec.skipIsolationCheck {
		return nil
	}
	c := d.checksFor()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.isolationDone {
		return c.isolationErr
	}
	nets, err := api.NetworkList(ctx, network.ListOptions{})
	if err != nil {
		return fmt.Errorf("checking that the engine can isolate bottles: listing networks: %w", err)
	}
	ec, rt := d.egressConf()
	c.isolationDone = true
	c.isolationErr = isolationVerdict(nets, rt, ec.network)
	return c.isolationErr
}

// isolationVerdict judges the engine's networks; see checkIsolation.
func isolationVerdict(nets []network.Summary, runtime, egressNetwork string) error {
	var bridge *network.Summary
	for i := range nets {
		n := &nets[i]
		if n.Options[optDefaultBridge] == "true" || (n.Name == "bridge" && n.Driver == "bridge") {
			bridge = n
			break
		}
	}
	switch {
	case bridge == nil:
		return fmt.Errorf("bottlefile cannot promise egress isolation on runtime %q: the engine has no default bridge network (is dockerd running with --bridge=none?), so there is no way to tell whether it manages iptables, which isolating a bottle depends on; run dockerd with its default bridge and iptables enabled", runtime)
	case bridge.Options[optIPMasquerade] == "false":
		return fmt.Errorf("bottlefile cannot promise egress isolation on runtime %q: the engine does not manage iptables (its default bridge has IP masquerading off, which dockerd forces when started with --iptables=false, or --ip-masq=false). Without Docker's iptables rules an internal network isolates nothing and an agent could reach any address directly; run dockerd with iptables (and ip-masq) enabled, the default", runtime)
	}
	if egressNetwork != "" {
		n, ok := findNetwork(nets, egressNetwork)
		if !ok {
			return fmt.Errorf("runtime %q: egress_network %q does not exist on the engine; create it (docker network create %s) or remove egress_network to let bottlefile manage one", runtime, egressNetwork, egressNetwork)
		}
		if n.Internal {
			return fmt.Errorf("runtime %q: egress_network %q is an internal network: the gateways could reach nothing outside through it", runtime, egressNetwork)
		}
	}
	return nil
}

// gatewayBinary is the bottlefile binary the gateways run (gateway_binary,
// else the running executable) and its SHA-256, read once per driver
// instance. It only reads the file.
func (d *Driver) gatewayBinary() (gateway.Binary, error) {
	c := d.checksFor()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.binaryDone {
		return c.binary, c.binaryErr
	}
	c.binaryDone = true
	c.binary, c.binaryErr = gateway.ReadBinary(d.egressBinarySetting())
	return c.binary, c.binaryErr
}

func (d *Driver) egressBinarySetting() string {
	ec, _ := d.egressConf()
	return ec.binary
}

// forbidden lists what a gateway must never connect to besides the
// built-in prefixes of the egress package (loopback, link-local, ...) and
// its own addresses and default gateway, which it finds itself:
//
//   - the subnet pool every bottle network comes from (other bottles);
//   - a managed egress network's whole subnet (other gateways);
//   - the gateway address of every network on the engine (the docker
//     host's bridge addresses, docker0's among them), and the first
//     address of a subnet that names no gateway;
//   - when the engine runs on this machine (a unix socket), every address
//     of this machine's interfaces. That is not all of the engine host's
//     own addresses when the engine lives in a VM or another network
//     namespace: gatewayForbid adds those the engine shows
//     (engineHostOwnAddrs).
func forbidden(nets []network.Summary, pool netip.Prefix, managedEgress netip.Prefix, local bool) []netip.Prefix {
	var out []netip.Prefix
	add := func(p netip.Prefix) {
		if p.IsValid() {
			out = append(out, p.Masked())
		}
	}
	add(pool)
	add(managedEgress)
	for _, n := range nets {
		for _, c := range n.IPAM.Config {
			if a, err := netip.ParseAddr(c.Gateway); err == nil {
				add(netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
				continue
			}
			if s, err := netip.ParsePrefix(c.Subnet); err == nil {
				first := s.Masked().Addr().Next()
				add(netip.PrefixFrom(first, first.BitLen()))
			}
		}
	}
	if local {
		if addrs, err := net.InterfaceAddrs(); err == nil {
			for _, a := range addrs {
				ipn, ok := a.(*net.IPNet)
				if !ok {
					continue
				}
				ip, ok := netip.AddrFromSlice(ipn.IP)
				if !ok {
					continue
				}
				ip = ip.Unmap()
				if ip.IsLoopback() || ip.IsLinkLocalUnicast() {
					continue // refused by the gateway whatever the rules say
				}
				add(netip.PrefixFrom(ip, ip.BitLen()))
			}
		}
	}
	return egress.CompactPrefixes(out)
}

// engineHostAddrs are the addresses of a remote engine's host, from the
// name in its address (tcp://host:2376, ssh://user@host): the gateway must
// not reach that host's own services either. A name that does not resolve
// gives none (logged).
func (d *Driver) engineHostAddrs(ctx context.Context) []netip.Addr {
	d.mu.RLock()
	ep := d.ep
	d.mu.RUnlock()
	addrs, err := ep.HostAddrs(ctx)
	if err != nil {
		d.log.Warn("cannot resolve the engine host to forbid its addresses to gateways", "engine", ep.Address(), "error", err)
	}
	return addrs
}

// engineIsLocal reports whether the runtime's engine runs on this machine:
// a unix socket, or a tcp:// or ssh:// address on loopback, named by the
// runtime block or by DOCKER_HOST, or the default socket.
func (d *Driver) engineIsLocal() bool {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return d.ep.Local()
}
