package docker

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/docker/docker/api/types/network"
)

// maxNetworkAttempts bounds the retries when other processes keep taking
// the block just chosen.
const maxNetworkAttempts = 8

// claims are the blocks this process is creating networks in, across
// drivers (two runtimes may share one engine).
var claims subnetClaims

// subnetClaims let networks be created at once. Listing the engine's
// networks and choosing a free block are serialized; the NetworkCreate
// that follows is not. A block stays claimed until its create has
// returned, so a list taken under the lock shows every network this
// process has made and the claims name every one it is making. Another
// process can still take a block between list and create; the creates
// retry on the engine's overlap error.
type subnetClaims struct {
	mu   sync.Mutex
	held []netip.Prefix
	// seen is each engine's last list, for the claims that may reuse it:
	// the bottle networks of one run share one list instead of each
	// listing under the lock, one after another (issue 28). Another
	// process's network made since shows as the engine's overlap error,
	// and the retry lists anew.
	seen map[dockerAPI]*seenNetworks
}

// seenNetworks is a list of an engine's networks, when it was taken, and
// the blocks this process made networks in since.
type seenNetworks struct {
	nets []network.Summary
	at   time.Time
	made []netip.Prefix
}

// seenFor is how long a list serves the claims that may reuse it.
const seenFor = time.Second

// claim lists the engine's networks (or, with reuse, takes a list of the
// last second) and, unless one is already named name, claims the first
// block of the given prefix length in pool that overlaps none of them, no
// block the engine refused, and no block claimed. It returns the list
// too; the block is invalid when name was found. setting names the
// attribute that sets pool, for the error when it is full.
func (c *subnetClaims) claim(ctx context.Context, api dockerAPI, name string, pool netip.Prefix, bits int, refused []netip.Prefix, setting string, reuse bool) ([]network.Summary, netip.Prefix, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	seen := c.seen[api]
	if !reuse || seen == nil || time.Since(seen.at) >= seenFor {
		nets, err := api.NetworkList(ctx, network.ListOptions{})
		if err != nil {
			return nil, netip.Prefix{}, fmt.Errorf("listing networks: %w", err)
		}
		if c.seen == nil {
			c.seen = map[dockerAPI]*seenNetworks{}
		}
		for a, s := range c.seen { // a long watch configures many clients
			if time.Since(s.at) >= seenFor {
				delete(c.seen, a)
			}
		}
		seen = &seenNetworks{nets: nets, at: time.Now()}
		c.seen[api] = seen
	}
	nets := seen.nets
	if _, ok := findNetwork(nets, name); ok {
		return nets, netip.Prefix{}, nil
	}
	used := append(append(append(usedSubnets(nets), refused...), c.held...), seen.made...)
	// The first free block, unless the engine already refused one: then
	// other processes are making networks too, and all of them would go for
	// the same next block. From a random block on, they rarely meet.
	var first uint64
	if len(refused) > 0 && pool.Bits() <= bits {
		first = rand.Uint64N(uint64(1) << (bits - pool.Bits()))
	}
	p, err := allocateBlockFrom(pool, used, bits, first)
	if err != nil {
		return nil, netip.Prefix{}, fmt.Errorf("%w; remove unused networks or set a larger %s", err, setting)
	}
	c.held = append(c.held, p)
	return nets, p, nil
}

// release gives back a block once its NetworkCreate on api has returned;
// made says the network was made in it, which later claims on a list
// taken before must know.
func (c *subnetClaims) release(api dockerAPI, p netip.Prefix, made bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if seen := c.seen[api]; made && seen != nil {
		seen.made = append(seen.made, p)
	}
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
	return allocateBlockFrom(pool, used, bits, 0)
}

// allocateBlockFrom is allocateBlock scanning from the first'th block of
// pool on, wrapping around.
func allocateBlockFrom(pool netip.Prefix, used []netip.Prefix, bits int, first uint64) (netip.Prefix, error) {
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
	for n := uint64(0); n < blocks; n++ {
		i := (first + n) % blocks
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
