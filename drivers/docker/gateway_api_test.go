package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"io"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/pkg/stdcopy"
)

// The calls the gateway and logs added to dockerAPI, for the counting
// wrapper and the fake.

func (c *countingAPI) ContainerKill(ctx context.Context, id, signal string) error {
	c.count("ContainerKill")
	return c.api.ContainerKill(ctx, id, signal)
}

func (c *countingAPI) ContainerLogs(ctx context.Context, id string, o container.LogsOptions) (io.ReadCloser, error) {
	c.count("ContainerLogs")
	return c.api.ContainerLogs(ctx, id, o)
}

func (c *countingAPI) CopyToContainer(ctx context.Context, id, path string, r io.Reader, o container.CopyToContainerOptions) error {
	c.count("CopyToContainer")
	return c.api.CopyToContainer(ctx, id, path, r, o)
}

func (c *countingAPI) CopyFromContainer(ctx context.Context, id, path string) (io.ReadCloser, container.PathStat, error) {
	c.count("CopyFromContainer")
	return c.api.CopyFromContainer(ctx, id, path)
}

func (c *countingAPI) ContainerStatPath(ctx context.Context, id, path string) (container.PathStat, error) {
	c.count("ContainerStatPath")
	return c.api.ContainerStatPath(ctx, id, path)
}

func (c *countingAPI) NetworkConnect(ctx context.Context, net, id string, cfg *network.EndpointSettings) error {
	c.count("NetworkConnect")
	return c.api.NetworkConnect(ctx, net, id, cfg)
}

func (c *countingAPI) ImageImport(ctx context.Context, src image.ImportSource, ref string, o image.ImportOptions) (io.ReadCloser, error) {
	c.count("ImageImport")
	return c.api.ImageImport(ctx, src, ref, o)
}

func (f *fakeAPI) ContainerKill(_ context.Context, id, signal string) error {
	f.record("ContainerKill")
	if f.ContainerKillFn != nil {
		return f.ContainerKillFn(id, signal)
	}
	return unexpected("ContainerKill")
}

func (f *fakeAPI) ContainerLogs(_ context.Context, id string, o container.LogsOptions) (io.ReadCloser, error) {
	f.record("ContainerLogs")
	if f.ContainerLogsFn != nil {
		stdout, stderr, err := f.ContainerLogsFn(id, o)
		if err != nil {
			return nil, err
		}
		var buf bytes.Buffer
		if o.ShowStdout && stdout != "" {
			stdcopy.NewStdWriter(&buf, stdcopy.Stdout).Write([]byte(stdout))
		}
		if o.ShowStderr && stderr != "" {
			stdcopy.NewStdWriter(&buf, stdcopy.Stderr).Write([]byte(stderr))
		}
		return io.NopCloser(&buf), nil
	}
	return nil, unexpected("ContainerLogs")
}

func (f *fakeAPI) CopyToContainer(_ context.Context, id, path string, _ io.Reader, _ container.CopyToContainerOptions) error {
	f.record("CopyToContainer")
	if f.CopyToContainerFn != nil {
		return f.CopyToContainerFn(id, path)
	}
	return unexpected("CopyToContainer")
}

func (f *fakeAPI) CopyFromContainer(_ context.Context, id, path string) (io.ReadCloser, container.PathStat, error) {
	f.record("CopyFromContainer")
	if f.CopyFromContainerFn != nil {
		data, err := f.CopyFromContainerFn(id, path)
		if err != nil {
			return nil, container.PathStat{}, err
		}
		// The one file, as the engine sends it: a tar of it alone.
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: path, Mode: 0o644, Size: int64(len(data))})
		tw.Write(data)
		tw.Close()
		return io.NopCloser(&buf), container.PathStat{Name: path, Size: int64(len(data))}, nil
	}
	return nil, container.PathStat{}, unexpected("CopyFromContainer")
}

func (f *fakeAPI) ContainerStatPath(_ context.Context, id, path string) (container.PathStat, error) {
	f.record("ContainerStatPath")
	if f.ContainerStatPathFn != nil {
		return f.ContainerStatPathFn(id, path)
	}
	return container.PathStat{}, unexpected("ContainerStatPath")
}

func (f *fakeAPI) NetworkConnect(context.Context, string, string, *network.EndpointSettings) error {
	f.record("NetworkConnect")
	return unexpected("NetworkConnect")
}

func (f *fakeAPI) ImageImport(context.Context, image.ImportSource, string, image.ImportOptions) (io.ReadCloser, error) {
	f.record("ImageImport")
	return nil, unexpected("ImageImport")
}

func (c *countingAPI) ContainerStop(ctx context.Context, id string, o container.StopOptions) error {
	c.count("ContainerStop")
	return c.api.ContainerStop(ctx, id, o)
}

func (c *countingAPI) ContainerRename(ctx context.Context, id, name string) error {
	c.count("ContainerRename")
	return c.api.ContainerRename(ctx, id, name)
}

func (f *fakeAPI) ContainerStop(context.Context, string, container.StopOptions) error {
	f.record("ContainerStop")
	return unexpected("ContainerStop")
}

func (f *fakeAPI) ContainerRename(context.Context, string, string) error {
	f.record("ContainerRename")
	return unexpected("ContainerRename")
}
