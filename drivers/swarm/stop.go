package swarm

import (
	"context"
	"fmt"
	"time"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/swarm"

	"github.com/bottlefile/bottlefile/drivers"
)

var _ drivers.Stopper = (*Driver)(nil)

// StopWorkload stops a service (an agent's, a sidecar's, a gateway's) by
// scaling it to no replicas, and waits until its task has stopped. The
// service, its ID and its spec stay: Read reports a service scaled to no
// replicas as stopped, not drifted, and OpStart scales it back to one.
// What the task wrote is kept as far as the cluster keeps a stopped
// task's container (on its node, until the task history is trimmed).
func (d *Driver) StopWorkload(ctx context.Context, req drivers.StopRequest) error {
	err := d.stopService(ctx, req)
	return d.eng.Unreachable(err)
}

func (d *Driver) stopService(ctx context.Context, req drivers.StopRequest) error {
	api, err := d.manager(ctx)
	if err != nil {
		return err
	}
	addr := req.Object.Addr
	if req.ID == "" {
		return fmt.Errorf("stopping service of %s: no service id recorded", addr)
	}
	pre, _, err := api.ServiceInspectWithRaw(ctx, req.ID, swarm.ServiceInspectOptions{})
	if err != nil {
		return fmt.Errorf("stopping service %s of %s: %w", shortID(req.ID), addr, err)
	}
	if pre.Spec.Labels[drivers.LabelLineage] != req.Lineage {
		return fmt.Errorf("stopping service %s of %s: it does not belong to this state", shortID(req.ID), addr)
	}
	if pre.Spec.Mode.Replicated == nil {
		return fmt.Errorf("stopping service %s of %s: it is not a replicated service, so it cannot be scaled to none", shortID(req.ID), addr)
	}
	zero := uint64(0)
	if _, err := updateService(ctx, api, pre.ID, func(spec *swarm.ServiceSpec) {
		if r := spec.Mode.Replicated; r != nil {
			r.Replicas = &zero
		}
	}); err != nil {
		return fmt.Errorf("stopping service %s of %s: %w", shortID(req.ID), addr, err)
	}
	// The task is told to shut down; wait until it has.
	for {
		tasks, err := api.TaskList(ctx, swarm.TaskListOptions{Filters: filters.NewArgs(filters.Arg("service", pre.ID))})
		if err != nil {
			return fmt.Errorf("stopping service %s of %s: listing its tasks: %w", shortID(req.ID), addr, err)
		}
		running := false
		for _, t := range tasks {
			if t.Status.State == swarm.TaskStateRunning || t.Status.State == swarm.TaskStateStarting {
				running = true
			}
		}
		if !running {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("stopping service %s of %s: %w", shortID(req.ID), addr, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
	d.log.Info("stopped service", "addr", addr, "id", shortID(req.ID))
	return nil
}
