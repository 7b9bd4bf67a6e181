package kubernetes

import (
	"context"
	"fmt"

	k8s "k8s.io/client-go/kubernetes"

	"github.com/bottlefile/bottlefile/drivers"
)

// Apply performs one operation on one object.
func (d *Driver) Apply(ctx context.Context, req drivers.ApplyRequest) (drivers.ApplyResponse, error) {
	cs, cfg, err := d.client()
	if err != nil {
		return drivers.ApplyResponse{}, err
	}
	if req.Lineage == "" {
		return drivers.ApplyResponse{}, fmt.Errorf("%s: %s needs a state lineage", req.Object.Addr, req.Op)
	}
	if req.Runtime == "" {
		// What it makes carries the runtime that made it, however asked.
		req.Runtime = cfg.runtime
	}
	ops, ok := applyOps[req.Object.Kind]
	if !ok {
		return drivers.ApplyResponse{}, fmt.Errorf("%s: the kubernetes driver has no object kind %q", req.Object.Addr, req.Object.Kind)
	}
	op := ops[req.Op]
	if op == nil {
		return drivers.ApplyResponse{}, fmt.Errorf("%s: cannot %s a kubernetes %s", req.Object.Addr, req.Op, req.Object.Kind)
	}
	resp, err := op(d, ctx, cs, cfg, req)
	return resp, d.unreachable(err)
}

// applyOp performs one operation on an object of one kind.
type applyOp func(d *Driver, ctx context.Context, cs k8s.Interface, cfg settings, req drivers.ApplyRequest) (drivers.ApplyResponse, error)

// applyOps is what Apply does, by object kind and operation; an
// operation a kind lacks is refused.
var applyOps = map[string]map[drivers.Op]applyOp{
	kindNamespace: {
		drivers.OpCreate: (*Driver).createNamespace,
		drivers.OpUpdate: (*Driver).updateNamespace,
		drivers.OpDelete: (*Driver).deleteNamespace,
	},
	kindPod: {
		drivers.OpCreate: (*Driver).createPod,
		drivers.OpStart:  (*Driver).startPod,
		drivers.OpDelete: (*Driver).deletePod,
	},
	kindGateway: {
		drivers.OpCreate: (*Driver).createGateway,
		drivers.OpUpdate: (*Driver).updateGateway,
		drivers.OpStart:  (*Driver).startGateway,
		drivers.OpDelete: (*Driver).deleteGateway,
	},
}
