package docker

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/hashicorp/go-hclog"
)

// A gateway this process is starting gets the new forbid file but no
// SIGHUP: a Go program signalled before it asks for SIGHUP dies (exit 2,
// nothing logged), which is how a gateway of a 20-bottle apply failed
// while another bottle's create pushed its new network to the others.
func TestPushForbidSparesStartingGateways(t *testing.T) {
	for _, tc := range []struct {
		name     string
		starting bool
		want     []string
	}{
		{name: "ready", starting: false, want: []string{"ContainerList", "CopyToContainer", "ContainerKill"}},
		{name: "starting", starting: true, want: []string{"ContainerList", "CopyToContainer"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := "gw-" + tc.name
			var copied, hupped []string
			api := &fakeAPI{
				ContainerListFn: func(container.ListOptions) ([]container.Summary, error) {
					return []container.Summary{{ID: id, State: container.StateRunning}}, nil
				},
				CopyToContainerFn: func(id, path string) error { copied = append(copied, id); return nil },
				ContainerKillFn:   func(id, signal string) error { hupped = append(hupped, id+" "+signal); return nil },
			}
			gatewayStarting(id, tc.starting)
			t.Cleanup(func() { gatewayStarting(id, false) })
			d := &Driver{log: hclog.NewNullLogger()}
			d.pushForbid(context.Background(), api, "lin", []netip.Prefix{netip.MustParsePrefix("10.1.0.0/16")})
			if got := api.calls(); !slices.Equal(got, tc.want) {
				t.Fatalf("calls = %v, want %v", got, tc.want)
			}
			if len(copied) != 1 || copied[0] != id {
				t.Errorf("forbid file copied to %v, want [%s]", copied, id)
			}
			if tc.starting && len(hupped) > 0 {
				t.Errorf("a starting gateway was signalled: %v", hupped)
			}
			if !tc.starting && (len(hupped) != 1 || hupped[0] != id+" HUP") {
				t.Errorf("signals = %v, want [%s HUP]", hupped, id)
			}
		})
	}
}

// The running gateways are written at the same time (issue 28): one after
// another they held up the last gateway of an apply for 0.3 s each. Every
// gateway still gets the file and one SIGHUP.
func TestPushForbidWritesGatewaysTogether(t *testing.T) {
	const n = 3
	var mu sync.Mutex
	inFlight, most := 0, 0
	all := make(chan struct{})
	var hupped []string
	api := &fakeAPI{
		ContainerListFn: func(container.ListOptions) ([]container.Summary, error) {
			var out []container.Summary
			for i := range n {
				out = append(out, container.Summary{ID: fmt.Sprintf("gw-together-%d", i), State: container.StateRunning})
			}
			return out, nil
		},
		CopyToContainerFn: func(id, path string) error {
			mu.Lock()
			inFlight++
			most = max(most, inFlight)
			if most == n {
				close(all)
			}
			mu.Unlock()
			// Each copy waits for the others to be in flight (or gives up
			// after a while, so a serial push fails rather than hangs).
			select {
			case <-all:
			case <-time.After(5 * time.Second):
			}
			mu.Lock()
			inFlight--
			mu.Unlock()
			return nil
		},
		ContainerKillFn: func(id, signal string) error {
			mu.Lock()
			hupped = append(hupped, id+" "+signal)
			mu.Unlock()
			return nil
		},
	}
	d := &Driver{log: hclog.NewNullLogger()}
	d.pushForbid(context.Background(), api, "lin", []netip.Prefix{netip.MustParsePrefix("10.2.0.0/16")})
	if most != n {
		t.Errorf("at most %d of %d gateways written at once, want all", most, n)
	}
	slices.Sort(hupped)
	if want := []string{"gw-together-0 HUP", "gw-together-1 HUP", "gw-together-2 HUP"}; !slices.Equal(hupped, want) {
		t.Errorf("signals = %v, want %v", hupped, want)
	}
}

// A gateway being created is recorded as holding its forbid list as soon
// as its files are written, before its start: another gateway's push of
// the same list skips it (it was an archive write per starting gateway,
// 0.3-3 s of engine time each on fuse-overlayfs, issue 28); a different
// list still reaches it, without a SIGHUP while it starts.
func TestPushForbidSkipsGatewayHoldingTheList(t *testing.T) {
	const id = "gw-holding"
	list := []netip.Prefix{netip.MustParsePrefix("10.3.0.0/16")}
	var copied, hupped []string
	api := &fakeAPI{
		ContainerListFn: func(container.ListOptions) ([]container.Summary, error) {
			return []container.Summary{{ID: id, State: container.StateRunning}}, nil
		},
		CopyToContainerFn: func(id, path string) error { copied = append(copied, id); return nil },
		ContainerKillFn:   func(id, signal string) error { hupped = append(hupped, id); return nil },
	}
	forbidSent(id, list)
	gatewayStarting(id, true)
	t.Cleanup(func() { gatewayStarting(id, false) })
	d := &Driver{log: hclog.NewNullLogger()}
	d.pushForbid(context.Background(), api, "lin", list)
	if len(copied) != 0 || len(hupped) != 0 {
		t.Errorf("the same list: copied to %v, signalled %v, want neither", copied, hupped)
	}
	d.pushForbid(context.Background(), api, "lin", append(list, netip.MustParsePrefix("10.4.0.0/24")))
	if len(copied) != 1 || len(hupped) != 0 {
		t.Errorf("a longer list: copied to %v, signalled %v, want one copy and no signal", copied, hupped)
	}
}
