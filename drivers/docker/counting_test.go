package docker

import (
	"context"
	"errors"
	"io"
	"maps"
	"slices"
	"sync"

	cerrdefs "github.com/containerd/errdefs"

	"github.com/docker/docker/api/types/build"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/system"
	"github.com/docker/docker/client"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// countingAPI wraps the real client and counts every call by method.
type countingAPI struct {
	api dockerAPI

	mu     sync.Mutex // guards counts and imagesRemoved
	counts map[string]int
	// imagesRemoved is every ref ImageRemove was asked for, in order.
	imagesRemoved []string
}

// removedImage says whether ImageRemove was asked for ref.
func (c *countingAPI) removedImage(ref string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Contains(c.imagesRemoved, ref)
}

var _ dockerAPI = (*countingAPI)(nil)

func (c *countingAPI) count(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.counts == nil {
		c.counts = map[string]int{}
	}
	c.counts[name]++
}

// take returns the counts so far and starts again from zero.
func (c *countingAPI) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := maps.Clone(c.counts)
	if out == nil {
		out = map[string]int{}
	}
	c.counts = nil
	return out
}

func (c *countingAPI) ContainerList(ctx context.Context, o container.ListOptions) ([]container.Summary, error) {
	c.count("ContainerList")
	return c.api.ContainerList(ctx, o)
}

func (c *countingAPI) ContainerInspect(ctx context.Context, id string) (container.InspectResponse, error) {
	c.count("ContainerInspect")
	return c.api.ContainerInspect(ctx, id)
}

// ContainerCreate also counts, as "ContainerCreate NotFound", the creates
// the engine refused for a missing image: another process's sweep can
// take a shared image between its import and its use.
func (c *countingAPI) ContainerCreate(ctx context.Context, cfg *container.Config, h *container.HostConfig, n *network.NetworkingConfig, p *ocispec.Platform, name string) (container.CreateResponse, error) {
	c.count("ContainerCreate")
	resp, err := c.api.ContainerCreate(ctx, cfg, h, n, p, name)
	if cerrdefs.IsNotFound(err) {
		c.count("ContainerCreate NotFound")
	}
	return resp, err
}

func (c *countingAPI) ContainerStart(ctx context.Context, id string, o container.StartOptions) error {
	c.count("ContainerStart")
	return c.api.ContainerStart(ctx, id, o)
}

func (c *countingAPI) ContainerUpdate(ctx context.Context, id string, u container.UpdateConfig) (container.UpdateResponse, error) {
	c.count("ContainerUpdate")
	return c.api.ContainerUpdate(ctx, id, u)
}

func (c *countingAPI) ContainerRemove(ctx context.Context, id string, o container.RemoveOptions) error {
	c.count("ContainerRemove")
	return c.api.ContainerRemove(ctx, id, o)
}

func (c *countingAPI) NetworkList(ctx context.Context, o network.ListOptions) ([]network.Summary, error) {
	c.count("NetworkList")
	return c.api.NetworkList(ctx, o)
}

func (c *countingAPI) NetworkCreate(ctx context.Context, name string, o network.CreateOptions) (network.CreateResponse, error) {
	c.count("NetworkCreate")
	return c.api.NetworkCreate(ctx, name, o)
}

func (c *countingAPI) NetworkRemove(ctx context.Context, id string) error {
	c.count("NetworkRemove")
	return c.api.NetworkRemove(ctx, id)
}

func (c *countingAPI) ImageList(ctx context.Context, o image.ListOptions) ([]image.Summary, error) {
	c.count("ImageList")
	return c.api.ImageList(ctx, o)
}

func (c *countingAPI) ImageInspect(ctx context.Context, ref string, o ...client.ImageInspectOption) (image.InspectResponse, error) {
	c.count("ImageInspect")
	return c.api.ImageInspect(ctx, ref, o...)
}

func (c *countingAPI) ImagePull(ctx context.Context, ref string, o image.PullOptions) (io.ReadCloser, error) {
	c.count("ImagePull")
	return c.api.ImagePull(ctx, ref, o)
}

func (c *countingAPI) ImageBuild(ctx context.Context, r io.Reader, o build.ImageBuildOptions) (build.ImageBuildResponse, error) {
	c.count("ImageBuild")
	return c.api.ImageBuild(ctx, r, o)
}

// ImageLoad passes through when the wrapped client can load (the real one
// can), so a build shared by agents is counted as one build and loads.
func (c *countingAPI) ImageLoad(ctx context.Context, r io.Reader, o ...client.ImageLoadOption) (image.LoadResponse, error) {
	c.count("ImageLoad")
	l, ok := c.api.(imageLoader)
	if !ok {
		return image.LoadResponse{}, errors.New("the wrapped client cannot load images")
	}
	return l.ImageLoad(ctx, r, o...)
}

func (c *countingAPI) ImageRemove(ctx context.Context, ref string, o image.RemoveOptions) ([]image.DeleteResponse, error) {
	c.count("ImageRemove")
	c.mu.Lock()
	c.imagesRemoved = append(c.imagesRemoved, ref)
	c.mu.Unlock()
	return c.api.ImageRemove(ctx, ref, o)
}

func (c *countingAPI) Info(ctx context.Context) (system.Info, error) {
	c.count("Info")
	return c.api.Info(ctx)
}

func (c *countingAPI) Close() error { return c.api.Close() }
