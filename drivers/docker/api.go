package docker

import (
	"context"
	"io"

	"github.com/docker/docker/api/types/build"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/system"
	"github.com/docker/docker/client"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// dockerAPI is the part of the engine API the driver uses. *client.Client
// satisfies it; tests pass a fake or wrap the real client to count calls.
// Keeping it narrow keeps the driver portable to the moby/moby/client module
// (v29+), whose API differs.
type dockerAPI interface {
	ContainerList(ctx context.Context, options container.ListOptions) ([]container.Summary, error)
	ContainerInspect(ctx context.Context, container string) (container.InspectResponse, error)
	ContainerCreate(ctx context.Context, config *container.Config, hostConfig *container.HostConfig, networkingConfig *network.NetworkingConfig, platform *ocispec.Platform, containerName string) (container.CreateResponse, error)
	ContainerStart(ctx context.Context, container string, options container.StartOptions) error
	ContainerUpdate(ctx context.Context, container string, updateConfig container.UpdateConfig) (container.UpdateResponse, error)
	ContainerRemove(ctx context.Context, container string, options container.RemoveOptions) error
	// For carrying a workspace out of a container being replaced (workspace.go).
	ContainerStop(ctx context.Context, container string, options container.StopOptions) error
	ContainerRename(ctx context.Context, container, newContainerName string) error

	NetworkList(ctx context.Context, options network.ListOptions) ([]network.Summary, error)
	NetworkCreate(ctx context.Context, name string, options network.CreateOptions) (network.CreateResponse, error)
	NetworkRemove(ctx context.Context, network string) error

	ImageList(ctx context.Context, options image.ListOptions) ([]image.Summary, error)
	ImageInspect(ctx context.Context, image string, opts ...client.ImageInspectOption) (image.InspectResponse, error)
	ImagePull(ctx context.Context, ref string, options image.PullOptions) (io.ReadCloser, error)
	ImageBuild(ctx context.Context, buildContext io.Reader, options build.ImageBuildOptions) (build.ImageBuildResponse, error)
	ImageRemove(ctx context.Context, image string, options image.RemoveOptions) ([]image.DeleteResponse, error)

	Info(ctx context.Context) (system.Info, error)
	Close() error

	// For the egress gateway (gateway.go) and logs (logs.go).
	ContainerKill(ctx context.Context, container, signal string) error
	ContainerLogs(ctx context.Context, container string, options container.LogsOptions) (io.ReadCloser, error)
	CopyToContainer(ctx context.Context, container, path string, content io.Reader, options container.CopyToContainerOptions) error
	// For credentials (credentials.go): the image's CA bundle.
	CopyFromContainer(ctx context.Context, container, srcPath string) (io.ReadCloser, container.PathStat, error)
	// For what a container wrote, less the CA files it was given.
	ContainerStatPath(ctx context.Context, container, path string) (container.PathStat, error)
	NetworkConnect(ctx context.Context, network, container string, config *network.EndpointSettings) error
	ImageImport(ctx context.Context, source image.ImportSource, ref string, options image.ImportOptions) (io.ReadCloser, error)
}

var _ dockerAPI = (*client.Client)(nil)
