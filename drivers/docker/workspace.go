package docker

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"

	"github.com/bottlefile/bottlefile/drivers"
)

// Workspaces (drivers.Carry): a workload created with a new image gets
// the agent's workspace paths copied in before it starts, through the
// archive API, which streams a tar with owners, modes and symlinks as
// they are. The source is either a snapshot image, read through a
// container created (never started) from it and removed after, or the
// container being replaced, which is stopped and renamed out of the way
// first and removed by the delete that follows the create: if apply is
// cut off mid-way, the old container, still recorded, holds the work,
// and the next apply carries it again.

// labelCarry marks the container a snapshot's workspace is read through,
// with the lineage and address it is for as its value. It carries no
// lineage label, so no refresh mistakes it for a workload; a sweep
// removes one left by a cut-off apply (sweepCarriers).
const labelCarry = drivers.LabelPrefix + "carry"

// carrierAge is how old a carrier must be for a sweep to remove it: no
// copy runs that long, and a younger one may be in use.
const carrierAge = time.Hour

// replacedSuffix is added to the name of a container being replaced while
// its workspace is carried out of it.
const replacedSuffix = "-replaced"

// setAside stops the container being replaced and renames it, so that its
// successor can take its name; it returns the id to copy from.
func (d *Driver) setAside(ctx context.Context, api dockerAPI, req drivers.ApplyRequest, name string) (string, error) {
	old, err := api.ContainerInspect(ctx, req.Carry.Workload)
	if err != nil {
		return "", fmt.Errorf("the container %s to carry %s from: %w", shortID(req.Carry.Workload), strings.Join(req.Carry.Paths, ", "), err)
	}
	if old.Config == nil || old.Config.Labels[drivers.LabelLineage] != req.Lineage {
		return "", fmt.Errorf("the container %s to carry the workspace from does not belong to this state", shortID(old.ID))
	}
	timeout := 10
	if err := api.ContainerStop(ctx, old.ID, container.StopOptions{Timeout: &timeout}); err != nil && !cerrdefs.IsNotFound(err) {
		return "", fmt.Errorf("stopping %s to carry its workspace: %w", shortID(old.ID), err)
	}
	aside := name + replacedSuffix
	if trimSlash(old.Name) == aside {
		return old.ID, nil // set aside by an apply that was cut off
	}
	if prev, err := api.ContainerInspect(ctx, aside); err == nil && prev.ID != old.ID {
		if prev.Config == nil || prev.Config.Labels[drivers.LabelLineage] != req.Lineage {
			return "", fmt.Errorf("a container named %s exists and does not belong to this state; remove or rename it", aside)
		}
		if err := api.ContainerRemove(ctx, prev.ID, container.RemoveOptions{Force: true, RemoveVolumes: true}); err != nil && !cerrdefs.IsNotFound(err) {
			return "", fmt.Errorf("removing %s, left by an earlier replacement: %w", aside, err)
		}
	}
	if err := api.ContainerRename(ctx, old.ID, aside); err != nil {
		return "", fmt.Errorf("renaming %s to %s: %w", shortID(old.ID), aside, err)
	}
	d.log.Info("set the replaced container aside to carry its workspace", "addr", req.Object.Addr, "id", shortID(old.ID), "name", aside)
	return old.ID, nil
}

// putBack gives a container set aside its name again when its successor
// could not be made: it stays the recorded workload, stopped.
func (d *Driver) putBack(ctx context.Context, api dockerAPI, id, name string) {
	if err := api.ContainerRename(context.WithoutCancel(ctx), id, name); err != nil {
		d.log.Warn("could not give the replaced container its name back", "id", shortID(id), "name", name, "error", err)
	}
}

