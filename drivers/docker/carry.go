package docker

import (
	"context"
	"fmt"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"

	"github.com/bottlefile/bottlefile/drivers"
)

// removedMeanwhile reports a commit or export refused because the
// container is being removed or is gone: a removal a killed apply sent
// went on after the next run's refresh saw the container running (a force
// removal stops the container first, and the list says "running" until
// then).
func removedMeanwhile(err error) bool {
	if err == nil {
		return false
	}
	msg := err.Error()
	return cerrdefs.IsNotFound(err) || strings.Contains(msg, "which is Dead") || strings.Contains(msg, "No such container") ||
		strings.Contains(msg, "is already in progress") || strings.Contains(msg, "is being removed")
}

// carryNewest makes the snapshot at ref when the agent's container cannot
// be committed because a removal asked for by a killed apply took it
// (why): that apply removed it only after recording a snapshot of it, so
// the agent's newest snapshot holds what the container held. The new
// snapshot is that one's layers under a config of its own (this address's
// labels; no layer data moves), and the apply says so. With no snapshot of
// the agent to carry, why is the error. The caller holds imageMaking.
func (d *Driver) carryNewest(ctx context.Context, api snapshotAPI, req drivers.ApplyRequest, agentAddr, ref, ctr string, why error) (drivers.ApplyResponse, error) {
	addr := req.Object.Addr
	fail := func(err error) (drivers.ApplyResponse, error) {
		return drivers.ApplyResponse{}, fmt.Errorf("taking snapshot %s: %w", addr, err)
	}
	if ctr != "" {
		// Let the removal finish, so nothing of the container is left.
		if err := waitGone(ctx, api, ctr); err != nil && !cerrdefs.IsNotFound(err) {
			d.log.Debug("the container being removed is still there", "id", shortID(ctr), "error", err)
		}
	}
	list, err := api.ImageList(ctx, image.ListOptions{Filters: filters.NewArgs(
		filters.Arg("label", drivers.LabelLineage+"="+req.Lineage),
		filters.Arg("label", labelSnapshotOf+"="+agentAddr),
	)})
	if err != nil {
		return fail(fmt.Errorf("%w; listing the snapshots of %s to carry the newest: %v", why, agentAddr, err))
	}
	var newest *image.Summary
	for i := range list {
		img := &list[i]
		if !hasSnapshotTag(req.Lineage, img.RepoTags) || img.Labels[labelSnapshotIntermediate] != "" || slicesContain(img.RepoTags, ref) {
			continue
		}
		if newest == nil || img.Created > newest.Created {
			newest = img
		}
	}
	if newest == nil {
		return fail(why)
	}
	from, err := api.ImageInspect(ctx, newest.ID)
	if err != nil {
		return fail(fmt.Errorf("%w; inspecting the newest snapshot %s to carry it: %v", why, shortID(newest.ID), err))
	}
	fromAddr := ""
	if from.Config != nil {
		fromAddr = from.Config.Labels[drivers.LabelAddress]
	}
	labels := req.Labels()
	labels[labelSnapshotOf] = agentAddr
	if from.Config != nil {
		labels[labelSnapshotSource] = from.Config.Labels[labelSnapshotSource]
	}
	cfg, err := snapshotImageConfig(&from, from, labels, "layer of "+fromAddr+", carried", "bottlefile snapshot "+addr, time.Now())
	if err != nil {
		return fail(err)
	}
	if _, err := loadImageConfig(ctx, api, cfg, ref, len(from.RootFS.Layers)); err != nil {
		return fail(err)
	}
	d.log.Warn("the container could not be committed: an interrupted run was removing it after recording its snapshot; that snapshot is carried", "addr", addr, "from", fromAddr, "why", why)
	resp, err := d.snapshotResponse(ctx, api, ref, labels[labelSnapshotSource], from.Size) // it adds nothing
	if err != nil {
		return resp, err
	}
	resp.Notes = append(resp.Notes, fmt.Sprintf("%s could not be committed (%v): a run that was cut off was removing it, after it recorded %s. %s holds %s's files, taken before that removal began", agentAddr, why, fromAddr, addr, fromAddr))
	return resp, nil
}

func slicesContain(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
