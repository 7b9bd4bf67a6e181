package smolvm

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/bottlefile/bottlefile/drivers"
)

// cleanupTimeout bounds the delete that removes a machine which failed to
// start, which runs even when the apply is being cancelled.
const cleanupTimeout = 2 * time.Minute

// Apply performs one operation on one machine.
func (d *Driver) Apply(ctx context.Context, req drivers.ApplyRequest) (drivers.ApplyResponse, error) {
	run, err := d.cli()
	if err != nil {
		return drivers.ApplyResponse{}, err
	}
	if req.Lineage == "" {
		return drivers.ApplyResponse{}, fmt.Errorf("%s: %s needs a state lineage", req.Object.Addr, req.Op)
	}
	if req.Runtime == "" {
		// What it makes carries the runtime that made it, however asked.
		d.mu.RLock()
		req.Runtime = d.runtime
		d.mu.RUnlock()
	}
	switch req.Object.Kind {
	case kindMachine:
	case drivers.KindSnapshot:
		switch req.Op {
		case drivers.OpCreate:
			return d.createSnapshot(ctx, run, req)
		case drivers.OpDelete:
			return drivers.ApplyResponse{}, d.deleteSnapshot(req)
		}
		return drivers.ApplyResponse{}, fmt.Errorf("%s: cannot %s a smolvm snapshot", req.Object.Addr, req.Op)
	default:
		return drivers.ApplyResponse{}, fmt.Errorf("%s: the smolvm driver has no object kind %q", req.Object.Addr, req.Object.Kind)
	}
	switch req.Op {
	case drivers.OpCreate:
		return d.create(ctx, run, req)
	case drivers.OpStart:
		return d.start(ctx, run, req)
	case drivers.OpDelete:
		return drivers.ApplyResponse{}, d.delete(ctx, run, req)
	case drivers.OpUpdate:
		return drivers.ApplyResponse{}, fmt.Errorf("%s: smolvm machines are replaced, not updated in place", req.Object.Addr)
	}
	return drivers.ApplyResponse{}, fmt.Errorf("%s: cannot %s a smolvm machine", req.Object.Addr, req.Op)
}

func (d *Driver) create(ctx context.Context, run runner, req drivers.ApplyRequest) (drivers.ApplyResponse, error) {
	addr := req.Object.Addr
	name, err := machineName(req.Lineage, req.NamedAddr(addr))
	if err != nil {
		return drivers.ApplyResponse{}, fmt.Errorf("creating machine for %s: %w", addr, err)
	}
	fail := func(format string, args ...any) (drivers.ApplyResponse, error) {
		return drivers.ApplyResponse{}, fmt.Errorf("creating machine %s for %s: %s", name, addr, fmt.Sprintf(format, args...))
	}
	spec, err := decodeMachine(req.Object, d.imageBase())
	if err != nil {
		return fail("%v", err)
	}
	// Resume or migration: boot from the snapshot (a .smolmachine pack,
	// or a docker-save tar) with the agent's own settings.
	if req.BootImage != "" {
		if spec.image, spec.from, err = imageSource(req.BootImage, d.imageBase()); err != nil {
			return fail("the snapshot to boot from, %q: %v", req.BootImage, err)
		}
	}
	// A snapshot of ours (booted from, or named as the image with
	// snapshot.X.image) is used through a link of the machine's own.
	src := &spec.image
	if spec.from != "" {
		src = &spec.from
	}
	bootSrc := *src
	bootLink, err := d.bootPath(req.Lineage, name, bootSrc)
	if err != nil {
		return fail("the snapshot to boot from: %v", err)
	}
	*src = bootLink
	args, env, err := createArgs(name, spec, req, func(msg string, kv ...any) {
		d.log.Warn(msg, append([]any{"addr", addr}, kv...)...)
	})
	if err != nil {
		return fail("%v", err)
	}

	// A crash between create and record leaves our own machine behind:
	// delete it and create it again. Anyone else's is theirs.
	entries, err := d.list(ctx, run)
	if err != nil {
		return fail("checking for an existing machine: %v", err)
	}
	if old := find(entries, name); old != nil {
		if old.Labels[drivers.LabelLineage] != req.Lineage {
			return fail("a machine with this name already exists and does not belong to this state (lineage %s); delete or rename it", req.Lineage)
		}
		d.log.Info("deleting unrecorded machine of this lineage before creating it again", "addr", addr, "name", name)
		if err := d.deleteMachine(ctx, run, name); err != nil {
			return fail("deleting the unrecorded machine left by an earlier run: %v", err)
		}
	}
	if bootLink != bootSrc {
		if err := d.linkBoot(bootSrc, bootLink); err != nil {
			return fail("the snapshot to boot from: %v", err)
		}
	}

	if _, err := run.run(ctx, args, env); err != nil {
		d.removeBootFiles(req.Lineage, name)
		return fail("%v", err)
	}
	if _, err := run.run(ctx, []string{"machine", "start", "--name", name}, nil); err != nil {
		d.cleanup(ctx, run, req.Lineage, addr, name)
		return drivers.ApplyResponse{}, fmt.Errorf("starting machine %s for %s (smolvm pulls the image at start): %w", name, addr, err)
	}
	if err := d.waitReady(ctx, run, name); err != nil {
		d.cleanup(ctx, run, req.Lineage, addr, name)
		return drivers.ApplyResponse{}, fmt.Errorf("machine %s for %s started but is not ready: %w", name, addr, err)
	}
	d.log.Info("created machine", "addr", addr, "name", name, "image", spec.image+spec.from, "boot", req.BootImage)
	return machineResponse(name), nil
}

