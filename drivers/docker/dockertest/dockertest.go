// Package dockertest holds helpers for tests that need the real Docker
// engine: a client that skips (or fails, in CI) when no engine answers, a
// small busybox image built locally without any registry, a fresh lineage
// per test, and cleanup of everything carrying that lineage.
//
// Any package's integration tests may use it:
//
//	cli := dockertest.Client(t)
//	img := dockertest.BusyboxImage(t, cli)
//	lineage := dockertest.NewLineage()
//	dockertest.Cleanup(t, cli, lineage)
package dockertest

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"
	"github.com/google/uuid"

	"github.com/bottlefile/bottlefile/drivers"
)

// RequireEnv names the environment variable that turns a missing engine
// from a skip into a failure ("1"), for CI.
const RequireEnv = "BOTTLEFILE_REQUIRE_DOCKER"

// BusyboxTag is the tag BusyboxImage gives its image.
const BusyboxTag = "bottlefile-test/busybox:1"

// BusyboxPath is where the static busybox is read from (Debian's
// busybox-static package).
const BusyboxPath = "/bin/busybox"

// TestLabel marks images the test helpers build, which carry no lineage.
const TestLabel = drivers.LabelPrefix + "test"

// busyboxDigestLabel records which busybox binary and rootfs layout an
// image was made from, so a matching one is reused across test processes.
const busyboxDigestLabel = drivers.LabelPrefix + "test.busybox"

// rootfsVersion changes whenever the rootfs layout below changes.
const rootfsVersion = "1"

