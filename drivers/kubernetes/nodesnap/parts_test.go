package nodesnap

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/containerd/api/types/runc/options"
	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/remotes/docker"
	"github.com/containerd/containerd/v2/core/remotes/docker/config"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/containerd/v2/pkg/oci"

	"github.com/bottlefile/bottlefile/drivers"
)

// The real parts these tests start: a containerd of their own (Debian's
// binary, its own config, root, state and socket in a temp dir, never the
// system's), runc under it, and Debian's docker-registry on loopback.

// requireEnv makes a missing part a failure instead of a skip.
const requireEnv = "BOTTLEFILE_REQUIRE_KUBERNETES"

// testNamespace is the containerd namespace the tests work in (the CRI's
// name, as on a node).
const testNamespace = DefaultNamespace

const snapshotter = "overlayfs"

func need(tb testing.TB) {
	tb.Helper()
	var missing []string
	for _, b := range []string{"containerd", "runc", "docker-registry", "busybox"} {
		if _, err := exec.LookPath(b); err != nil {
			missing = append(missing, b)
		}
	}
	if os.Geteuid() != 0 {
		missing = append(missing, "root (containerd runs as root)")
	}
	if len(missing) == 0 {
		return
	}
	msg := fmt.Sprintf("nodesnap's real-part tests need %s (apt-get install containerd runc docker-registry busybox-static)", strings.Join(missing, ", "))
	if os.Getenv(requireEnv) == "1" {
		tb.Fatal(msg + ", and " + requireEnv + "=1 requires them")
	}
	tb.Skip(msg)
}

// privateContainerd is a containerd the test started.
type privateContainerd struct {
	dir    string
	socket string
	client *containerd.Client
}

// runcRoot is where runc keeps its state for the test's containers.
func (p *privateContainerd) runcRoot() string { return filepath.Join(p.dir, "runc") }

