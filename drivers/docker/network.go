package docker

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"sync"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/network"

	"github.com/bottlefile/bottlefile/drivers"
)

// subnetMu serializes subnet allocation and network creation within this
// process, across drivers (two runtimes may share one engine). Another
// process can still race; createNetwork retries on the engine's overlap
// error.
var subnetMu sync.Mutex

// maxNetworkAttempts bounds the retries when other processes keep taking
// the block just chosen.
const maxNetworkAttempts = 8

// inhibitIPv4 gives the bridge no host address, so that a container on the
// network cannot reach the docker host's own services through it (an
// internal network alone does not prevent that).
const inhibitIPv4 = "com.docker.network.bridge.inhibit_ipv4"

func (d *Driver) createNetwork(ctx context.Context, api dockerAPI, pool netip.Prefix, req drivers.ApplyRequest) (drivers.ApplyResponse, error) {
	addr := req.Object.Addr
	name, err := objectName(req.Lineage, addr, kindNetwork)
	if err != nil {
		return drivers.ApplyResponse{}, fmt.Errorf("creating network for %s: %w", addr, err)
	}
	fail := func(format string, args ...any) (drivers.ApplyResponse, error) {
		return drivers.ApplyResponse{}, fmt.Errorf("creating network %s for %s: %s", name, addr, fmt.Sprintf(format, args...))
	}

	subnetMu.Lock()
	defer subnetMu.Unlock()

	var refused []netip.Prefix // blocks the engine said overlap, though our list did not show it
	for attempt := 1; attempt <= maxNetworkAttempts; attempt++ {
		nets, err := api.NetworkList(ctx, network.ListOptions{})
		if err != nil {
			return fail("listing networks: %v", err)
		}
		if old, ok := findNetwork(nets, name); ok {
			// A crash between create and record leaves our own network
			// behind, maybe with our unrecorded container on it. One made
			// for this address as we make them is adopted; another of ours
			// is made again. Anyone else's is theirs.
			if old.Labels[drivers.LabelLineage] != req.Lineage {
				return fail("a network with this name already exists and does not belong to this state (lineage %s); remove or rename it", req.Lineage)
			}
			if subnet, ok := adoptable(old, addr, pool); ok {
				d.log.Info("adopting unrecorded network of this lineage", "addr", addr, "name", name, "id", shortID(old.ID), "subnet", subnet.String())
				return drivers.ApplyResponse{
					ID:       old.ID,
					Computed: map[string]string{"subnet": subnet.String(), "name": name},
				}, nil
			}
			d.log.Info("removing unrecorded network of this lineage before creating it again", "addr", addr, "name", name, "id", old.ID)
			if err := api.NetworkRemove(ctx, old.ID); err != nil && !cerrdefs.IsNotFound(err) {
				return fail("removing the unrecorded network %s left by an earlier run: %v", shortID(old.ID), err)
			}
			continue
		}
		used := append(usedSubnets(nets), refused...)
		subnet, err := allocateSubnet(pool, used)
		if err != nil {
			return fail("%v", err)
		}
		resp, err := api.NetworkCreate(ctx, name, network.CreateOptions{
			Driver:   "bridge",
			Internal: true,
			IPAM: &network.IPAM{
				Driver: "default",
				Config: []network.IPAMConfig{{Subnet: subnet.String()}},
			},
			Options: map[string]string{inhibitIPv4: "true"},
			Labels:  ownLabels(req),
		})
		if err != nil {
			if isOverlap(err) {
				d.log.Debug("subnet taken meanwhile; trying the next one", "addr", addr, "subnet", subnet.String(), "attempt", attempt)
				refused = append(refused, subnet)
				continue
			}
			return fail("subnet %s: %v", subnet, err)
		}
		d.log.Info("created network", "addr", addr, "name", name, "id", shortID(resp.ID), "subnet", subnet.String())
		return drivers.ApplyResponse{
			ID:       resp.ID,
			Computed: map[string]string{"subnet": subnet.String(), "name": name},
		}, nil
	}
	return fail("gave up after %d attempts: other processes kept taking the free subnets of %s", maxNetworkAttempts, pool)
}

