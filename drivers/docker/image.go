package docker

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/build"
	"github.com/docker/docker/api/types/image"

	"github.com/bottlefile/bottlefile/drivers"
)

// buildImage builds an agent's image through the API with the classic
// builder (the engine may be API 1.41, without BuildKit), from a tar of the
// context that is hashed as it is written: if the context changed since the
// plan, nothing is built.
func (d *Driver) buildImage(ctx context.Context, api dockerAPI, req drivers.ApplyRequest) (drivers.ApplyResponse, error) {
	addr := req.Object.Addr
	o := req.Object
	dir, err1 := drivers.String(attr(o, "context"))
	dockerfile, err2 := drivers.String(attr(o, "dockerfile"))
	planned, err3 := drivers.String(attr(o, "context_hash"))
	for _, e := range []struct {
		name string
		err  error
	}{{"context", err1}, {"dockerfile", err2}, {"context_hash", err3}} {
		if e.err != nil {
			return drivers.ApplyResponse{}, fmt.Errorf("building image for %s: %s: %w", addr, e.name, e.err)
		}
	}
	tag, err := imageTag(req.Lineage, addr, planned)
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
	resp, err := api.ImageBuild(ctx, tmp, build.ImageBuildOptions{
		Tags:        []string{tag},
		Dockerfile:  bc.dockerfile,
		Labels:      ownLabels(req),
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
	return drivers.ApplyResponse{
		ID:       info.ID,
		Computed: map[string]string{"image_id": info.ID, "tag": tag},
	}, nil
}

// deleteImage removes a built image. It is forced (our own stopped
// containers must not keep it), and untagged parents the classic builder
// left behind go with it; an image another running container uses is
// refused by the engine and reported.
func (d *Driver) deleteImage(ctx context.Context, api dockerAPI, req drivers.ApplyRequest) (drivers.ApplyResponse, error) {
	addr := req.Object.Addr
	if req.ID == "" {
		return drivers.ApplyResponse{}, fmt.Errorf("deleting image of %s: no image id", addr)
	}
	_, err := api.ImageRemove(ctx, req.ID, image.RemoveOptions{Force: true, PruneChildren: true})
	if err != nil {
		if cerrdefs.IsNotFound(err) {
			d.log.Debug("image already gone", "addr", addr, "id", shortID(req.ID))
			return drivers.ApplyResponse{}, nil
		}
		return drivers.ApplyResponse{}, fmt.Errorf("deleting image %s of %s: %w", shortID(req.ID), addr, err)
	}
	d.log.Info("deleted image", "addr", addr, "id", shortID(req.ID))
	return drivers.ApplyResponse{}, nil
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