// carryWorkspace copies the workspace into the created container dst,
// from the container src set aside, or from req.Carry.Image through a
// carrier container.
func (d *Driver) carryWorkspace(ctx context.Context, api dockerAPI, req drivers.ApplyRequest, src, dst string) error {
	if src == "" {
		carrier, err := d.createCarrier(ctx, api, req)
		if err != nil {
			return err
		}
		defer func() {
			if err := api.ContainerRemove(context.WithoutCancel(ctx), carrier, container.RemoveOptions{Force: true, RemoveVolumes: true}); err != nil && !cerrdefs.IsNotFound(err) {
				d.log.Warn("could not remove the container a snapshot's workspace was read through; a later sweep removes it", "id", shortID(carrier), "error", err)
			}
		}()
		src = carrier
	}
	return CopyPaths(ctx, api, src, dst, req.Carry.Paths)
}

// createCarrier creates, without starting it, a container of the snapshot
// image to read its workspace through.
func (d *Driver) createCarrier(ctx context.Context, api dockerAPI, req drivers.ApplyRequest) (string, error) {
	d.sweepCarriers(ctx, api, req.Lineage, req.Object.Addr)
	cfg := &container.Config{
		Image: req.Carry.Image,
		// Never started: only something to read files through.
		Entrypoint: []string{"/bottlefile-carrier-never-runs"},
		Labels:     map[string]string{labelCarry: req.Lineage + " " + req.Object.Addr},
	}
	created, err := api.ContainerCreate(ctx, cfg, &container.HostConfig{NetworkMode: "none"}, nil, nil, "")
	if err != nil {
		return "", fmt.Errorf("reading the workspace of snapshot image %s: %w", req.Carry.Image, err)
	}
	return created.ID, nil
}

// sweepCarriers removes carriers of the lineage a cut-off apply left:
// those of addr whatever their age (one apply of a state at a time, and
// one create of an address in it), or with addr "" those older than
// carrierAge.
func (d *Driver) sweepCarriers(ctx context.Context, api dockerAPI, lineage, addr string) {
	list, err := api.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", labelCarry))})
	if err != nil {
		d.log.Debug("listing carrier containers", "error", err)
		return
	}
	for _, c := range list {
		of, at, _ := strings.Cut(c.Labels[labelCarry], " ")
		if of != lineage || (addr != "" && at != addr) || (addr == "" && time.Since(time.Unix(c.Created, 0)) < carrierAge) {
			continue
		}
		if err := api.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true, RemoveVolumes: true}); err != nil && !cerrdefs.IsNotFound(err) {
			d.log.Debug("could not remove a carrier container", "id", shortID(c.ID), "error", err)
		}
	}
}

// copyAPI is what CopyPaths needs of an engine.
type copyAPI interface {
	CopyFromContainer(ctx context.Context, container, srcPath string) (io.ReadCloser, container.PathStat, error)
	CopyToContainer(ctx context.Context, container, path string, content io.Reader, options container.CopyToContainerOptions) error
}

// CopyPaths copies each absolute path from container src into container
// dst at the same place, streaming: owners, modes, times and symlinks as
// the tar has them (no CopyUIDGID, which would give everything to dst's
// user), missing parents made. A path src lacks is skipped: there is
// nothing of it to carry.
func CopyPaths(ctx context.Context, api copyAPI, src, dst string, paths []string) error {
	for _, p := range paths {
		rc, _, err := api.CopyFromContainer(ctx, src, p)
		if cerrdefs.IsNotFound(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("reading %s from %s: %w", p, shortID(src), err)
		}
		pr, pw := io.Pipe()
		go func() {
			pw.CloseWithError(reroot(tar.NewReader(rc), pw, path.Dir(p)))
			rc.Close()
		}()
		// Extracted at "/", with every name below p's parent, so that a
		// parent the new image lacks is made.
		err = api.CopyToContainer(ctx, dst, "/", pr, container.CopyToContainerOptions{})
		pr.CloseWithError(errors.New("copy ended"))
		if err != nil {
			return fmt.Errorf("writing %s into %s: %w", p, shortID(dst), err)
		}
	}
	return nil
}

