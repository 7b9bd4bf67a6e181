package docker

import (
	"fmt"
	"net/netip"
	"strings"
	"sync"

	"github.com/docker/docker/api/types/network"
)

// maxNetworkAttempts bounds the retries when other processes keep taking
// the block just chosen.
const maxNetworkAttempts = 8

// subnetClaims are the blocks this driver has chosen for networks it is
// creating or has created. Choosing a block is serialized; the
// NetworkCreate calls that follow are not, so that ten agents' networks
// are made at once. A block stays claimed after its network exists (one
// apply makes few networks and a pool holds thousands of blocks): a
// NetworkList taken before that create finished would not show it.
// Another process, or another runtime on the same engine, can still take
// a block between list and create; createNetwork retries on the engine's
// overlap error.
type subnetClaims struct {
	mu   sync.Mutex
	held []netip.Prefix
}

// claim returns the first block of the given prefix length in pool that
// overlaps neither the engine's networks (nets), nor the blocks the engine
// refused, nor one already claimed, and claims it. setting names the
// attribute that sets pool, for the error when it is full.
func (c *subnetClaims) claim(pool netip.Prefix, bits int, nets []network.Summary, refused []netip.Prefix, setting string) (netip.Prefix, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	used := append(append(usedSubnets(nets), refused...), c.held...)
	p, err := allocateBlock(pool, used, bits)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%w; remove unused networks or set a larger %s", err, setting)
	}
	c.held = append(c.held, p)
	return p, nil
}

// release gives back a block whose network was not created.
func (c *subnetClaims) release(p netip.Prefix) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, h := range c.held {
		if h == p {
			c.held = append(c.held[:i], c.held[i+1:]...)
			return
		}
	}
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

// allocateBlock returns the first block of the given prefix length in pool
// that overlaps nothing in used.
func allocateBlock(pool netip.Prefix, used []netip.Prefix, bits int) (netip.Prefix, error) {
	pool = pool.Masked()
	if !pool.Addr().Is4() || pool.Bits() > bits {
		return netip.Prefix{}, fmt.Errorf("subnet pool %s cannot hold a /%d", pool, bits)
	}
	var inPool []netip.Prefix
	for _, u := range used {
		if u.Overlaps(pool) {
			inPool = append(inPool, u)
		}
	}
	base := pool.Addr().As4()
	start := uint32(base[0])<<24 | uint32(base[1])<<16 | uint32(base[2])<<8 | uint32(base[3])
	blocks := uint64(1) << (bits - pool.Bits())
	step := uint64(1) << (32 - bits)
next:
	for i := uint64(0); i < blocks; i++ {
		a := start + uint32(i*step)
		cand := netip.PrefixFrom(netip.AddrFrom4([4]byte{byte(a >> 24), byte(a >> 16), byte(a >> 8), byte(a)}), bits)
		for _, u := range inPool {
			if u.Overlaps(cand) {
				continue next
			}
		}
		return cand, nil
	}
	return netip.Prefix{}, fmt.Errorf("subnet pool %s is exhausted: all %d /%d blocks overlap existing networks", pool, blocks, bits)
}

// isOverlap reports the engine refusing a subnet another network holds.
func isOverlap(err error) bool {
	return strings.Contains(strings.ToLower(err.Error()), "overlap")
}
