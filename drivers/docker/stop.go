package docker

import (
	"context"
	"fmt"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"

	"github.com/bottlefile/bottlefile/drivers"
)

var _ drivers.Stopper = (*Driver)(nil)

// stopTimeout is how long a container has to exit after SIGTERM before
// the engine kills it, in seconds (docker stop's default).
const stopTimeout = 10

// StopWorkload stops a container (an agent's, a sidecar's, a gateway's)
// with the engine's ContainerStop, keeping it and what it wrote, so that
// OpStart runs it again. Only a container of the request's lineage is
// stopped; one already stopped is no error.
func (d *Driver) StopWorkload(ctx context.Context, req drivers.StopRequest) error {
	api, _, err := d.engine(ctx)
	if err != nil {
		return d.Unreachable(err)
	}
	addr := req.Object.Addr
	if req.ID == "" {
		return fmt.Errorf("stopping container of %s: no container id recorded", addr)
	}
	info, err := api.ContainerInspect(ctx, req.ID)
	if err != nil {
		return d.Unreachable(fmt.Errorf("stopping container %s of %s: %w", shortID(req.ID), addr, err))
	}
	if info.Config == nil || info.Config.Labels[drivers.LabelLineage] != req.Lineage {
		return fmt.Errorf("stopping container %s of %s: it does not belong to this state", shortID(req.ID), addr)
	}
	timeout := stopTimeout
	if err := api.ContainerStop(ctx, req.ID, container.StopOptions{Timeout: &timeout}); err != nil && !cerrdefs.IsNotFound(err) {
		return d.Unreachable(fmt.Errorf("stopping container %s of %s: %w", shortID(req.ID), addr, err))
	}
	d.log.Info("stopped container", "addr", addr, "id", shortID(req.ID))
	return nil
}
