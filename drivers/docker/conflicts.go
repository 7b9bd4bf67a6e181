package docker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"

	"github.com/bottlefile/bottlefile/drivers"
)

// A killed apply does not cancel what it asked the engine for: a create or
// a removal it sent lands after the next run looked. These helpers make
// the lineage's own objects of a name never a reason to ask the user.

// conflictAttempts bounds how often a create whose name the lineage's own
// object took meanwhile is made again; conflictWait how long a name the
// engine reserved for a create still landing is waited for.
const (
	conflictAttempts = 3
	conflictWait     = 30 * time.Second
)

// nameInUse reports a create refused because an object of that name
// exists ("Conflict. The container name ... is already in use").
func nameInUse(err error) bool {
	return err != nil && (cerrdefs.IsConflict(err) || strings.Contains(err.Error(), "is already in use"))
}

// createNamed creates a container named name for addr through create.
// When the engine says the name is in use by a container of this lineage
// made for addr (the create of an apply killed a moment ago, landed after
// this one looked), that container is removed by its id and the create
// made again. One of another lineage, or of none, is refused, saying so.
func (d *Driver) createNamed(ctx context.Context, api dockerAPI, lineage, addr, name string, create func() (container.CreateResponse, error)) (container.CreateResponse, error) {
	deadline := time.Now().Add(conflictWait)
	wait := 50 * time.Millisecond
	for attempt := 1; ; {
		created, err := create()
		if !nameInUse(err) || attempt == conflictAttempts {
			return created, err
		}
		old, ierr := api.ContainerInspect(ctx, name)
		if cerrdefs.IsNotFound(ierr) {
			// The engine reserves a name before the container it names
			// can be inspected: the late create is still landing (or was
			// removed meanwhile). Look again shortly.
			if time.Now().After(deadline) {
				return created, err
			}
			select {
			case <-ctx.Done():
				return created, errors.Join(err, ctx.Err())
			case <-time.After(wait):
			}
			wait = min(2*wait, time.Second)
			continue
		}
		attempt++
		if ierr != nil {
			return created, fmt.Errorf("%w (and inspecting the container of that name: %v)", err, ierr)
		}
		if !ownedBy(old, lineage, addr) {
			return created, fmt.Errorf("a container named %s already exists and is not this state's %s (lineage %s); remove or rename it: %w", name, addr, lineage, err)
		}
		d.log.Info("the name is taken by this lineage's own container, made by an interrupted apply after this one looked; removing it and creating again", "addr", addr, "name", name, "id", shortID(old.ID))
		if rerr := d.removeContainer(ctx, api, old.ID); rerr != nil {
			return created, fmt.Errorf("removing this state's unrecorded container %s, which holds the name: %w", shortID(old.ID), rerr)
		}
	}
}

// ownedBy reports whether a container carries this lineage's labels for
// addr. A container without an address label of this lineage counts as
// its own too: only bottlefile gives the lineage label.
func ownedBy(c container.InspectResponse, lineage, addr string) bool {
	if c.Config == nil || c.Config.Labels[drivers.LabelLineage] != lineage {
		return false
	}
	a := c.Config.Labels[drivers.LabelAddress]
	return a == "" || a == addr
}

// Removal retries: the storage driver can refuse to remove a container's
// layer for a moment after the engine restarted or while a process still
// holds a file of it ("unlinkat ...: directory not empty", "device or
// resource busy"). removeBackoff doubles from the first wait, up to
// removeAttempts tries in all.
var (
	removeAttempts = 5
	removeBackoff  = 250 * time.Millisecond
)

// refusedRemoval reports an error of the storage driver refusing to let go
// of a container's files, which a later try may not meet.
func refusedRemoval(err error) bool {
	if err == nil {
		return false
	}
	msg := err.Error()
	return strings.Contains(msg, "directory not empty") || strings.Contains(msg, "device or resource busy")
}

// removeContainer removes a container by id, forced, with its anonymous
// volumes. A container already gone is no error; a removal already in
// progress (asked for by a run that was killed) is waited out; one the
// storage driver refuses is tried again with backoff and, if it still
// fails, said once with what to do.
func (d *Driver) removeContainer(ctx context.Context, api dockerAPI, id string) error {
	wait := removeBackoff
	var err error
	for attempt := 1; attempt <= removeAttempts; attempt++ {
		err = api.ContainerRemove(ctx, id, container.RemoveOptions{Force: true, RemoveVolumes: true})
		if err != nil && strings.Contains(err.Error(), "already in progress") {
			err = waitGone(ctx, api, id)
		}
		if err == nil || cerrdefs.IsNotFound(err) {
			return nil
		}
		if !refusedRemoval(err) {
			return err
		}
		if attempt == removeAttempts {
			break
		}
		d.log.Debug("the engine refused to remove the container's files; trying again", "id", shortID(id), "attempt", attempt, "wait", wait, "error", err)
		select {
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		case <-time.After(wait):
		}
		wait *= 2
	}
	return fmt.Errorf("the engine's storage driver refused to remove container %s %d times: %w. "+
		"Something still holds its files (a process inside it that outlived it, or a mount the engine left after a crash); "+
		"restarting the docker daemon releases them, then run this again", shortID(id), removeAttempts, err)
}
