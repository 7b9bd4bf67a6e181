package nodesnap

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/opencontainers/go-digest"

	"github.com/bottlefile/bottlefile/drivers"
)

// Export writes the image dgst of repo in the registry to w as a
// docker-save tar (what `docker load` and the docker driver's snapshot
// import read), with no tag in it. Its layers go as the registry holds
// them when all are gzip (as docker load takes them), and all gzip when
// some are plain tars (a snapshot of an image imported as a docker-save
// tar): a reader of the tar (go-containerregistry's) looks at the first
// layer to tell whether all are compressed.
func Export(ctx context.Context, reg Registry, repo, dgst string, w io.Writer) error {
	r, err := reg.repo(repo)
	if err != nil {
		return err
	}
	if _, err := digest.Parse(dgst); err != nil {
		return fmt.Errorf("%q is not a manifest digest: %w", dgst, err)
	}
	ref := r.Digest(dgst)
	img, err := remote.Image(ref, remoteOptions(ctx)...)
	if err != nil {
		return fmt.Errorf("reading %s: %w", ref, err)
	}
	if img, err = uniformLayers(img); err != nil {
		return fmt.Errorf("reading %s: %w", ref, err)
	}
	if err := tarball.Write(ref, img, w); err != nil {
		return fmt.Errorf("writing %s as a docker-save tar: %w", ref, err)
	}
	return nil
}

// Import reads a docker-save tar of one image (a snapshot another runtime
// exported) from r, gives its config the labels (bottlefile's labels the
// image had are dropped first, the user's kept), pushes it to repo by
// digest (tagged too when tag is set) and returns the manifest's digest.
// The tar is spooled to a temporary file first: its parts are read more
// than once and in another order than the stream's.
func Import(ctx context.Context, reg Registry, repo, tag string, r io.Reader, labels map[string]string) (string, error) {
	rp, err := reg.repo(repo)
	if err != nil {
		return "", err
	}
	if tag != "" && !validTag.MatchString(tag) {
		return "", fmt.Errorf("tag %q is not a registry tag", tag)
	}
	f, err := os.CreateTemp("", "bottlefile-import-*.tar")
	if err != nil {
		return "", err
	}
	defer func() { f.Close(); os.Remove(f.Name()) }()
	if _, err := io.Copy(f, r); err != nil {
		return "", fmt.Errorf("reading the image's tar: %w", err)
	}
	img, err := tarball.ImageFromPath(f.Name(), nil)
	if err != nil {
		return "", fmt.Errorf("reading the image's tar (a docker-save tar of one image?): %w", err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return "", fmt.Errorf("reading the image's config: %w", err)
	}
	cfg = cfg.DeepCopy()
	out := map[string]string{}
	for k, v := range cfg.Config.Labels {
		if !strings.HasPrefix(k, drivers.LabelPrefix) {
			out[k] = v
		}
	}
	for k, v := range labels {
		out[k] = v
	}
	cfg.Config.Labels = out
	img, err = mutate.ConfigFile(img, cfg)
	if err != nil {
		return "", err
	}
	d, err := img.Digest()
	if err != nil {
		return "", fmt.Errorf("reading the image's layers: %w", err)
	}
	ref := rp.Digest(d.String())
	if err := remote.Write(ref, img, remoteOptions(ctx)...); err != nil {
		return "", fmt.Errorf("pushing %s: %w", ref, err)
	}
	if tag != "" {
		if err := remote.Tag(rp.Tag(tag), img, remoteOptions(ctx)...); err != nil {
			return "", fmt.Errorf("tagging %s as %s: %w", ref, tag, err)
		}
	}
	return d.String(), nil
}

// ContainerID is the containerd id of a Pod's container from its status
// (Pod.Status.ContainerStatuses[].ContainerID, "containerd://ID"): what
// Commit takes. A container of another runtime, or none yet, is an
// error.
func ContainerID(statusID string) (string, error) {
	if statusID == "" {
		return "", errors.New("the container has no id yet (not started?)")
	}
	rt, id, ok := strings.Cut(statusID, "://")
	if !ok || id == "" {
		return "", fmt.Errorf("container id %q is not RUNTIME://ID", statusID)
	}
	if rt != "containerd" {
		return "", fmt.Errorf("container %s runs under %s, not containerd: snapshots need the node's containerd", id, rt)
	}
	return id, nil
}

// uniformLayers is img with every layer gzip when some are and some are
// not.
func uniformLayers(img v1.Image) (v1.Image, error) {
	layers, err := img.Layers()
	if err != nil {
		return nil, err
	}
	plain := 0
	for _, l := range layers {
		mt, err := l.MediaType()
		if err != nil {
			return nil, err
		}
		if mt == types.DockerUncompressedLayer || mt == types.OCIUncompressedLayer {
			plain++
		}
	}
	if plain == 0 || plain == len(layers) {
		return img, nil
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	adds := make([]mutate.Addendum, len(layers))
	for i, l := range layers {
		mt, _ := l.MediaType()
		if mt == types.DockerUncompressedLayer || mt == types.OCIUncompressedLayer {
			if l, err = tarball.LayerFromOpener(l.Uncompressed); err != nil {
				return nil, err
			}
		}
		adds[i] = mutate.Addendum{Layer: l}
	}
	out, err := mutate.Append(empty.Image, adds...)
	if err != nil {
		return nil, err
	}
	return mutate.ConfigFile(out, cfg)
}