func startContainerd(tb testing.TB) *privateContainerd {
	tb.Helper()
	// Sockets must fit in 108 bytes: a short temp dir, not tb.TempDir.
	dir, err := os.MkdirTemp("", "bf-nodesnap-")
	if err != nil {
		tb.Fatal(err)
	}
	p := &privateContainerd{dir: dir, socket: filepath.Join(dir, "c.sock")}
	cfg := fmt.Sprintf(`version = 2
root = %[1]q
state = %[2]q
disabled_plugins = ["io.containerd.grpc.v1.cri"]
[grpc]
  address = %[3]q
[ttrpc]
  address = %[4]q
[plugins."io.containerd.internal.v1.opt"]
  path = %[5]q
`, filepath.Join(dir, "root"), filepath.Join(dir, "state"), p.socket, p.socket+".ttrpc", filepath.Join(dir, "opt"))
	if err := os.WriteFile(filepath.Join(dir, "config.toml"), []byte(cfg), 0o600); err != nil {
		tb.Fatal(err)
	}
	logf, err := os.Create(filepath.Join(dir, "containerd.log"))
	if err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command("containerd", "--config", filepath.Join(dir, "config.toml"))
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if p.client != nil {
			p.removeAll()
			p.client.Close()
		}
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		killShims(p.socket)
		unmountUnder(dir)
		logf.Close()
		if tb.Failed() {
			if b, err := os.ReadFile(filepath.Join(dir, "containerd.log")); err == nil {
				tb.Logf("containerd's log:\n%s", tail(b, 40))
			}
		}
		if err := os.RemoveAll(dir); err != nil {
			tb.Logf("removing %s: %v", dir, err)
		}
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := containerd.New(p.socket, containerd.WithDefaultNamespace(testNamespace), containerd.WithTimeout(2*time.Second))
		if err == nil {
			if _, err = c.Version(context.Background()); err == nil {
				p.client = c
				return p
			}
			c.Close()
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(filepath.Join(dir, "containerd.log"))
			tb.Fatalf("containerd did not answer on %s: %v\n%s", p.socket, err, tail(b, 40))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (p *privateContainerd) ctx() context.Context {
	return namespaces.WithNamespace(context.Background(), testNamespace)
}

// removeAll deletes the test's tasks, containers and images.
func (p *privateContainerd) removeAll() {
	ctx := p.ctx()
	ctrs, _ := p.client.Containers(ctx)
	for _, c := range ctrs {
		if t, err := c.Task(ctx, nil); err == nil {
			_, _ = t.Delete(ctx, containerd.WithProcessKill)
		}
		_ = c.Delete(ctx, containerd.WithSnapshotCleanup)
	}
	imgs, _ := p.client.ImageService().List(ctx)
	for _, i := range imgs {
		_ = p.client.ImageService().Delete(ctx, i.Name)
	}
}

// killShims kills the runc shims of the containerd at socket (found by
// their -address argument), should any outlive their tasks.
func killShims(socket string) {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		if len(args) == 0 || !strings.HasPrefix(filepath.Base(args[0]), "containerd-shim") {
			continue
		}
		for i := range args[:len(args)-1] {
			if args[i] == "-address" && args[i+1] == socket {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
}

// unmountUnder unmounts whatever is still mounted under dir, deepest
// first.
func unmountUnder(dir string) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return
	}
	var mounts []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && strings.HasPrefix(f[4], dir+"/") {
			mounts = append(mounts, f[4])
		}
	}
	for i := len(mounts) - 1; i >= 0; i-- {
		_ = syscall.Unmount(mounts[i], syscall.MNT_DETACH)
	}
}

func tail(b []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// startRegistry starts Debian's docker-registry on a loopback port, with
// deletes enabled, and returns its host:port.
func startRegistry(tb testing.TB) string {
	tb.Helper()
	dir := tb.TempDir()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	host := l.Addr().String()
	l.Close()
	cfg := fmt.Sprintf("version: 0.1\nlog: {level: warn}\nstorage:\n  filesystem: {rootdirectory: %s}\n  delete: {enabled: true}\nhttp: {addr: %q}\n", filepath.Join(dir, "data"), host)
	if err := os.WriteFile(filepath.Join(dir, "config.yml"), []byte(cfg), 0o600); err != nil {
		tb.Fatal(err)
	}
	var log bytes.Buffer
	cmd := exec.Command("docker-registry", "serve", filepath.Join(dir, "config.yml"))
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if tb.Failed() {
			tb.Logf("docker-registry's log:\n%s", tail(log.Bytes(), 30))
		}
	})
	deadline := time.Now().Add(15 * time.Second)
	for {
		resp, err := http.Get("http://" + host + "/v2/")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return host
			}
		}
		if time.Now().After(deadline) {
			tb.Fatalf("docker-registry did not answer on %s: %v", host, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// busyboxLayer is a tar of /bin/busybox and its applets' links, /etc
// and /tmp: a base layer.
func busyboxLayer(tb testing.TB) []byte {
	tb.Helper()
	bb, err := exec.LookPath("busybox")
	if err != nil {
		tb.Fatal(err)
	}
	bin, err := os.ReadFile(bb)
	if err != nil {
		tb.Fatal(err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	mod := time.Unix(1700000000, 0)
	add := func(h *tar.Header, data []byte) {
		h.ModTime = mod
		if err := tw.WriteHeader(h); err != nil {
			tb.Fatal(err)
		}
		if _, err := tw.Write(data); err != nil {
			tb.Fatal(err)
		}
	}
	for _, d := range []string{"bin/", "etc/", "tmp/"} {
		add(&tar.Header{Typeflag: tar.TypeDir, Name: d, Mode: 0o755}, nil)
	}
	add(&tar.Header{Typeflag: tar.TypeReg, Name: "bin/busybox", Mode: 0o755, Size: int64(len(bin))}, bin)
	for _, a := range []string{"sh", "cat", "echo", "mkdir", "dd", "head", "sleep", "ls"} {
		add(&tar.Header{Typeflag: tar.TypeSymlink, Name: "bin/" + a, Linkname: "busybox", Mode: 0o777}, nil)
	}
	passwd := []byte("root:x:0:0:root:/:/bin/sh\n")
	add(&tar.Header{Typeflag: tar.TypeReg, Name: "etc/passwd", Mode: 0o644, Size: int64(len(passwd))}, passwd)
	if err := tw.Close(); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// busyboxArchive is a docker-save archive of one image, ref, made of
// busyboxLayer: what `ctr images import` takes.
func busyboxArchive(tb testing.TB, ref string) []byte {
	tb.Helper()
	layer := busyboxLayer(tb)
	ld := sha(layer)
	cfg := []byte(fmt.Sprintf(`{"architecture":"amd64","os":"linux","config":{"Env":["PATH=/bin"],"Cmd":["/bin/sh"]},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}`, ld))
	cd := sha(cfg)
	manifest, _ := json.Marshal([]map[string]any{{"Config": cd + ".json", "RepoTags": []string{ref}, "Layers": []string{ld + "/layer.tar"}}})
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range []struct {
		name string
		data []byte
	}{{"manifest.json", manifest}, {cd + ".json", cfg}, {ld + "/layer.tar", layer}} {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: f.name, Mode: 0o644, Size: int64(len(f.data))}); err != nil {
			tb.Fatal(err)
		}
		if _, err := tw.Write(f.data); err != nil {
			tb.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

// importBusybox imports the busybox archive as `ctr images import`
// does, unpacked for the test's snapshotter, and returns the image.
func (p *privateContainerd) importBusybox(tb testing.TB) containerd.Image {
	tb.Helper()
	ctx := p.ctx()
	imgs, err := p.client.Import(ctx, bytes.NewReader(busyboxArchive(tb, "docker.io/local/busybox:1")))
	if err != nil {
		tb.Fatalf("importing busybox: %v", err)
	}
	if len(imgs) != 1 {
		tb.Fatalf("imported %d images, want 1", len(imgs))
	}
	img := containerd.NewImage(p.client, imgs[0])
	if err := img.Unpack(ctx, snapshotter); err != nil {
		tb.Fatalf("unpacking busybox: %v", err)
	}
	return img
}

// testLabels are the labels of everything the tests make.
func testLabels(tb testing.TB) map[string]string {
	return map[string]string{drivers.LabelLineage: "nodesnap-test", drivers.LabelAddress: "agent." + strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(tb.Name()))}
}

// run runs args in a new container of img named id, waits for it to exit
// and returns its output; the container (and its snapshot) stays, as a
// stopped container of a Pod does.
func (p *privateContainerd) run(tb testing.TB, img containerd.Image, id string, args ...string) string {
	tb.Helper()
	ctx := p.ctx()
	task, logPath := p.start(tb, img, id, args...)
	exited, err := task.Wait(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	st := <-exited
	if _, err := task.Delete(ctx); err != nil {
		tb.Fatalf("deleting the task of %s: %v", id, err)
	}
	out, err := os.ReadFile(logPath)
	if err != nil {
		tb.Fatalf("reading the output of %s: %v", id, err)
	}
	if st.ExitCode() != 0 {
		tb.Fatalf("%s in %s exited %d: %s", strings.Join(args, " "), id, st.ExitCode(), out)
	}
	return string(out)
}

// start starts args in a new container of img named id and returns its
// task and the file its output goes to. The shim writes the output to
// the file itself: streams copied by the client through fifos can lose a
// process's output when it exits at once.
func (p *privateContainerd) start(tb testing.TB, img containerd.Image, id string, args ...string) (containerd.Task, string) {
	tb.Helper()
	ctx := p.ctx()
	ctr, err := p.client.NewContainer(ctx, id,
		containerd.WithContainerLabels(testLabels(tb)),
		containerd.WithImage(img),
		containerd.WithSnapshotter(snapshotter),
		containerd.WithNewSnapshot(id, img),
		containerd.WithRuntime("io.containerd.runc.v2", &options.Options{Root: p.runcRoot()}),
		containerd.WithNewSpec(oci.WithImageConfig(img), oci.WithProcessArgs(args...), oci.WithCgroup("/bottlefile-nodesnap-"+id)))
	if err != nil {
		tb.Fatalf("creating container %s: %v", id, err)
	}
	logPath := filepath.Join(p.dir, "logs", id+".log")
	if err := os.MkdirAll(filepath.Dir(logPath), 0o700); err != nil {
		tb.Fatal(err)
	}
	task, err := ctr.NewTask(ctx, cio.LogFile(logPath))
	if err != nil {
		tb.Fatalf("creating the task of %s: %v", id, err)
	}
	if err := task.Start(ctx); err != nil {
		tb.Fatalf("starting %s: %v", id, err)
	}
	return task, logPath
}

// pull pulls ref (plain HTTP) and unpacks it.
func (p *privateContainerd) pull(tb testing.TB, ref string) containerd.Image {
	tb.Helper()
	ctx := p.ctx()
	resolver := docker.NewResolver(docker.ResolverOptions{Hosts: config.ConfigureHosts(ctx, config.HostOptions{DefaultScheme: "http"})})
	img, err := p.client.Pull(ctx, ref, containerd.WithResolver(resolver), containerd.WithPullUnpack, containerd.WithPullSnapshotter(snapshotter))
	if err != nil {
		tb.Fatalf("pulling %s: %v", ref, err)
	}
	return img
}

// imageLabels reads the labels of an image's config.
func imageLabels(tb testing.TB, ctx context.Context, img containerd.Image) map[string]string {
	tb.Helper()
	spec, err := img.Spec(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	return spec.Config.Labels
}

// lines is the output's lines.
func lines(s string) []string {
	var out []string
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	return out
}
