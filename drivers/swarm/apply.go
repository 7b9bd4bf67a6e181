package swarm

import (
	"context"
	"fmt"
	"strings"

	"github.com/bottlefile/bottlefile/drivers"
)

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
	ops, ok := applyOps[req.Object.Kind]
	if !ok {
		return drivers.ApplyResponse{}, fmt.Errorf("%s: the swarm driver has no object kind %q", req.Object.Addr, req.Object.Kind)
	}
	if op := ops[req.Op]; op != nil {
		return op(d, ctx, api, req)
	}
	return drivers.ApplyResponse{}, fmt.Errorf("%s: cannot %s a swarm %s", req.Object.Addr, req.Op, req.Object.Kind)
}

// applyOp performs one operation on an object of one kind.
type applyOp func(d *Driver, ctx context.Context, api swarmAPI, req drivers.ApplyRequest) (drivers.ApplyResponse, error)

// applyOps is what Apply does, by object kind and operation; an operation
// a kind lacks is refused. A gateway starts as a service does.
var applyOps = map[string]map[drivers.Op]applyOp{
	kindNetwork: {drivers.OpCreate: (*Driver).createNetwork, drivers.OpDelete: (*Driver).deleteNetwork},
	kindImage:   {drivers.OpCreate: (*Driver).createImage, drivers.OpDelete: (*Driver).deleteImage},
	kindService: {
		drivers.OpCreate: (*Driver).createService,
		drivers.OpStart:  (*Driver).startService,
		drivers.OpDelete: (*Driver).deleteService,
	},
	kindGateway: {
		drivers.OpCreate: (*Driver).createGateway,
		drivers.OpUpdate: (*Driver).updateGateway,
		drivers.OpStart:  (*Driver).startService,
		drivers.OpDelete: (*Driver).deleteGateway,
	},
	drivers.KindSnapshot: {
		drivers.OpCreate: (*Driver).createSnapshot,
		// Only the description changes, in state.
		drivers.OpUpdate: func(_ *Driver, _ context.Context, _ swarmAPI, req drivers.ApplyRequest) (drivers.ApplyResponse, error) {
			return drivers.ApplyResponse{ID: req.ID}, nil
		},
		drivers.OpDelete: func(d *Driver, ctx context.Context, _ swarmAPI, req drivers.ApplyRequest) (drivers.ApplyResponse, error) {
			return d.deleteSnapshot(ctx, req)
		},
	},
}
