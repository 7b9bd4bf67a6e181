package docker

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/engine"
)

// inhibitIPv4 gives the bridge no host address, so that a container on the
// network cannot reach the docker host's own services through it (an
// internal network alone does not prevent that).
const inhibitIPv4 = "com.docker.network.bridge.inhibit_ipv4"

func (d *Driver) createNetwork(ctx context.Context, api dockerAPI, pool netip.Prefix, req drivers.ApplyRequest) (drivers.ApplyResponse, error) {
	addr := req.Object.Addr
	name, err := engine.ObjectName(req.Lineage, req.NamedAddr(addr), kindNetwork)
	if err != nil {
		return drivers.ApplyResponse{}, fmt.Errorf("creating network for %s: %w", addr, err)
	}
	fail := func(format string, args ...any) (drivers.ApplyResponse, error) {
		return drivers.ApplyResponse{}, fmt.Errorf("creating network %s for %s: %s", name, addr, fmt.Sprintf(format, args...))
	}

	var refused []netip.Prefix // blocks the engine said overlap, though our list did not show it
	for attempt := 1; attempt <= maxNetworkAttempts; attempt++ {
		nets, subnet, err := claims.claim(ctx, api, name, pool, subnetBits, refused, "subnet_pool", attempt == 1)
		if err != nil {
			return fail("%v", err)
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
		resp, err := api.NetworkCreate(ctx, name, network.CreateOptions{
			Driver:   "bridge",
			Internal: true,
			IPAM: &network.IPAM{
				Driver: "default",
				Config: []network.IPAMConfig{{Subnet: subnet.String()}},
			},
			Options: map[string]string{inhibitIPv4: "true"},
			Labels:  req.Labels(),
		})
		claims.release(api, subnet, err == nil)
		if err != nil {
			if isOverlap(err) {
				d.log.Debug("subnet taken meanwhile; trying the next one", "addr", addr, "subnet", subnet.String(), "attempt", attempt)
				refused = append(refused, subnet)
				continue
			}
			if nameInUse(err) || strings.Contains(err.Error(), "already exists") {
				// The create of an apply killed a moment ago landed after
				// the list: the next round finds it, and adopts or
				// replaces it when it is ours.
				d.log.Debug("a network of this name appeared meanwhile; looking again", "addr", addr, "name", name, "attempt", attempt)
				continue
			}
			return fail("subnet %s: %v", subnet, err)
		}
		d.log.Info("created network", "addr", addr, "name", name, "id", shortID(resp.ID), "subnet", subnet.String())
		d.removeTwins(ctx, api, name, resp.ID, req.Lineage)
		return drivers.ApplyResponse{
			ID:       resp.ID,
			Computed: map[string]string{"subnet": subnet.String(), "name": name},
		}, nil
	}
	return fail("gave up after %d attempts: other processes kept taking the free subnets of %s", maxNetworkAttempts, pool)
}

// removeTwins removes the other networks of the lineage named name. The
// engine's duplicate-name check is not atomic: the create of an apply
// killed a moment ago can land beside this one, and every container start
// on the name then fails "ambiguous". Nothing of ours runs on the twin (its
// containers would have been made after it, by the killed apply), so it
// goes; a failure is only logged, as the next plan sees what is left.
func (d *Driver) removeTwins(ctx context.Context, api dockerAPI, name, keep, lineage string) {
	nets, err := api.NetworkList(ctx, network.ListOptions{})
	if err != nil {
		d.log.Debug("listing networks named like a new one", "name", name, "error", err)
		return
	}
	for _, n := range nets {
		if n.Name != name || n.ID == keep || n.Labels[drivers.LabelLineage] != lineage {
			continue
		}
		if err := api.NetworkRemove(ctx, n.ID); err != nil && !cerrdefs.IsNotFound(err) {
			d.log.Warn("could not remove a second network of the same name", "name", name, "id", shortID(n.ID), "error", err)
			continue
		}
		d.log.Info("removed a second network of the same name, left by a cut-off create", "name", name, "id", shortID(n.ID))
	}
}

func (d *Driver) deleteNetwork(ctx context.Context, api dockerAPI, req drivers.ApplyRequest) (drivers.ApplyResponse, error) {
	addr := req.Object.Addr
	id := req.ID
	if id == "" {
		name, err := engine.ObjectName(req.Lineage, req.NamedAddr(addr), kindNetwork)
		if err != nil {
			return drivers.ApplyResponse{}, fmt.Errorf("deleting network of %s: %w", addr, err)
		}
		id = name
	}
	if err := removeNetwork(ctx, api, id, endpointWait); err != nil {
		if cerrdefs.IsNotFound(err) {
			d.log.Debug("network already gone", "addr", addr, "id", shortID(id))
			return drivers.ApplyResponse{}, nil
		}
		return drivers.ApplyResponse{}, fmt.Errorf("deleting network %s of %s: %w", shortID(id), addr, err)
	}
	d.log.Info("deleted network", "addr", addr, "id", shortID(id))
	return drivers.ApplyResponse{}, nil
}

// endpointWait is how long deleting a bottle's network waits for the
// engine to let go of the endpoints of containers removed just before.
const endpointWait = 5 * time.Second

// removeNetwork removes a network, trying again for up to wait while the
// engine still counts endpoints on it: a container removed a moment ago
// can hold its endpoint a little longer, most under load. An endpoint that
// outlives every container is dockerd's (20.10 keeps one after some
// forced removals under load, seen after removing 100 gateways at once):
// the error then says so and how to clear it, since no retry will.
func removeNetwork(ctx context.Context, api dockerAPI, id string, wait time.Duration) error {
	deadline := time.Now().Add(wait)
	for {
		err := api.NetworkRemove(ctx, id)
		if err == nil || !strings.Contains(err.Error(), "active endpoints") {
			return err
		}
		if !time.Now().Before(deadline) {
			attached, lerr := api.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("network", id))})
			if lerr == nil && len(attached) == 0 {
				return fmt.Errorf("the engine still counts an endpoint on it though no container is attached (a stale endpoint of dockerd's; restarting dockerd clears it, then run this again): %w", err)
			}
			return err
		}
		select {
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
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

// shortID shortens engine ids for messages; names pass through.
func shortID(id string) string {
	id = strings.TrimPrefix(id, "sha256:")
	if len(id) == 64 {
		return id[:12]
	}
	return id
}
