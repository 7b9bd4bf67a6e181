package swarm

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/docker/docker/api/types/swarm"

	"github.com/bottlefile/bottlefile/drivers"
)

// Workspaces on a swarm (drivers.Carry): a task starts as soon as its
// service is created, so the workspace cannot be copied into its
// container first. Instead a node's engine composes the image the new
// service runs: the new image with the workspace copied in (from the
// snapshot, on the manager's engine, or from the task of the service
// being replaced, on its node's engine), committed and pushed to the
// registry as bf-<lineage>-<agent>-carry. Deleting the service deletes
// that image from the registry.

// carrySuffix ends the repository of a composed image.
const carrySuffix = "-carry"

// carryImage composes, pushes and returns (by digest) the image a service
// with a carried workspace runs: base with req.Carry's paths. Carried from
// the service being replaced, it reads that service's running task
// before createService removes the service.
func (d *Driver) carryImage(ctx context.Context, api swarmAPI, req drivers.ApplyRequest, base string) (string, error) {
	addr := req.Object.Addr
	registry, _, err := d.snapshotRegistry(addr)
	if err != nil {
		return "", err
	}
	eng, host, node, src := d.eng, "the manager's engine", "the manager", ""
	if req.Carry.Workload != "" {
		t, n, err := d.taskOf(ctx, api, req.Lineage, addr)
		if err != nil {
			return "", fmt.Errorf("the service to carry %s from: %w", strings.Join(req.Carry.Paths, ", "), err)
		}
		if t.ServiceID != req.Carry.Workload {
			return "", fmt.Errorf("the service to carry the workspace from is %s, but %s runs as %s", shortID(req.Carry.Workload), addr, shortID(t.ServiceID))
		}
		if eng, host, err = d.nodeEngine(ctx, n); err != nil {
			return "", err
		}
		node, src = n, t.Status.ContainerStatus.ContainerID
	}
	prefix, err := serviceName(req.Lineage, agentOf(addr))
	if err != nil {
		return "", err
	}
	local := fmt.Sprintf("%s%s:%d", prefix, carrySuffix, time.Now().UnixNano())
	if err := eng.ComposeWorkspace(ctx, req, base, src, local); err != nil {
		return "", nodeFailed(node, host, err)
	}
	cli, err := eng.Client(ctx)
	if err != nil {
		return "", nodeFailed(node, host, err)
	}
	what := node // "the manager"
	if src != "" {
		what = "node " + node
	}
	pb := d.bound(ctx, what, d.nodeTimeout())
	ref, err := pushSnapshot(pb.ctx, cli, local, registry, pb)
	pb.release()
	if err != nil {
		return "", fmt.Errorf("pushing the image with the workspace from node %s to the registry %s: %w", node, registry, pb.err(err))
	}
	d.log.Info("composed the new image with the workspace", "addr", addr, "node", node, "ref", ref)
	return ref, nil
}

// deleteCarried deletes from the registry the composed image a removed
// service ran, when it ran one; failures are only logged (the image is
// in no state, and nothing else runs it).
func (d *Driver) deleteCarried(ctx context.Context, lineage string, svc swarm.Service) {
	cs := svc.Spec.TaskTemplate.ContainerSpec
	if cs == nil {
		return
	}
	registry, reg, err := d.snapshotRegistry(svc.Spec.Name)
	if err != nil {
		return
	}
	repo, digest, err := splitRef(registry, cs.Image)
	prefix, perr := serviceName(lineage, agentOf(svc.Spec.Labels[drivers.LabelAddress]))
	if err != nil || perr != nil || repo != prefix+carrySuffix {
		return
	}
	if err := reg.deleteManifest(ctx, repo, digest); err != nil {
		d.log.Warn("could not delete the image a removed service ran from the registry", "ref", cs.Image, "error", err)
	}
	d.removeCopies(ctx, lineage, svc.Spec.Labels[drivers.LabelAddress], registry+"/"+repo+"@"+digest)
}