// Client connects to the engine named by the environment (DOCKER_HOST, else
// the default socket) with API version negotiation, and checks that it
// answers. Without an engine the test is skipped, or fails when
// BOTTLEFILE_REQUIRE_DOCKER=1. The client is closed when the test ends.
func Client(t testing.TB) *client.Client {
	t.Helper()
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		var ping types.Ping
		ping, err = cli.Ping(ctx)
		if err == nil {
			// Negotiated now, before the test shares the client between
			// goroutines: the docker client reads its version unguarded
			// while its first call negotiates it (a data race the race
			// detector reports when two goroutines make the first calls).
			cli.NegotiateAPIVersionPing(ping)
		}
		cancel()
		if err != nil {
			cli.Close()
		}
	}
	if err != nil {
		host := os.Getenv("DOCKER_HOST")
		if host == "" {
			host = client.DefaultDockerHost
		}
		msg := fmt.Sprintf("no docker engine answers at %s: %v", host, err)
		if os.Getenv(RequireEnv) == "1" {
			t.Fatalf("%s (%s=1 requires one)", msg, RequireEnv)
		}
		t.Skipf("%s (set %s=1 to fail instead of skipping)", msg, RequireEnv)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// NewLineage returns a fresh random lineage, so that parallel tests never
// see each other's objects.
func NewLineage() string {
	return uuid.NewString()
}

// busybox caches the image across the tests of one process.
var busybox struct {
	mu  sync.Mutex // guards tag
	tag string
}

// BusyboxImage makes sure a small image FROM scratch holding the static
// busybox (with its applet symlinks, /etc/passwd, /etc/group and /tmp) is
// on the engine, and returns its tag. It never pulls: the image is imported
// from a rootfs tar made here. It is built once per test process and reused
// across processes while the busybox binary is the same. Its default
// command is sh.
func BusyboxImage(t testing.TB, cli *client.Client) string {
	t.Helper()
	busybox.mu.Lock()
	defer busybox.mu.Unlock()
	if busybox.tag != "" {
		return busybox.tag
	}

	bin, err := os.ReadFile(BusyboxPath)
	if err != nil {
		t.Fatalf("reading the static busybox for the test image: %v (install it with: apt-get install -y busybox-static)", err)
	}
	sum := sha256.Sum256(append(bin, rootfsVersion...))
	digest := hex.EncodeToString(sum[:])

	// Test processes of several packages run at once: one imports, the
	// others wait and reuse its image instead of leaving untagged copies.
	unlock, err := lockFile(filepath.Join(os.TempDir(), "bottlefile-dockertest-busybox.lock"))
	if err != nil {
		t.Fatalf("locking the busybox image build: %v", err)
	}
	defer unlock()

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if info, err := cli.ImageInspect(ctx, BusyboxTag); err == nil && info.Config != nil && info.Config.Labels[busyboxDigestLabel] == digest {
		busybox.tag = BusyboxTag
		return busybox.tag
	} else if err != nil && !cerrdefs.IsNotFound(err) {
		t.Fatalf("inspecting %s: %v", BusyboxTag, err)
	}

	id, err := importBusybox(ctx, cli, BusyboxTag, bin, digest)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("dockertest: imported %s as %s", BusyboxTag, id)
	busybox.tag = BusyboxTag
	return busybox.tag
}

// ImportBusybox imports the busybox test image (see BusyboxImage) into
// the engine cli talks to, tagged ref, and returns its id. It neither
// caches nor reuses: it is for engines other than the default one, such
// as the nodes of a test swarm.
func ImportBusybox(ctx context.Context, cli *client.Client, ref string) (string, error) {
	bin, err := os.ReadFile(BusyboxPath)
	if err != nil {
		return "", fmt.Errorf("reading the static busybox for the test image: %w (install it with: apt-get install -y busybox-static)", err)
	}
	sum := sha256.Sum256(append(bin, rootfsVersion...))
	return importBusybox(ctx, cli, ref, bin, hex.EncodeToString(sum[:]))
}

func importBusybox(ctx context.Context, cli *client.Client, ref string, bin []byte, digest string) (string, error) {
	applets, err := exec.Command(BusyboxPath, "--list-full").Output()
	if err != nil {
		return "", fmt.Errorf("listing the applets of %s: %w (is it the static busybox from busybox-static?)", BusyboxPath, err)
	}
	rootfs, err := busyboxRootfs(bin, strings.Fields(string(applets)))
	if err != nil {
		return "", fmt.Errorf("making the busybox rootfs: %w", err)
	}
	rc, err := cli.ImageImport(ctx, image.ImportSource{Source: bytes.NewReader(rootfs), SourceName: "-"}, ref, image.ImportOptions{
		Message: "bottlefile test busybox",
		Changes: []string{
			`CMD ["sh"]`,
			"ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
			fmt.Sprintf("LABEL %s=1 %s=%s", TestLabel, busyboxDigestLabel, digest),
		},
	})
	var id string
	if err == nil {
		id, err = drain(rc)
	}
	if err != nil {
		return "", fmt.Errorf("importing the busybox test image %s: %w", ref, err)
	}
	return id, nil
}

// busyboxRootfs makes the tar of a minimal root file system.
func busyboxRootfs(bin []byte, applets []string) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	now := time.Now().Truncate(time.Second)
	dirs := map[string]bool{}
	dir := func(name string, mode int64) error {
		if dirs[name] {
			return nil
		}
		dirs[name] = true
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: mode, ModTime: now})
	}
	file := func(name string, mode int64, data []byte) error {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(data)), ModTime: now}); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	for _, d := range []string{"bin", "sbin", "usr", "usr/bin", "usr/sbin", "etc", "root", "home", "var", "dev", "proc", "sys", "run"} {
		mode := int64(0o755)
		if d == "root" {
			mode = 0o700
		}
		if err := dir(d, mode); err != nil {
			return nil, err
		}
	}
	if err := dir("tmp", 0o1777); err != nil {
		return nil, err
	}
	if err := dir("var/tmp", 0o1777); err != nil {
		return nil, err
	}
	if err := file("bin/busybox", 0o755, bin); err != nil {
		return nil, err
	}
	if err := file("etc/passwd", 0o644, []byte("root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n")); err != nil {
		return nil, err
	}
	if err := file("etc/group", 0o644, []byte("root:x:0:\nnogroup:x:65534:\n")); err != nil {
		return nil, err
	}
	seen := map[string]bool{"bin/busybox": true}
	for _, a := range applets {
		a = strings.TrimPrefix(a, "/")
		if a == "" || seen[a] || strings.Contains(a, "..") {
			continue
		}
		seen[a] = true
		if i := strings.LastIndex(a, "/"); i > 0 {
			if err := dir(a[:i], 0o755); err != nil {
				return nil, err
			}
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: a, Linkname: "/bin/busybox", Mode: 0o777, ModTime: now}); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// drain reads a progress stream to its end and returns its last status
// (for an import, the new image's id) or the error it reports.
func drain(rc io.ReadCloser) (string, error) {
	defer rc.Close()
	dec := json.NewDecoder(rc)
	status := ""
	for {
		var m struct {
			Status      string `json:"status"`
			Error       string `json:"error"`
			ErrorDetail *struct {
				Message string `json:"message"`
			} `json:"errorDetail"`
		}
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return status, nil
			}
			return "", err
		}
		if m.ErrorDetail != nil && m.ErrorDetail.Message != "" {
			return "", errors.New(m.ErrorDetail.Message)
		}
		if m.Error != "" {
			return "", errors.New(m.Error)
		}
		if m.Status != "" {
			status = strings.TrimSpace(m.Status)
		}
	}
}

