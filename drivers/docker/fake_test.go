package docker

import (
	"context"
	"fmt"
	"io"
	"sync"

	"github.com/docker/docker/api/types/build"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/system"
	"github.com/docker/docker/client"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// fakeAPI is a hand-written dockerAPI: each call is recorded, and answered
// by its XFn when set, else with an error naming the unexpected call.
type fakeAPI struct {
	mu    sync.Mutex // guards Calls
	Calls []string

	ContainerListFn    func(container.ListOptions) ([]container.Summary, error)
	ContainerInspectFn func(string) (container.InspectResponse, error)
	NetworkListFn      func(network.ListOptions) ([]network.Summary, error)
	NetworkCreateFn    func(string, network.CreateOptions) (network.CreateResponse, error)
	NetworkRemoveFn    func(string) error
	ImageListFn        func(image.ListOptions) ([]image.Summary, error)
	ContainerRemoveFn  func(string, container.RemoveOptions) error
	ImageRemoveFn      func(string, image.RemoveOptions) ([]image.DeleteResponse, error)
	ImageInspectFn     func(string) (image.InspectResponse, error)
	ContainerCreateFn  func(*container.Config, string) (container.CreateResponse, error)
	CopyToContainerFn  func(id, path string) error
	// CopyFromContainerFn answers CopyFromContainer: the file's content.
	CopyFromContainerFn func(id, path string) ([]byte, error)
	// ContainerLogsFn answers ContainerLogs: what the container wrote on
	// stdout and on stderr, multiplexed as the engine sends them.
	ContainerLogsFn func(id string, o container.LogsOptions) (stdout, stderr string, err error)
	ContainerKillFn func(id, signal string) error
	// ContainerStatPathFn answers ContainerStatPath.
	ContainerStatPathFn func(id, path string) (container.PathStat, error)
	// InfoFn answers Info.
	InfoFn func() (system.Info, error)
}

var _ dockerAPI = (*fakeAPI)(nil)

func (f *fakeAPI) record(name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Calls = append(f.Calls, name)
}

func (f *fakeAPI) calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.Calls...)
}

func unexpected(name string) error { return fmt.Errorf("fakeAPI: unexpected call %s", name) }

func (f *fakeAPI) ContainerList(_ context.Context, o container.ListOptions) ([]container.Summary, error) {
	f.record("ContainerList")
	if f.ContainerListFn != nil {
		return f.ContainerListFn(o)
	}
	return nil, unexpected("ContainerList")
}

func (f *fakeAPI) ContainerInspect(_ context.Context, id string) (container.InspectResponse, error) {
	f.record("ContainerInspect")
	if f.ContainerInspectFn != nil {
		return f.ContainerInspectFn(id)
	}
	return container.InspectResponse{}, unexpected("ContainerInspect")
}

func (f *fakeAPI) ContainerCreate(_ context.Context, cfg *container.Config, _ *container.HostConfig, _ *network.NetworkingConfig, _ *ocispec.Platform, name string) (container.CreateResponse, error) {
	f.record("ContainerCreate")
	if f.ContainerCreateFn != nil {
		return f.ContainerCreateFn(cfg, name)
	}
	return container.CreateResponse{}, unexpected("ContainerCreate")
}

func (f *fakeAPI) ContainerStart(context.Context, string, container.StartOptions) error {
	f.record("ContainerStart")
	return unexpected("ContainerStart")
}

func (f *fakeAPI) ContainerUpdate(context.Context, string, container.UpdateConfig) (container.UpdateResponse, error) {
	f.record("ContainerUpdate")
	return container.UpdateResponse{}, unexpected("ContainerUpdate")
}

func (f *fakeAPI) ContainerRemove(_ context.Context, id string, o container.RemoveOptions) error {
	f.record("ContainerRemove")
	if f.ContainerRemoveFn != nil {
		return f.ContainerRemoveFn(id, o)
	}
	return unexpected("ContainerRemove")
}

func (f *fakeAPI) NetworkList(_ context.Context, o network.ListOptions) ([]network.Summary, error) {
	f.record("NetworkList")
	if f.NetworkListFn != nil {
		return f.NetworkListFn(o)
	}
	return nil, unexpected("NetworkList")
}

func (f *fakeAPI) NetworkCreate(_ context.Context, name string, o network.CreateOptions) (network.CreateResponse, error) {
	f.record("NetworkCreate")
	if f.NetworkCreateFn != nil {
		return f.NetworkCreateFn(name, o)
	}
	return network.CreateResponse{}, unexpected("NetworkCreate")
}

func (f *fakeAPI) NetworkRemove(_ context.Context, id string) error {
	f.record("NetworkRemove")
	if f.NetworkRemoveFn != nil {
		return f.NetworkRemoveFn(id)
	}
	return unexpected("NetworkRemove")
}

func (f *fakeAPI) ImageList(_ context.Context, o image.ListOptions) ([]image.Summary, error) {
	f.record("ImageList")
	if f.ImageListFn != nil {
		return f.ImageListFn(o)
	}
	return nil, unexpected("ImageList")
}

func (f *fakeAPI) ImageInspect(_ context.Context, ref string, _ ...client.ImageInspectOption) (image.InspectResponse, error) {
	f.record("ImageInspect")
	if f.ImageInspectFn != nil {
		return f.ImageInspectFn(ref)
	}
	return image.InspectResponse{}, unexpected("ImageInspect")
}

func (f *fakeAPI) ImagePull(context.Context, string, image.PullOptions) (io.ReadCloser, error) {
	f.record("ImagePull")
	return nil, unexpected("ImagePull")
}

func (f *fakeAPI) ImageBuild(context.Context, io.Reader, build.ImageBuildOptions) (build.ImageBuildResponse, error) {
	f.record("ImageBuild")
	return build.ImageBuildResponse{}, unexpected("ImageBuild")
}

func (f *fakeAPI) ImageRemove(_ context.Context, ref string, o image.RemoveOptions) ([]image.DeleteResponse, error) {
	f.record("ImageRemove")
	if f.ImageRemoveFn != nil {
		return f.ImageRemoveFn(ref, o)
	}
	return nil, unexpected("ImageRemove")
}

func (f *fakeAPI) Info(context.Context) (system.Info, error) {
	f.record("Info")
	if f.InfoFn != nil {
		return f.InfoFn()
	}
	return system.Info{}, unexpected("Info")
}

func (f *fakeAPI) Close() error { return nil }
