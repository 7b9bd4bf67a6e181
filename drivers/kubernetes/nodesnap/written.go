package nodesnap

import (
	"context"
	"errors"
	"fmt"

	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/errdefs"
)

// Written is how many bytes container containerID wrote to its own
// layer: the usage of its snapshot in the node's snapshotter (for
// overlayfs, a walk of the upper directory). It only reads.
func Written(ctx context.Context, node Node, containerID string) (int64, error) {
	if containerID == "" {
		return 0, errors.New("no container id given")
	}
	c, err := dial(ctx, node)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	ctx = namespaces.WithNamespace(ctx, node.namespace())
	ctr, err := c.ContainerService().Get(ctx, containerID)
	if err != nil {
		if errdefs.IsNotFound(err) {
			return 0, fmt.Errorf("the node's containerd %s has no container %s in namespace %s", node.Socket, containerID, node.namespace())
		}
		return 0, fmt.Errorf("reading container %s: %w", containerID, err)
	}
	if ctr.SnapshotKey == "" || ctr.Snapshotter == "" {
		return 0, fmt.Errorf("container %s has no root file system snapshot", containerID)
	}
	u, err := c.SnapshotService(ctr.Snapshotter).Usage(ctx, ctr.SnapshotKey)
	if err != nil {
		return 0, fmt.Errorf("measuring what container %s wrote: %w", containerID, err)
	}
	return u.Size, nil
}
