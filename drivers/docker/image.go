package docker

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/build"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/engine"
)

// buildImage builds an agent's image through the API with the classic
// builder (the engine may be API 1.41, without BuildKit), from a tar of the
// context that is hashed as it is written: if the context changed since the
// plan, nothing is built.
func (d *Driver) buildImage(ctx context.Context, api dockerAPI, req drivers.ApplyRequest) (drivers.ApplyResponse, error) {
	addr := req.Object.Addr
	o := req.Object
	dir, err1 := drivers.String(o.Attr("context"))
	dockerfile, err2 := drivers.String(o.Attr("dockerfile"))
	planned, err3 := drivers.String(o.Attr("context_hash"))
	for _, e := range []struct {
		name string
		err  error
	}{{"context", err1}, {"dockerfile", err2}, {"context_hash", err3}} {
		if e.err != nil {
			return drivers.ApplyResponse{}, fmt.Errorf("building image for %s: %s: %w", addr, e.name, e.err)
		}
	}
	tag, err := engine.ImageTag(req.Lineage, req.NamedAddr(addr), planned)
	if err != nil {
		return drivers.ApplyResponse{}, fmt.Errorf("building image for %s: %w", addr, err)
	}
	fail := func(format string, args ...any) (drivers.ApplyResponse, error) {
		return drivers.ApplyResponse{}, fmt.Errorf("building image %s for %s: %s", tag, addr, fmt.Sprintf(format, args...))
	}

	bc, err := resolveBuildContext(dir, dockerfile)
	if err != nil {
		return fail("%v", err)
	}
	bc.buildOf = req.Lineage

	// One build per distinct context and Dockerfile in a run: the first
	// image object to need it builds, the others wait for it and get a copy
	// of its image under their own tag and labels. The same object made
	// again (a retry) builds again, checking the context again.
	key := buildKey{lineage: req.Lineage, dir: bc.dir, dockerfile: bc.dockerfile, hash: planned}
	d.buildsMu.Lock()
	if d.builds == nil {
		d.builds = map[buildKey]*sharedBuild{}
	}
	if first, ok := d.builds[key]; ok && first.addr != addr {
		d.buildsMu.Unlock()
		select {
		case <-first.done:
		case <-ctx.Done():
			return fail("%v", ctx.Err())
		}
		if first.err != nil {
			return fail("the build of %s, which has the same context and Dockerfile, failed: %v", first.addr, first.err)
		}
		resp, err := d.copyBuiltImage(ctx, api, req, tag, first)
		if err == nil {
			return resp, nil
		}
		d.log.Warn("could not share the image built for another agent; building it again", "addr", addr, "built_for", first.addr, "error", err)
	} else {
		first = &sharedBuild{addr: addr, done: make(chan struct{})}
		d.builds[key] = first
		d.buildsMu.Unlock()
		resp, err := d.buildContext(ctx, api, req, bc, tag, dir, planned)
		first.id, first.err = resp.ID, err
		if err != nil {
			// A later object of the run may try again.
			d.buildsMu.Lock()
			delete(d.builds, key)
			d.buildsMu.Unlock()
		}
		close(first.done)
		return resp, err
	}
	return d.buildContext(ctx, api, req, bc, tag, dir, planned)
}

// buildKey identifies a distinct build of a run: the same context
// directory, Dockerfile and content hash, for the same lineage.
type buildKey struct {
	lineage, dir, dockerfile, hash string
}

// sharedBuild is one build of a run and its result, which the image
// objects with the same buildKey share.
type sharedBuild struct {
	addr string // the image object that built it
	done chan struct{}
	id   string // the image built, once done is closed
	err  error
}

// copyBuiltImage gives an image object the image another object of the
// run built from the same context: the same layers and config, with this
// object's labels, loaded under its tag (no build, no layer copied).
func (d *Driver) copyBuiltImage(ctx context.Context, api dockerAPI, req drivers.ApplyRequest, tag string, first *sharedBuild) (drivers.ApplyResponse, error) {
	loader, ok := api.(imageLoader)
	if !ok {
		return drivers.ApplyResponse{}, fmt.Errorf("the docker client in use (%T) cannot load images", api)
	}
	imageMaking.RLock()
	defer imageMaking.RUnlock()
	info, err := api.ImageInspect(ctx, first.id)
	if err != nil {
		return drivers.ApplyResponse{}, fmt.Errorf("inspecting the image built for %s: %w", first.addr, err)
	}
	labels := req.Labels()
	labels[labelBuildOf] = req.Lineage
	note := "bottlefile: built once for " + first.addr + " and shared"
	cfg, err := snapshotImageConfig(&info, info, labels, note, note, time.Now())
	if err != nil {
		return drivers.ApplyResponse{}, err
	}
	id, err := loadImageConfig(ctx, loader, cfg, tag, len(info.RootFS.Layers))
	if err != nil {
		return drivers.ApplyResponse{}, err
	}
	d.log.Info("shared a built image", "addr", req.Object.Addr, "tag", tag, "id", shortID(id), "built_for", first.addr)
	return drivers.ApplyResponse{
		ID:       id,
		Computed: map[string]string{"image_id": id, "tag": tag},
	}, nil
}

