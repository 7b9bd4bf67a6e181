package docker

import (
	"context"
	"net/netip"
	"slices"
	"testing"

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
