package swarm

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"

	"github.com/bottlefile/bottlefile/drivers"
)

// networkGone bounds how long a network delete waits for the tasks of
// removed services to leave it.
const networkGone = time.Minute

// createNetwork makes a bottle's internal overlay, or the runtime's egress
// overlay. One of this lineage made for this address (by an apply cut off
// before recording it) is adopted; anyone else's of the name is refused.
func (d *Driver) createNetwork(ctx context.Context, api swarmAPI, req drivers.ApplyRequest) (drivers.ApplyResponse, error) {
	addr := req.Object.Addr
	name, err := networkName(req.Lineage, req.NamedAddr(addr))
	if err != nil {
		return drivers.ApplyResponse{}, fmt.Errorf("creating network for %s: %w", addr, err)
	}
	fail := func(format string, args ...any) (drivers.ApplyResponse, error) {
		return drivers.ApplyResponse{}, fmt.Errorf("creating network %s for %s: %s", name, addr, fmt.Sprintf(format, args...))
	}
	internal := !isEgressNetworkAddr(addr)
	existing, err := api.NetworkList(ctx, network.ListOptions{Filters: filters.NewArgs(filters.Arg("name", name))})
	if err != nil {
		return fail("listing networks: %v", err)
	}
	for _, n := range existing {
		if n.Name != name || n.Scope != "swarm" {
			continue
		}
		if n.Labels[drivers.LabelLineage] != req.Lineage || n.Labels[drivers.LabelAddress] != addr || n.Internal != internal {
			return fail("an overlay network with this name already exists and is not this state's %s (lineage %s); remove or rename it", addr, req.Lineage)
		}
		d.log.Info("adopting unrecorded network of this lineage", "addr", addr, "name", name, "id", shortID(n.ID))
		return d.networkResponse(ctx, api, n.ID, name)
	}
	resp, err := api.NetworkCreate(ctx, name, network.CreateOptions{
		Driver:   "overlay",
		Scope:    "swarm",
		Internal: internal,
		Labels:   req.Labels(),
	})
	if err != nil {
		return fail("%v", err)
	}
	d.log.Info("created network", "addr", addr, "name", name, "id", shortID(resp.ID), "internal", internal)
	return d.networkResponse(ctx, api, resp.ID, name)
}

// networkResponse inspects a network for its subnet.
func (d *Driver) networkResponse(ctx context.Context, api swarmAPI, id, name string) (drivers.ApplyResponse, error) {
	info, err := api.NetworkInspect(ctx, id, network.InspectOptions{})
	if err != nil {
		return drivers.ApplyResponse{}, fmt.Errorf("inspecting network %s: %w", name, err)
	}
	subnet := ""
	for _, c := range info.IPAM.Config {
		subnet = c.Subnet
	}
	return drivers.ApplyResponse{ID: id, Computed: map[string]string{"name": name, "subnet": subnet}}, nil
}

// deleteNetwork removes an overlay. The tasks of services just removed
// leave it over a few seconds: it waits for them.
func (d *Driver) deleteNetwork(ctx context.Context, api swarmAPI, req drivers.ApplyRequest) (drivers.ApplyResponse, error) {
	addr := req.Object.Addr
	id := req.ID
	if id == "" {
		name, err := networkName(req.Lineage, req.NamedAddr(addr))
		if err != nil {
			return drivers.ApplyResponse{}, fmt.Errorf("deleting network of %s: %w", addr, err)
		}
		list, err := api.NetworkList(ctx, network.ListOptions{Filters: byLineage(req.Lineage)})
		if err != nil {
			return drivers.ApplyResponse{}, fmt.Errorf("deleting network %s of %s: %w", name, addr, err)
		}
		for _, n := range list {
			if n.Name == name && n.Scope == "swarm" && n.Labels[drivers.LabelAddress] == addr {
				id = n.ID
			}
		}
		if id == "" {
			return drivers.ApplyResponse{}, nil
		}
	}
	deadline := time.Now().Add(networkGone)
	for {
		err := api.NetworkRemove(ctx, id)
		switch {
		case err == nil:
			d.log.Info("deleted network", "addr", addr, "id", shortID(id))
			return drivers.ApplyResponse{}, waitNetworkGone(ctx, api, id, deadline)
		case notFound(err):
			return drivers.ApplyResponse{}, waitNetworkGone(ctx, api, id, deadline)
		case !inUse(err) || time.Now().After(deadline):
			return drivers.ApplyResponse{}, fmt.Errorf("deleting network %s of %s: %w", shortID(id), addr, err)
		}
		select {
		case <-ctx.Done():
			return drivers.ApplyResponse{}, fmt.Errorf("deleting network %s of %s: %w", shortID(id), addr, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// waitNetworkGone waits until the manager lists the network no more: its
// own copy of a removed overlay goes a moment after the cluster's.
func waitNetworkGone(ctx context.Context, api swarmAPI, id string, deadline time.Time) error {
	for {
		list, err := api.NetworkList(ctx, network.ListOptions{Filters: filters.NewArgs(filters.Arg("id", id))})
		if err != nil {
			return err
		}
		if !slices.ContainsFunc(list, func(n network.Summary) bool { return n.ID == id }) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("network %s was removed, but the manager still lists it", shortID(id))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// notFound reports an error that says the object does not exist (the
// engine does not always answer 404 for a network).
func notFound(err error) bool {
	return cerrdefs.IsNotFound(err) || strings.HasSuffix(strings.TrimSpace(err.Error()), "not found")
}

// inUse reports the refusal to remove something tasks still use.
func inUse(err error) bool {
	msg := err.Error()
	return cerrdefs.IsConflict(err) || strings.Contains(msg, "in use") || strings.Contains(msg, "active endpoints")
}
