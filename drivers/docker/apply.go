package docker

import (
	"context"
	"fmt"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/gateway"
)

// Apply performs one operation on one object.
func (d *Driver) Apply(ctx context.Context, req drivers.ApplyRequest) (drivers.ApplyResponse, error) {
	resp, err := d.apply(ctx, req)
	return resp, d.Unreachable(err)
}

func (d *Driver) apply(ctx context.Context, req drivers.ApplyRequest) (drivers.ApplyResponse, error) {
	api, pool, err := d.engine(ctx)
	if err != nil {
		return drivers.ApplyResponse{}, err
	}
	if req.Lineage == "" {
		return drivers.ApplyResponse{}, fmt.Errorf("%s: %s needs a state lineage", req.Object.Addr, req.Op)
	}
	if req.Runtime == "" {
		// What it makes carries the runtime that made it, however asked.
		req.Runtime = d.runtimeName()
	}
	switch req.Object.Kind {
	case kindNetwork:
		if isEgressNetworkAddr(req.Object.Addr) {
			switch req.Op {
			case drivers.OpCreate:
				return d.createEgressNetwork(ctx, api, req)
			case drivers.OpDelete:
				return d.deleteEgressNetwork(ctx, api, req)
			}
			break
		}
		switch req.Op {
		case drivers.OpCreate:
			return d.createNetwork(ctx, api, pool, req)
		case drivers.OpDelete:
			return d.deleteNetwork(ctx, api, req)
		}
	case kindImage:
		switch req.Op {
		case drivers.OpCreate:
			return d.buildImage(ctx, api, req)
		case drivers.OpDelete:
			return d.deleteImage(ctx, api, req)
		}
	case kindContainer:
		switch req.Op {
		case drivers.OpCreate:
			return d.createContainer(ctx, api, req)
		case drivers.OpUpdate:
			return d.updateContainer(ctx, api, req)
		case drivers.OpStart:
			return d.startContainer(ctx, api, req)
		case drivers.OpDelete:
			resp, err := d.deleteContainer(ctx, api, req)
			if err == nil {
				// A snapshot deleted while this container ran from it was
				// only untagged: it can go now (snapshot.go).
				d.sweepSnapshots(ctx, api, req.Lineage)
			}
			return resp, err
		}
	case gateway.Kind:
		switch req.Op {
		case drivers.OpCreate:
			return d.createGateway(ctx, api, pool, req)
		case drivers.OpUpdate:
			return d.updateGateway(ctx, api, req)
		case drivers.OpStart:
			return d.startContainer(ctx, api, req)
		case drivers.OpDelete:
			resp, err := d.deleteContainer(ctx, api, req)
			if err == nil {
				d.sweepGatewaysOf(req.Lineage) // Close sweeps the images
			}
			return resp, err
		}
	case drivers.KindSnapshot:
		switch req.Op {
		case drivers.OpCreate:
			return d.createSnapshot(ctx, req)
		case drivers.OpUpdate:
			return drivers.ApplyResponse{ID: req.ID}, nil // only the description changes, in state
		case drivers.OpDelete:
			resp, err := d.deleteSnapshot(ctx, api, req)
			if err == nil {
				// The gateway image kept for the snapshots may go with
				// the last one (sweepGatewayImages).
				d.sweepGatewaysOf(req.Lineage)
			}
			return resp, err
		}
	default:
		return drivers.ApplyResponse{}, fmt.Errorf("%s: the docker driver has no object kind %q", req.Object.Addr, req.Object.Kind)
	}
	return drivers.ApplyResponse{}, fmt.Errorf("%s: cannot %s a docker %s", req.Object.Addr, req.Op, req.Object.Kind)
}