func (d *Driver) deleteNetwork(ctx context.Context, api dockerAPI, req drivers.ApplyRequest) (drivers.ApplyResponse, error) {
	addr := req.Object.Addr
	id := req.ID
	if id == "" {
		name, err := objectName(req.Lineage, addr, kindNetwork)
		if err != nil {
			return drivers.ApplyResponse{}, fmt.Errorf("deleting network of %s: %w", addr, err)
		}
		id = name
	}
	if err := api.NetworkRemove(ctx, id); err != nil {
		if cerrdefs.IsNotFound(err) {
			d.log.Debug("network already gone", "addr", addr, "id", shortID(id))
			return drivers.ApplyResponse{}, nil
		}
		return drivers.ApplyResponse{}, fmt.Errorf("deleting network %s of %s: %w", shortID(id), addr, err)
	}
	d.log.Info("deleted network", "addr", addr, "id", shortID(id))
	return drivers.ApplyResponse{}, nil
}

// adoptable reports whether an existing network of our lineage is what
// createNetwork would make for addr, and returns its subnet.
func adoptable(n network.Summary, addr string, pool netip.Prefix) (netip.Prefix, bool) {
	if n.Labels[drivers.LabelAddress] != addr || !n.Internal || n.Driver != "bridge" || n.Options[inhibitIPv4] != "true" || len(n.IPAM.Config) != 1 {
		return netip.Prefix{}, false
	}
	subnet, err := netip.ParsePrefix(n.IPAM.Config[0].Subnet)
	if err != nil || subnet.Bits() != subnetBits || !pool.Contains(subnet.Addr()) {
		return netip.Prefix{}, false
	}
	return subnet, true
}

func findNetwork(nets []network.Summary, name string) (network.Summary, bool) {
	for _, n := range nets {
		if n.Name == name {
			return n, true
		}
	}
	return network.Summary{}, false
}

// usedSubnets lists the IPv4 subnets of every network on the engine.
func usedSubnets(nets []network.Summary) []netip.Prefix {
	var used []netip.Prefix
	for _, n := range nets {
		for _, c := range n.IPAM.Config {
			if p, err := netip.ParsePrefix(c.Subnet); err == nil && p.Addr().Is4() {
				used = append(used, p.Masked())
			}
		}
	}
	return used
}

// allocateSubnet returns the first /28 of pool that overlaps nothing in used.
func allocateSubnet(pool netip.Prefix, used []netip.Prefix) (netip.Prefix, error) {
	pool = pool.Masked()
	if !pool.Addr().Is4() || pool.Bits() > subnetBits {
		return netip.Prefix{}, fmt.Errorf("subnet pool %s cannot hold a /%d", pool, subnetBits)
	}
	var inPool []netip.Prefix
	for _, u := range used {
		if u.Overlaps(pool) {
			inPool = append(inPool, u)
		}
	}
	base := pool.Addr().As4()
	start := uint32(base[0])<<24 | uint32(base[1])<<16 | uint32(base[2])<<8 | uint32(base[3])
	blocks := uint64(1) << (subnetBits - pool.Bits())
	step := uint32(1) << (32 - subnetBits)
next:
	for i := uint64(0); i < blocks; i++ {
		a := start + uint32(i)*step
		cand := netip.PrefixFrom(netip.AddrFrom4([4]byte{byte(a >> 24), byte(a >> 16), byte(a >> 8), byte(a)}), subnetBits)
		for _, u := range inPool {
			if u.Overlaps(cand) {
				continue next
			}
		}
		return cand, nil
	}
	return netip.Prefix{}, fmt.Errorf("subnet pool %s is exhausted: all %d /%d blocks overlap existing networks; remove unused networks or set a larger subnet_pool", pool, blocks, subnetBits)
}

// isOverlap reports the engine refusing a subnet another network holds.
func isOverlap(err error) bool {
	return strings.Contains(strings.ToLower(err.Error()), "overlap")
}

// shortID shortens engine ids for messages; names pass through.
func shortID(id string) string {
	id = strings.TrimPrefix(id, "sha256:")
	if len(id) == 64 {
		return id[:12]
	}
	return id
}