// Cleanup registers a cleanup that force-removes every container, then
// every network, then every image carrying the lineage label.
func Cleanup(t testing.TB, cli *client.Client, lineage string) {
	t.Helper()
	if lineage == "" {
		t.Fatal("dockertest.Cleanup: empty lineage would match nothing")
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := RemoveLineage(ctx, cli, lineage); err != nil {
			t.Errorf("cleaning up lineage %s: %v", lineage, err)
		}
	})
}

// RemoveLineage force-removes every container, then network, then image
// carrying the lineage label (or the docker driver's build and snapshot
// intermediate labels with the lineage as value), now. It keeps going after an error and
// returns them all.
func RemoveLineage(ctx context.Context, cli *client.Client, lineage string) error {
	f := filters.NewArgs(filters.Arg("label", drivers.LabelLineage+"="+lineage))
	var errs []error
	containers, err := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
	if err != nil {
		errs = append(errs, fmt.Errorf("listing containers: %w", err))
	}
	for _, c := range containers {
		if err := cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true, RemoveVolumes: true}); err != nil && !cerrdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("removing container %s: %w", c.ID, err))
		}
	}
	networks, err := cli.NetworkList(ctx, network.ListOptions{Filters: f})
	if err != nil {
		errs = append(errs, fmt.Errorf("listing networks: %w", err))
	}
	for _, n := range networks {
		if err := cli.NetworkRemove(ctx, n.ID); err != nil && !cerrdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("removing network %s: %w", n.Name, err))
		}
	}
	images, err := cli.ImageList(ctx, image.ListOptions{All: true, Filters: f})
	if err != nil {
		errs = append(errs, fmt.Errorf("listing images: %w", err))
	}
	for _, img := range images {
		if _, err := cli.ImageRemove(ctx, img.ID, image.RemoveOptions{Force: true, PruneChildren: true}); err != nil && !cerrdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("removing image %s: %w", img.ID, err))
		}
	}
	// What the docker driver makes on the way to an image carries the
	// lineage under labels of its own: a build's step images and
	// containers, and a snapshot's intermediate image.
	for _, label := range []string{drivers.LabelPrefix + "build-of", drivers.LabelPrefix + "snapshot-intermediate"} {
		f := filters.NewArgs(filters.Arg("label", label+"="+lineage))
		ctrs, err := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
		if err != nil {
			errs = append(errs, fmt.Errorf("listing containers: %w", err))
		}
		for _, c := range ctrs {
			if err := cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true}); err != nil && !cerrdefs.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("removing container %s: %w", c.ID, err))
			}
		}
		imgs, err := cli.ImageList(ctx, image.ListOptions{All: true, Filters: f})
		if err != nil {
			errs = append(errs, fmt.Errorf("listing images: %w", err))
		}
		for _, img := range imgs {
			if _, err := cli.ImageRemove(ctx, img.ID, image.RemoveOptions{Force: true}); err != nil && !cerrdefs.IsNotFound(err) && !cerrdefs.IsConflict(err) {
				errs = append(errs, fmt.Errorf("removing image %s: %w", img.ID, err))
			}
		}
	}
	return errors.Join(errs...)
}
