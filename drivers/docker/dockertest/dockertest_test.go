package dockertest

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/bottlefile/bottlefile/drivers"
)

func TestClientWithoutEngineSkips(t *testing.T) {
	t.Setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
	t.Setenv(RequireEnv, "")
	reached := false
	t.Run("client", func(t *testing.T) {
		Client(t)
		reached = true
	})
	if reached {
		t.Error("Client returned without an engine instead of skipping")
	}
}

func TestClientWithoutEngineFailsWhenRequired(t *testing.T) {
	if os.Getenv("DOCKERTEST_CHILD") == "1" {
		Client(t)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestClientWithoutEngineFailsWhenRequired$", "-test.v")
	cmd.Env = append(os.Environ(), "DOCKERTEST_CHILD=1", "DOCKER_HOST=unix:///nonexistent/docker.sock", RequireEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("the child passed without an engine:\n%s", out)
	}
	if !strings.Contains(string(out), "--- FAIL") || !strings.Contains(string(out), "no docker engine answers") {
		t.Errorf("child output:\n%s", out)
	}
}

func TestNewLineage(t *testing.T) {
	a, b := NewLineage(), NewLineage()
	if a == b || len(a) != 36 {
		t.Errorf("lineages %q, %q", a, b)
	}
}

func TestBusyboxImageRuns(t *testing.T) {
	t.Parallel()
	cli := Client(t)
	img := BusyboxImage(t, cli)
	if again := BusyboxImage(t, cli); again != img {
		t.Errorf("second call gave %q, first %q", again, img)
	}
	lineage := NewLineage()
	Cleanup(t, cli, lineage)
	ctx := t.Context()
	c, err := cli.ContainerCreate(ctx, &container.Config{
		Image:  img,
		Cmd:    []string{"sh", "-c", "stat -c %a /tmp; id -un; which wget nc sleep; grep -c nobody /etc/passwd"},
		Labels: map[string]string{drivers.LabelLineage: lineage},
	}, &container.HostConfig{NetworkMode: "none"}, nil, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := cli.ContainerStart(ctx, c.ID, container.StartOptions{}); err != nil {
		t.Fatal(err)
	}
	waitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	statusCh, errCh := cli.ContainerWait(waitCtx, c.ID, container.WaitConditionNotRunning)
	select {
	case st := <-statusCh:
		if st.StatusCode != 0 {
			t.Errorf("exit status %d", st.StatusCode)
		}
	case err := <-errCh:
		t.Fatal(err)
	}
	rc, err := cli.ContainerLogs(ctx, c.ID, container.LogsOptions{ShowStdout: true, ShowStderr: true})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var stdout, stderr bytes.Buffer
	stdcopy.StdCopy(&stdout, &stderr, rc)
	want := "1777\nroot\n/usr/bin/wget\n/usr/bin/nc\n/bin/sleep\n1\n"
	if stdout.String() != want {
		t.Errorf("output %q (stderr %q), want %q", stdout.String(), stderr.String(), want)
	}
}

func TestRemoveLineage(t *testing.T) {
	t.Parallel()
	cli := Client(t)
	img := BusyboxImage(t, cli)
	lineage := NewLineage()
	ctx := t.Context()
	labels := map[string]string{drivers.LabelLineage: lineage}
	n, err := cli.NetworkCreate(ctx, "dockertest-"+lineage[:8], network.CreateOptions{Internal: true, Labels: labels})
	if err != nil {
		t.Fatal(err)
	}
	c, err := cli.ContainerCreate(ctx, &container.Config{Image: img, Cmd: []string{"sleep", "600"}, Labels: labels},
		&container.HostConfig{NetworkMode: container.NetworkMode(n.ID)}, nil, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := cli.ContainerStart(ctx, c.ID, container.StartOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := RemoveLineage(ctx, cli, lineage); err != nil {
		t.Fatal(err)
	}
	f := filters.NewArgs(filters.Arg("label", drivers.LabelLineage+"="+lineage))
	cs, _ := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
	ns, _ := cli.NetworkList(ctx, network.ListOptions{Filters: f})
	if len(cs)+len(ns) != 0 {
		t.Errorf("left %d containers, %d networks", len(cs), len(ns))
	}
	if _, err := cli.ImageInspect(ctx, img); err != nil {
		t.Errorf("the busybox image, which has no lineage, was removed: %v", err)
	}
}
