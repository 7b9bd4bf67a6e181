package docker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/bottlefile/bottlefile/drivers"
)

var _ drivers.Execer = (*Driver)(nil)

// execAPI is the part of the engine API exec uses: create an exec
// instance, attach to it (a hijacked connection carrying stdin one way
// and the output the other) and inspect it for its exit code.
type execAPI interface {
	ContainerExecCreate(ctx context.Context, container string, options container.ExecOptions) (container.ExecCreateResponse, error)
	ContainerExecAttach(ctx context.Context, execID string, config container.ExecAttachOptions) (types.HijackedResponse, error)
	ContainerExecInspect(ctx context.Context, execID string) (container.ExecInspect, error)
}

// Exec runs a command in an agent's or a sidecar's container, as docker
// exec does: without a TTY its output is demultiplexed onto stdout and
// stderr (stdcopy); with one it is a single stream. Stdin, when given, is
// copied in and then closed, so a command reading it sees its end.
func (d *Driver) Exec(ctx context.Context, lineage string, obj drivers.LiveObject, req drivers.ExecRequest) (int, error) {
	if obj.Kind != kindContainer {
		return 0, fmt.Errorf("%s is a docker %s; commands run in agents and sidecars", obj.Addr, obj.Kind)
	}
	if len(req.Command) == 0 {
		return 0, errors.New("no command to run")
	}
	api, _, err := d.engine(ctx)
	if err != nil {
		return 0, err
	}
	x, ok := api.(execAPI)
	if !ok {
		return 0, errors.New("this engine client cannot exec")
	}
	opts := container.ExecOptions{
		Cmd: req.Command, Tty: req.TTY,
		AttachStdin: req.Stdin != nil, AttachStdout: true, AttachStderr: true,
	}
	if req.TTY && req.Height > 0 && req.Width > 0 {
		opts.ConsoleSize = &[2]uint{req.Height, req.Width}
	}
	created, err := x.ContainerExecCreate(ctx, obj.ID, opts)
	if err != nil {
		return 0, fmt.Errorf("running a command in %s (container %s): %w", obj.Addr, shortID(obj.ID), err)
	}
	hj, err := x.ContainerExecAttach(ctx, created.ID, container.ExecAttachOptions{Tty: req.TTY, ConsoleSize: opts.ConsoleSize})
	if err != nil {
		return 0, fmt.Errorf("attaching to the command in %s: %w", obj.Addr, err)
	}
	defer hj.Close()
	// The session's end is a use of the workload no later look could
	// see once it is over (activity.go).
	defer d.noteExecEnded(obj.ID)

	stdout, stderr := orDiscard(req.Stdout), orDiscard(req.Stderr)
	out := make(chan error, 1)
	go func() {
		var err error
		if req.TTY {
			_, err = io.Copy(stdout, hj.Reader)
		} else {
			_, err = stdcopy.StdCopy(stdout, stderr, hj.Reader)
		}
		out <- err
	}()
	if req.Stdin != nil {
		// Not waited for: a terminal's stdin has no end, and the command
		// may end before it reads everything.
		go func() {
			io.Copy(hj.Conn, req.Stdin)
			hj.CloseWrite()
		}()
	}
	select {
	case err := <-out:
		if err != nil && !errors.Is(err, io.EOF) && ctx.Err() == nil {
			return 0, fmt.Errorf("reading the output of the command in %s: %w", obj.Addr, err)
		}
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	// The output ends as the process does; its exit code is recorded a
	// moment later.
	for {
		info, err := x.ContainerExecInspect(ctx, created.ID)
		if err != nil {
			return 0, fmt.Errorf("reading the exit code of the command in %s: %w", obj.Addr, err)
		}
		if !info.Running {
			return info.ExitCode, nil
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func orDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}
