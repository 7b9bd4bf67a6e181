package docker

import (
	"context"
	"errors"
	"fmt"

	"github.com/docker/docker/client"
	"github.com/zclconf/go-cty/cty"

	"github.com/bottlefile/bottlefile/addrs"
	"github.com/bottlefile/bottlefile/drivers"
)

// What another driver that runs bottles on Docker engines (drivers/swarm,
// whose manager is one) shares of this one instead of copying it: a
// Driver configured against that engine gives the connection (the client,
// and errors that say the engine cannot be reached) and builds images
// (Apply of an image object). What every driver shares of the gateway
// itself is drivers/gateway's, and its image drivers/engine's.

// Client is the engine client the configured driver uses, as the whole
// Docker API, for calls this driver does not make (swarm services). The
// first call checks that the engine answers (drivers/engine Connect).
func (d *Driver) Client(ctx context.Context) (client.APIClient, error) {
	api, _, err := d.engine(ctx)
	if err != nil {
		return nil, err
	}
	cli, ok := api.(client.APIClient)
	if !ok {
		return nil, fmt.Errorf("the docker client in use (%T) is not the whole engine API", api)
	}
	return cli, nil
}

// Unreachable turns an error that says the engine cannot be reached at all
// into a *drivers.UnreachableError naming the runtime and where the engine
// was looked for; other errors pass unchanged.
func (d *Driver) Unreachable(err error) error { return d.unreachable(err) }

// PlanImage is the image object of a workload at addr with a build block
// (its context hashed, as this driver plans it: addr + ".image"), and the
// context hash the workload's own object records as build_hash; nil and ""
// without a build block. It reads the context and contacts nothing.
func (d *Driver) PlanImage(addr string, w cty.Value) (*drivers.Object, string, error) {
	build := drivers.WorkloadAttr(w, "build")
	if build.IsNull() {
		return nil, "", nil
	}
	objs, err := d.planWorkload(addr, addrs.NetworkOf(addr), w)
	if err != nil {
		return nil, "", err
	}
	for i := range objs {
		if objs[i].Kind == kindImage {
			sum, err := drivers.String(objs[i].Attrs["context_hash"])
			return &objs[i], sum, err
		}
	}
	return nil, "", errors.New("a build block planned no image")
}

// EgressNetworkName is the engine name of a runtime's managed egress
// network at addr (runtime.R.egress): bf-<lineage[:8]>-R.egress.
func EgressNetworkName(lineage, addr string) (string, error) {
	return egressNetworkName(lineage, addr)
}

// CommitSnapshot takes the snapshot req.Object of the agent req.Agent from
// the container named (or with the id) ctr on this driver's engine, as
// Apply takes one of the agent's own container: no secret of the
// container's config in the image, never removed by a sweep while it is
// being made. The image is tagged SnapshotRef's reference on this engine;
// the response is a snapshot create's.
func (d *Driver) CommitSnapshot(ctx context.Context, req drivers.ApplyRequest, ctr string) (drivers.ApplyResponse, error) {
	if ctr == "" {
		return drivers.ApplyResponse{}, errors.New("no container to commit")
	}
	return d.commitSnapshot(ctx, req, ctr)
}

// SweepSnapshots removes what making snapshots of the lineage left on
// this driver's engine that nothing records (untagged images of the
// lineage, intermediates a crash left), unless an image of the lineage
// is being made in this process: then Close does.
func (d *Driver) SweepSnapshots(ctx context.Context, lineage string) {
	api, _, err := d.engine(ctx)
	if err != nil {
		return
	}
	d.sweepSnapshots(ctx, api, lineage)
}