// cleanup deletes a machine that failed to start, so that nothing
// unrecorded is left behind, even when ctx is cancelled.
func (d *Driver) cleanup(ctx context.Context, run runner, lineage, addr, name string) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	if err := d.deleteMachine(cctx, run, name); err != nil {
		d.log.Warn("could not delete the machine that failed to start", "addr", addr, "name", name, "error", err)
		return
	}
	d.removeBootFiles(lineage, name)
}

func machineResponse(name string) drivers.ApplyResponse {
	return drivers.ApplyResponse{ID: name, Computed: map[string]string{"name": name}}
}

func (d *Driver) start(ctx context.Context, run runner, req drivers.ApplyRequest) (drivers.ApplyResponse, error) {
	addr := req.Object.Addr
	name, err := machineRef(req)
	if err != nil {
		return drivers.ApplyResponse{}, fmt.Errorf("starting machine of %s: %w", addr, err)
	}
	if _, err := run.run(ctx, []string{"machine", "start", "--name", name}, nil); err != nil {
		return drivers.ApplyResponse{}, fmt.Errorf("starting machine %s of %s: %w", name, addr, err)
	}
	if err := d.waitReady(ctx, run, name); err != nil {
		return drivers.ApplyResponse{}, fmt.Errorf("machine %s of %s started but is not ready: %w", name, addr, err)
	}
	d.log.Info("started machine", "addr", addr, "name", name)
	return machineResponse(name), nil
}

func (d *Driver) delete(ctx context.Context, run runner, req drivers.ApplyRequest) error {
	addr := req.Object.Addr
	name := req.ID
	if name == "" {
		// Nothing recorded: find ours by name, and touch it only if the
		// lineage label says it is ours.
		var err error
		if name, err = machineName(req.Lineage, req.NamedAddr(addr)); err != nil {
			return fmt.Errorf("deleting machine of %s: %w", addr, err)
		}
		entries, err := d.list(ctx, run)
		if err != nil {
			return fmt.Errorf("deleting machine %s of %s: %w", name, addr, err)
		}
		m := find(entries, name)
		if m == nil {
			return nil
		}
		if m.Labels[drivers.LabelLineage] != req.Lineage {
			return fmt.Errorf("deleting machine %s of %s: it does not belong to this state (lineage %s)", name, addr, req.Lineage)
		}
	}
	if err := d.deleteMachine(ctx, run, name); err != nil {
		return fmt.Errorf("deleting machine %s of %s: %w", name, addr, err)
	}
	d.removeBootFiles(req.Lineage, name)
	d.log.Info("deleted machine", "addr", addr, "name", name)
	return nil
}

// deleteMachine runs "machine delete --name N -f" (smolvm stops a running
// machine first). A machine that is already gone is not an error: when
// the delete fails, one list call tells whether it still exists.
func (d *Driver) deleteMachine(ctx context.Context, run runner, name string) error {
	_, err := run.run(ctx, []string{"machine", "delete", "--name", name, "-f"}, nil)
	if err == nil {
		return nil
	}
	var ce *cliError
	if !errors.As(err, &ce) {
		return err
	}
	entries, lerr := d.list(ctx, run)
	if lerr != nil {
		return fmt.Errorf("%w (and listing machines to see whether it is gone failed: %v)", err, lerr)
	}
	if find(entries, name) == nil {
		d.log.Debug("machine already gone", "name", name)
		return nil
	}
	return err
}

// machineRef is the machine to operate on: the recorded id (the name),
// else the name this lineage gives the address.
func machineRef(req drivers.ApplyRequest) (string, error) {
	if req.ID != "" {
		return req.ID, nil
	}
	return machineName(req.Lineage, req.NamedAddr(req.Object.Addr))
}

// waitReady checks that a started machine answers an exec, retrying with
// a growing pause for up to d.readyTimeout. smolvm's own failures
// ("Error: ...", such as an agent that is not up yet) are retried. A
// guest exit of 126 or 127 means the image has no "true" but the machine
// did answer, so it counts as ready.
func (d *Driver) waitReady(ctx context.Context, run runner, name string) error {
	deadline := time.Now().Add(d.readyTimeout)
	pause := d.readyInterval
	args := []string{"machine", "exec", "--name", name, "--", "true"}
	for attempt := 1; ; attempt++ {
		ectx, cancel := context.WithTimeout(ctx, execTimeout)
		_, err := run.run(ectx, args, nil)
		cancel()
		if err == nil {
			return nil
		}
		var ce *cliError
		if errors.As(err, &ce) && !ce.isRuntimeError() && (ce.Code == 126 || ce.Code == 127) {
			d.log.Warn("the image has no true command; the machine answered exec, so it counts as ready", "name", name, "exit", ce.Code)
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if time.Now().Add(pause).After(deadline) {
			return fmt.Errorf("it did not answer \"smolvm machine exec --name %s -- true\" within %s (%d tries); last: %w", name, d.readyTimeout, attempt, err)
		}
		d.log.Debug("machine not ready yet", "name", name, "attempt", attempt, "error", err)
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		pause = min(pause*2, 2*time.Second)
	}
}
