package swarm

import (
	"context"
	"fmt"
	"strings"

	"github.com/bottlefile/bottlefile/drivers"
)

// Apply performs one operation on one object.
func (d *Driver) Apply(ctx context.Context, req drivers.ApplyRequest) (drivers.ApplyResponse, error) {
	resp, err := d.apply(ctx, req)
	return resp, d.eng.Unreachable(err)
}

func (d *Driver) apply(ctx context.Context, req drivers.ApplyRequest) (drivers.ApplyResponse, error) {
	api, err := d.manager(ctx)
	if err != nil {
		return drivers.ApplyResponse{}, err
	}
	if req.Lineage == "" {
		return drivers.ApplyResponse{}, fmt.Errorf("%s: %s needs a state lineage", req.Object.Addr, req.Op)
	}
	if req.Runtime == "" {
		// What it makes carries the runtime that made it, however asked.
		d.mu.RLock()
		req.Runtime = d.runtime
		d.mu.RUnlock()
	}
	if req.Op == drivers.OpDelete && strings.HasPrefix(req.ID, nodeCopyID) {
		return d.removeNodeCopy(ctx, api, req) // nodecopy.go
	}
	switch req.Object.Kind {
	case kindNetwork:
		switch req.Op {
		case drivers.OpCreate:
			return d.createNetwork(ctx, api, req)
		case drivers.OpDelete:
			return d.deleteNetwork(ctx, api, req)
		}
	case kindImage:
		switch req.Op {
		case drivers.OpCreate:
			return d.createImage(ctx, api, req)
		case drivers.OpDelete:
			return d.deleteImage(ctx, api, req)
		}
	case kindService:
		switch req.Op {
		case drivers.OpCreate:
			return d.createService(ctx, api, req)
		case drivers.OpStart:
			return d.startService(ctx, api, req)
		case drivers.OpDelete:
			return d.deleteService(ctx, api, req)
		}
	case kindGateway:
		switch req.Op {
		case drivers.OpCreate:
			return d.createGateway(ctx, api, req)
		case drivers.OpUpdate:
			return d.updateGateway(ctx, api, req)
		case drivers.OpStart:
			return d.startService(ctx, api, req)
		case drivers.OpDelete:
			return d.deleteGateway(ctx, api, req)
		}
	case drivers.KindSnapshot:
		switch req.Op {
		case drivers.OpCreate:
			return d.createSnapshot(ctx, api, req)
		case drivers.OpUpdate:
			return drivers.ApplyResponse{ID: req.ID}, nil // only the description changes, in state
		case drivers.OpDelete:
			return d.deleteSnapshot(ctx, req)
		}
	default:
		return drivers.ApplyResponse{}, fmt.Errorf("%s: the swarm driver has no object kind %q", req.Object.Addr, req.Object.Kind)
	}
	return drivers.ApplyResponse{}, fmt.Errorf("%s: cannot %s a swarm %s", req.Object.Addr, req.Op, req.Object.Kind)
}