// reroot copies a tar stream whose names are relative to dir so that
// they are relative to "/": a hard link's target too (a symlink's is the
// link's own business).
func reroot(tr *tar.Reader, w io.Writer, dir string) error {
	prefix := strings.TrimPrefix(path.Clean(dir), "/")
	if prefix != "" {
		prefix += "/"
	}
	tw := tar.NewWriter(w)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		hdr.Name = prefix + strings.TrimPrefix(hdr.Name, "/")
		if hdr.Typeflag == tar.TypeLink {
			hdr.Linkname = prefix + strings.TrimPrefix(hdr.Linkname, "/")
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if _, err := io.Copy(tw, tr); err != nil {
			return err
		}
	}
	return tw.Close()
}

// ComposeWorkspace makes, on this driver's engine, the image a workload
// with a carried workspace boots on an engine that cannot copy files into
// it before it starts (a swarm task): base (pulled when missing) with
// req.Carry's paths copied in, from the container src on this engine, or
// when src is "" from req.Carry.Image (pulled when missing) through a
// carrier. It is committed, with base's config, as ref; the caller pushes
// it and removes the tag. What it creates on the way is removed, and
// labelled so a sweep removes what a cut-off apply left.
func (d *Driver) ComposeWorkspace(ctx context.Context, req drivers.ApplyRequest, base, src, ref string) error {
	api, _, err := d.snapshotEngine(ctx)
	if err != nil {
		return err
	}
	addr := req.Object.Addr
	if _, err := d.ensureImage(ctx, api, addr, base, false); err != nil {
		return err
	}
	remove := func(id string) {
		if err := api.ContainerRemove(context.WithoutCancel(ctx), id, container.RemoveOptions{Force: true, RemoveVolumes: true}); err != nil && !cerrdefs.IsNotFound(err) {
			d.log.Warn("could not remove a container the workspace was carried through; a later sweep removes it", "id", shortID(id), "error", err)
		}
	}
	if src == "" {
		if _, err := d.ensureImage(ctx, api, addr, req.Carry.Image, false); err != nil {
			return err
		}
		carrier, err := d.createCarrier(ctx, api, req)
		if err != nil {
			return err
		}
		defer remove(carrier)
		src = carrier
	}
	info, err := api.ImageInspect(ctx, base)
	if err != nil {
		return fmt.Errorf("inspecting %s: %w", base, err)
	}
	// The image's own config is what the commit keeps, but not base's
	// bottlefile labels, blanked (the engine merges a container's labels
	// into the commit's): the composed image is no built image, which a
	// delete of the image object by its labels would take while a task
	// runs it. It is marked as what it is.
	labels := map[string]string{labelCarry: req.Lineage + " " + addr}
	if c := info.Config; c != nil {
		for k, v := range c.Labels {
			if strings.HasPrefix(k, drivers.LabelPrefix) && k != labelCarry {
				v = ""
			}
			labels[k] = v
		}
	}
	target, err := api.ContainerCreate(ctx, &container.Config{Image: base, Labels: labels},
		&container.HostConfig{NetworkMode: "none"}, nil, nil, "")
	if err != nil {
		return fmt.Errorf("creating a container of %s to carry the workspace into: %w", base, err)
	}
	defer remove(target.ID)
	if err := CopyPaths(ctx, api, src, target.ID, req.Carry.Paths); err != nil {
		return err
	}
	cfg := &container.Config{Labels: labels}
	if c := info.Config; c != nil {
		cfg = &container.Config{
			User: c.User, Env: c.Env, Cmd: c.Cmd, Entrypoint: c.Entrypoint, WorkingDir: c.WorkingDir,
			Labels: labels, StopSignal: c.StopSignal, Volumes: c.Volumes,
			Healthcheck: c.Healthcheck, Shell: c.Shell, OnBuild: c.OnBuild,
		}
	}
	if _, err := api.ContainerCommit(ctx, target.ID, container.CommitOptions{Reference: ref, Config: cfg, Pause: false}); err != nil {
		return fmt.Errorf("committing %s with the workspace: %w", base, err)
	}
	return nil
}
