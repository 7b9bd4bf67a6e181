package dockertest

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"
)

// runTimeout bounds Exec and RunImage: a probe that cannot connect costs
// its own timeout, never the test's.
const runTimeout = 90 * time.Second

// Exec runs cmd in a running container, waits for it, and returns what it
// printed (stdout and stderr together) and its exit code.
func Exec(t testing.TB, cli *client.Client, id string, cmd ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	ex, err := cli.ContainerExecCreate(ctx, id, container.ExecOptions{Cmd: cmd, AttachStdout: true, AttachStderr: true})
	if err != nil {
		t.Fatalf("exec %q in %s: %v", cmd, short(id), err)
	}
	att, err := cli.ContainerExecAttach(ctx, ex.ID, container.ExecAttachOptions{})
	if err != nil {
		t.Fatalf("exec %q in %s: %v", cmd, short(id), err)
	}
	defer att.Close()
	var out bytes.Buffer
	if _, err := stdcopy.StdCopy(&out, &out, att.Reader); err != nil {
		t.Fatalf("exec %q in %s: %v", cmd, short(id), err)
	}
	insp, err := cli.ContainerExecInspect(ctx, ex.ID)
	if err != nil {
		t.Fatalf("exec %q in %s: %v", cmd, short(id), err)
	}
	return out.String(), insp.ExitCode
}

// Sh runs a shell script in a running container and returns what it
// printed (stdout and stderr together).
func Sh(t testing.TB, cli *client.Client, id, script string) string {
	t.Helper()
	out, _ := Exec(t, cli, id, "sh", "-c", script)
	return out
}

// RunImage runs a throwaway container of an image, with no network,
// labelled TestLabel and removed afterwards, and returns what cmd printed
// (stdout and stderr together).
func RunImage(t testing.TB, cli *client.Client, ref string, cmd ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	c, err := cli.ContainerCreate(ctx, &container.Config{Image: ref, Cmd: cmd, Labels: map[string]string{TestLabel: "1"}},
		&container.HostConfig{NetworkMode: "none"}, &network.NetworkingConfig{}, nil, "")
	if err != nil {
		t.Fatalf("running %s: %v", ref, err)
	}
	defer cli.ContainerRemove(context.Background(), c.ID, container.RemoveOptions{Force: true})
	if err := cli.ContainerStart(ctx, c.ID, container.StartOptions{}); err != nil {
		t.Fatalf("running %s: %v", ref, err)
	}
	wait, errc := cli.ContainerWait(ctx, c.ID, container.WaitConditionNotRunning)
	select {
	case <-wait:
	case err := <-errc:
		t.Fatalf("waiting for %s: %v", ref, err)
	}
	logs, err := cli.ContainerLogs(ctx, c.ID, container.LogsOptions{ShowStdout: true, ShowStderr: true})
	if err != nil {
		t.Fatalf("running %s: %v", ref, err)
	}
	defer logs.Close()
	var out bytes.Buffer
	if _, err := stdcopy.StdCopy(&out, &out, logs); err != nil {
		t.Fatalf("running %s: %v", ref, err)
	}
	return out.String()
}

func short(id string) string { return id[:min(12, len(id))] }

// Outside starts a container of the busybox image ref on network net,
// labelled TestLabel and removed when the test ends, serving a page that
// holds body on port 8080: a host outside every bottle, for egress tests.
// It returns the container's address on net as "IP:8080".
func Outside(t testing.TB, cli *client.Client, ref, net, body string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	script := "mkdir -p /www && echo " + body + " > /www/index.html && exec httpd -f -p 8080 -h /www"
	c, err := cli.ContainerCreate(ctx, &container.Config{Image: ref, Cmd: []string{"sh", "-c", script}, Labels: map[string]string{TestLabel: "1"}},
		&container.HostConfig{NetworkMode: container.NetworkMode(net)},
		&network.NetworkingConfig{EndpointsConfig: map[string]*network.EndpointSettings{net: {}}}, nil, "")
	if err != nil {
		t.Fatalf("outside server: %v", err)
	}
	t.Cleanup(func() { cli.ContainerRemove(context.Background(), c.ID, container.RemoveOptions{Force: true}) })
	if err := cli.ContainerStart(ctx, c.ID, container.StartOptions{}); err != nil {
		t.Fatalf("outside server: %v", err)
	}
	info, err := cli.ContainerInspect(ctx, c.ID)
	if err != nil {
		t.Fatalf("outside server: %v", err)
	}
	ep := info.NetworkSettings.Networks[net]
	if ep == nil || ep.IPAddress == "" {
		t.Fatalf("outside server %s has no address on %s", short(c.ID), net)
	}
	return ep.IPAddress + ":8080"
}
