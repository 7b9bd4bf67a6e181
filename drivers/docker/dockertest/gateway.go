package dockertest

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"
	"github.com/google/uuid"
)

// gatewayPackage is what GatewayBinary builds: the gateway alone, as
// make build puts it beside bottlefile.
const gatewayPackage = "github.com/bottlefile/bottlefile/cmd/bottlefile-gateway"

var gatewayBin struct {
	once sync.Once
	path string
	err  error
}

// GatewayBinary builds bottlefile-gateway statically (CGO_ENABLED=0, as
// make build does) once per test process and returns its path, for the
// drivers' gateway_binary: a test binary cannot serve as the gateway, and
// one built with -race is not static. Processes share one copy, replaced
// atomically, in the temporary directory.
func GatewayBinary(t testing.TB) string {
	t.Helper()
	gatewayBin.once.Do(func() {
		dir := filepath.Join(os.TempDir(), "bottlefile-dockertest-gateway")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			gatewayBin.err = err
			return
		}
		unlock, err := lockFile(filepath.Join(dir, "lock"))
		if err != nil {
			gatewayBin.err = err
			return
		}
		defer unlock()
		tmp := filepath.Join(dir, fmt.Sprintf("bottlefile-gateway.%d.tmp", os.Getpid()))
		cmd := exec.Command("go", "build", "-trimpath", "-o", tmp, gatewayPackage)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		out, err := cmd.CombinedOutput()
		if err != nil {
			os.Remove(tmp)
			gatewayBin.err = fmt.Errorf("building a static bottlefile-gateway: %v\n%s", err, out)
			return
		}
		path := filepath.Join(dir, "bottlefile-gateway")
		if err := os.Rename(tmp, path); err != nil {
			gatewayBin.err = err
			return
		}
		gatewayBin.path = path
	})
	if gatewayBin.err != nil {
		t.Fatal(gatewayBin.err)
	}
	return gatewayBin.path
}

// TestNetworkPool is where TestNetwork carves its /24s.
var TestNetworkPool = netip.MustParsePrefix("10.215.0.0/16")

// TestNetwork creates a plain (not internal) bridge network with an
// explicit /24 of TestNetworkPool, labelled TestLabel, for tests that need
// an outside world or an existing egress network. It is removed when the
// test ends, after whatever the test attached to it is gone: register it
// before Cleanup of a lineage whose containers join it.
func TestNetwork(t testing.TB, cli *client.Client, extraLabels map[string]string) (name string, subnet netip.Prefix) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	name = "bottlefile-test-" + strings.ReplaceAll(uuid.NewString(), "-", "")[:12]
	labels := map[string]string{TestLabel: "1"}
	for k, v := range extraLabels {
		labels[k] = v
	}
	var refused []netip.Prefix
	for attempt := 0; attempt < 10; attempt++ {
		nets, err := cli.NetworkList(ctx, network.ListOptions{})
		if err != nil {
			t.Fatalf("listing networks: %v", err)
		}
		cand, ok := freeBlock(TestNetworkPool, nets, refused)
		if !ok {
			t.Fatalf("no free /24 left in %s", TestNetworkPool)
		}
		resp, err := cli.NetworkCreate(ctx, name, network.CreateOptions{
			Driver: "bridge",
			IPAM:   &network.IPAM{Config: []network.IPAMConfig{{Subnet: cand.String()}}},
			Labels: labels,
		})
		if err != nil {
			if strings.Contains(strings.ToLower(err.Error()), "overlap") {
				refused = append(refused, cand)
				continue
			}
			t.Fatalf("creating test network %s: %v", name, err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			for {
				err := cli.NetworkRemove(ctx, resp.ID)
				if err == nil || cerrdefs.IsNotFound(err) {
					return
				}
				if ctx.Err() != nil {
					t.Errorf("removing test network %s: %v", name, err)
					return
				}
				time.Sleep(200 * time.Millisecond)
			}
		})
		return name, cand
	}
	t.Fatalf("could not create a test network: every block tried was taken")
	return "", netip.Prefix{}
}

func freeBlock(pool netip.Prefix, nets []network.Summary, refused []netip.Prefix) (netip.Prefix, bool) {
	var used []netip.Prefix
	for _, n := range nets {
		for _, c := range n.IPAM.Config {
			if p, err := netip.ParsePrefix(c.Subnet); err == nil {
				used = append(used, p.Masked())
			}
		}
	}
	used = append(used, refused...)
	base := pool.Addr().As4()
next:
	for i := 0; i < 1<<(24-pool.Bits()); i++ {
		cand := netip.PrefixFrom(netip.AddrFrom4([4]byte{base[0], base[1] + byte(i>>8), byte(i), 0}), 24)
		for _, u := range used {
			if u.Overlaps(cand) {
				continue next
			}
		}
		return cand, true
	}
	return netip.Prefix{}, false
}
