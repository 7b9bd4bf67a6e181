package docker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/gateway"
)

var _ drivers.LogReader = (*Driver)(nil)

// Logs copies a container's log (an agent's, a sidecar's, a gateway's) to
// stdout and stderr, demultiplexed as the container wrote them. A gateway
// writes its decisions, one JSON line each, on stdout, and its own events
// (listening, rules loaded) on stderr. With Follow it copies until ctx is
// done.
func (d *Driver) Logs(ctx context.Context, lineage string, obj drivers.LiveObject, opts drivers.LogOptions, stdout, stderr io.Writer) error {
	if obj.Kind != kindContainer && obj.Kind != gateway.Kind {
		return fmt.Errorf("%s is a docker %s, which keeps no log; agents, sidecars and gateways do", obj.Addr, obj.Kind)
	}
	api, _, err := d.engine(ctx)
	if err != nil {
		return err
	}
	if obj.ID == "" {
		return fmt.Errorf("%s: no container id", obj.Addr)
	}
	lo := container.LogsOptions{ShowStdout: true, ShowStderr: true, Follow: opts.Follow, Timestamps: opts.Timestamps}
	if !opts.Since.IsZero() {
		lo.Since = fmt.Sprintf("%d.%09d", opts.Since.Unix(), opts.Since.Nanosecond())
	}
	if opts.Tail > 0 {
		lo.Tail = strconv.Itoa(opts.Tail)
	}
	rc, err := api.ContainerLogs(ctx, obj.ID, lo)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("reading the log of %s (container %s): %w", obj.Addr, shortID(obj.ID), err)
	}
	defer rc.Close()
	if stdout == nil {
		stdout = io.Discard
	}
	if stderr == nil {
		stderr = io.Discard
	}
	if _, err := stdcopy.StdCopy(stdout, stderr, rc); err != nil && !errors.Is(err, io.EOF) {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("reading the log of %s (container %s): %w", obj.Addr, shortID(obj.ID), err)
	}
	return nil
}