// buildContext builds an image from a build context, checking as it sends
// the context that it is the one planned.
func (d *Driver) buildContext(ctx context.Context, api dockerAPI, req drivers.ApplyRequest, bc buildContext, tag, dir, planned string) (drivers.ApplyResponse, error) {
	addr := req.Object.Addr
	fail := func(format string, args ...any) (drivers.ApplyResponse, error) {
		return drivers.ApplyResponse{}, fmt.Errorf("building image %s for %s: %s", tag, addr, fmt.Sprintf(format, args...))
	}
	tmp, err := os.CreateTemp("", "bottlefile-context-*.tar")
	if err != nil {
		return fail("%v", err)
	}
	defer func() {
		tmp.Close()
		os.Remove(tmp.Name())
	}()
	sum, err := tarContext(bc, tmp)
	if err != nil {
		return fail("%v", err)
	}
	if sum != planned {
		return fail("the build context %s changed since the plan (hash %s, planned %s); plan again", dir, shortHash(sum), shortHash(planned))
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return fail("%v", err)
	}

	d.log.Info("building image", "addr", addr, "tag", tag, "context", bc.dir)
	built := false
	defer func() {
		if !built {
			// A failed or cut-off build leaves its steps' images behind.
			d.sweepSnapshots(ctx, api, req.Lineage)
		}
	}()
	imageMaking.RLock() // the engine makes the image, then tags it
	defer imageMaking.RUnlock()
	resp, err := api.ImageBuild(ctx, tmp, build.ImageBuildOptions{
		Tags:        []string{tag},
		Dockerfile:  bc.dockerfile,
		Labels:      req.Labels(),
		Remove:      true,
		ForceRemove: true,
		Version:     build.BuilderV1,
	})
	if err != nil {
		return fail("%v", err)
	}
	res, err := readStream(resp.Body)
	resp.Body.Close()
	if err != nil {
		if len(res.tail) > 0 {
			return fail("%v\n  build output ended with:\n    %s", err, strings.Join(res.tail, "\n    "))
		}
		return fail("%v", err)
	}
	info, err := api.ImageInspect(ctx, tag)
	if err != nil {
		return fail("inspecting the built image: %v", err)
	}
	d.log.Info("built image", "addr", addr, "tag", tag, "id", shortID(info.ID))
	built = true
	return drivers.ApplyResponse{
		ID:       info.ID,
		Computed: map[string]string{"image_id": info.ID, "tag": tag},
	}, nil
}

// deleteImage removes a built image. It is forced (our own stopped
// containers must not keep it), and untagged parents the classic builder
// left behind go with it. An image the engine cannot remove yet (a running
// container uses it, or snapshots taken before they were made without a
// parent were committed on top of it) is only untagged: it stays while it
// is needed, and a sweep removes it after. An image removed meanwhile by a
// parallel delete is no error.
func (d *Driver) deleteImage(ctx context.Context, api dockerAPI, req drivers.ApplyRequest) (drivers.ApplyResponse, error) {
	addr := req.Object.Addr
	if req.ID == "" {
		return drivers.ApplyResponse{}, fmt.Errorf("deleting image of %s: no image id", addr)
	}
	defer d.sweepSnapshots(ctx, api, req.Lineage)
	// Not while this process builds: pruning the untagged parents of an
	// image (a leftover of a cut-off build) can take a step image another
	// build of the same context is using from the cache ("failed to get
	// digest"). Deferred after the sweep, so it is released before it.
	imageMaking.Lock()
	defer imageMaking.Unlock()
	_, err := api.ImageRemove(ctx, req.ID, image.RemoveOptions{Force: true, PruneChildren: true})
	if err == nil {
		d.log.Info("deleted image", "addr", addr, "id", shortID(req.ID))
		return drivers.ApplyResponse{}, nil
	}
	info, ierr := api.ImageInspect(ctx, req.ID)
	if isGone(err) || cerrdefs.IsNotFound(ierr) {
		// Gone, or removed and a parallel delete pruned a shared parent
		// first.
		d.log.Debug("image already gone", "addr", addr, "id", shortID(req.ID), "error", err)
		return drivers.ApplyResponse{}, nil
	}
	if !cerrdefs.IsConflict(err) || ierr != nil {
		return drivers.ApplyResponse{}, fmt.Errorf("deleting image %s of %s: %w", shortID(req.ID), addr, err)
	}
	repo, rerr := engine.ImageRepo(req.Lineage, req.NamedAddr(addr))
	if rerr != nil {
		return drivers.ApplyResponse{}, fmt.Errorf("deleting image %s of %s: %w", shortID(req.ID), addr, rerr)
	}
	for _, tag := range info.RepoTags {
		if r, _, _ := strings.Cut(tag, ":"); r != repo {
			continue
		}
		if err := removeImage(ctx, api, tag, true); err != nil {
			return drivers.ApplyResponse{}, fmt.Errorf("deleting image %s of %s: untagging %s: %w", shortID(req.ID), addr, tag, err)
		}
	}
	d.log.Info("untagged image; the engine keeps it while it is needed", "addr", addr, "id", shortID(req.ID), "reason", err)
	return drivers.ApplyResponse{}, nil
}

// labelBuildOf is on every image and container a build makes: the
// Dockerfile sent has "LABEL io.bottlefile.build-of=<lineage>" after each
// FROM, because the classic builder's intermediates carry no other label.
// A build cut off mid-way leaves them (its last step untagged), and the
// sweep removes them. The built image and containers created from it
// carry it too, with the lineage label, which leftovers have not.
const labelBuildOf = drivers.LabelPrefix + "build-of"

// sweepBuildLeftovers removes what builds of the lineage cut off mid-way
// left: stopped builder containers and untagged images with labelBuildOf
// and no lineage label (with their untagged parents). The caller holds
// imageMaking exclusively, so no build of this process is running.
func (d *Driver) sweepBuildLeftovers(ctx context.Context, api dockerAPI, lineage string) {
	byBuild := filters.NewArgs(filters.Arg("label", labelBuildOf+"="+lineage))
	ctrs, err := api.ContainerList(ctx, container.ListOptions{All: true, Filters: byBuild})
	if err != nil {
		d.log.Debug("listing build leftovers", "error", err)
		return
	}
	for _, c := range ctrs {
		if c.Labels[drivers.LabelLineage] != "" || c.State == container.StateRunning {
			continue
		}
		if err := api.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true}); err != nil && !cerrdefs.IsNotFound(err) {
			d.log.Debug("could not remove a builder container left by a cut-off build", "id", shortID(c.ID), "error", err)
		}
	}
	byBuild.Add("dangling", "true")
	imgs, err := api.ImageList(ctx, image.ListOptions{Filters: byBuild})
	if err != nil {
		d.log.Debug("listing build leftovers", "error", err)
		return
	}
	for _, img := range imgs {
		if hasTags(img.RepoTags) || img.Labels[drivers.LabelLineage] != "" {
			continue
		}
		_, err := api.ImageRemove(ctx, img.ID, image.RemoveOptions{PruneChildren: true})
		switch {
		case err == nil:
			d.log.Debug("removed an image left by a cut-off build", "id", shortID(img.ID))
		case isGone(err) || cerrdefs.IsConflict(err):
		default:
			d.log.Debug("could not remove an image left by a cut-off build", "id", shortID(img.ID), "error", err)
		}
	}
}

// ensureImage makes sure ref is on the engine and returns its id. A built
// image must already be there (its image object was applied first); a
// reference is pulled when missing. Errors name the image; the caller names
// the object.
func (d *Driver) ensureImage(ctx context.Context, api dockerAPI, addr, ref string, built bool) (string, error) {
	info, err := api.ImageInspect(ctx, ref)
	if err == nil {
		return info.ID, nil
	}
	if !cerrdefs.IsNotFound(err) {
		return "", fmt.Errorf("inspecting image %q: %w", ref, err)
	}
	if built {
		return "", fmt.Errorf("the built image %q is not on the engine (removed outside bottlefile?); plan and apply again to rebuild it", ref)
	}
	d.log.Info("pulling image", "addr", addr, "image", ref)
	body, err := api.ImagePull(ctx, ref, image.PullOptions{})
	if err == nil {
		_, err = readStream(body)
		body.Close()
	}
	if err != nil {
		return "", fmt.Errorf("image %q is not on the engine and pulling it failed: %w (where no registry is reachable, build the image locally or docker load it)", ref, err)
	}
	info, err = api.ImageInspect(ctx, ref)
	if err != nil {
		return "", fmt.Errorf("inspecting image %q after pulling it: %w", ref, err)
	}
	return info.ID, nil
}
