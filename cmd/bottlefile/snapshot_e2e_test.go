package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"
	"github.com/hashicorp/go-hclog"
	"github.com/zclconf/go-cty/cty"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/docker"
	"github.com/bottlefile/bottlefile/drivers/docker/dockertest"
	"github.com/bottlefile/bottlefile/state"
)

// policyBottlefile is one agent with a snapshot policy; %s after the
// image is an extra runtime line ("" for the implicit runtime).
const policyBottlefile = `
%s
agent "coder" {
  %s
  image   = %q
  command = ["sleep", "%d"]
  workdir = "/workspace"

  snapshot_policy {
    before    = %s
    keep_last = %d
  }
}
`

// snapLineage registers, after lineageOf's cleanup (so it runs first), a
// cleanup that removes the lineage's images child first: an image later
// snapshots were committed on cannot go before them.
func snapLineage(t *testing.T, cli *client.Client, dir string) string {
	t.Helper()
	lineage := lineageOf(t, cli, dir)
	t.Cleanup(func() { snapRemoveImages(t, cli, lineage) })
	return lineage
}

func snapRemoveImages(t *testing.T, cli *client.Client, lineage string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var err error
	for range 30 {
		if err = dockertest.RemoveLineage(ctx, cli, lineage); err == nil {
			return
		}
	}
	t.Errorf("cleaning up lineage %s: %v", lineage, err)
}

// snapAgentContainer is the one container of the lineage at agent.coder.
func snapAgentContainer(t *testing.T, cli *client.Client, lineage string) container.Summary {
	t.Helper()
	list := containersWith(t, cli, drivers.LabelAddress+"=agent.coder", drivers.LabelLineage+"="+lineage)
	if len(list) != 1 {
		t.Fatalf("want one container at agent.coder, got %d: %+v", len(list), list)
	}
	return list[0]
}

// snapRecord reads one record of the state in dir.
func snapRecord(t *testing.T, dir, addr string) (state.Record, bool) {
	t.Helper()
	_, recs := readState(t, dir)
	for _, r := range recs {
		if r.Addr == addr {
			return r, true
		}
	}
	return state.Record{}, false
}

func snapImageExists(t *testing.T, cli *client.Client, ref string) bool {
	t.Helper()
	_, err := cli.ImageInspect(context.Background(), ref)
	if err != nil && !cerrdefs.IsNotFound(err) {
		t.Fatal(err)
	}
	return err == nil
}

func snapWant(t *testing.T, what, out string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(out, w) {
			t.Errorf("%s lacks %q:\n%s", what, w, out)
		}
	}
}

// engineMeasuresWrites is whether the test engine's storage sizes what a
// container wrote cheaply, and if not why (drivers/docker/sizes.go): what
// plans and status then say.
func engineMeasuresWrites(t *testing.T, cli *client.Client) (bool, string) {
	t.Helper()
	info, err := cli.Info(t.Context())
	if err != nil {
		t.Fatalf("reading the engine's info: %v", err)
	}
	return docker.WritesMeasurable(info)
}

// TestE2ESnapshotBeforeReplace: a file written inside an agent survives a
// replacement under snapshot_policy { before = ["replace"] }: plan shows
// the snapshot taken first, and the new container has the file.
func TestE2ESnapshotBeforeReplace(t *testing.T) {
	parallel(t)
	cli := dockertest.Client(t)
	img := dockertest.BusyboxImage(t, cli)
	dir := t.TempDir()
	writeBottlefile(t, dir, policyBottlefile, "", "", img, 600, `["replace"]`, 10)
	mustRun(t, dir, "apply", "-auto-approve")
	lineage := snapLineage(t, cli, dir)
	old := snapAgentContainer(t, cli, lineage)
	dockertest.Sh(t, cli, old.ID, "echo hi > /workspace/f")

	writeBottlefile(t, dir, policyBottlefile, "", "", img, 700, `["replace"]`, 10)
	r := mustRun(t, dir, "plan")
	snapWant(t, "plan", r.stdout,
		"@ agent.coder.snapshot.1 (snapshot)",
		"-/+ agent.coder (container)",
		"agent.coder.snapshot.1 is taken first (snapshot_policy)",
		"it boots from agent.coder.snapshot.1, taken just before",
		"Plan: 1 to add, 0 to change, 1 to destroy, 1 to snapshot.")
	r = mustRun(t, dir, "apply", "-auto-approve")
	// The snapshot finished before the old container was destroyed.
	if i, j := strings.Index(r.stdout, "agent.coder.snapshot.1: Creation complete"), strings.Index(r.stdout, "agent.coder: Destroying..."); i < 0 || j < i {
		t.Errorf("the snapshot was not taken before the destroy:\n%s", r.stdout)
	}
	now := snapAgentContainer(t, cli, lineage)
	if now.ID == old.ID || now.Command != "sleep 700" {
		t.Fatalf("not replaced: %+v", now)
	}
	if got := dockertest.Sh(t, cli, now.ID, "cat /workspace/f"); got != "hi\n" {
		t.Errorf("the new container has /workspace/f = %q, want the file written before the replacement", got)
	}
	rec, ok := snapRecord(t, dir, "agent.coder.snapshot.1")
	if !ok || !strings.HasPrefix(rec.Computed["image"], "bf-"+lineage[:8]+"-coder-snap:1") || rec.Computed["source"] != old.ID || rec.ID == "" {
		t.Errorf("snapshot record: %+v", rec)
	}
	if now.ImageID != rec.ID {
		t.Errorf("the new container runs image %s, not the snapshot %s", now.ImageID, rec.ID)
	}
	show := mustRun(t, dir, "state", "show", "agent.coder.snapshot.1").stdout
	snapWant(t, "state show", show, "image       = "+rec.Computed["image"], "size        = ", "created     = ", "source      = "+old.ID)
	if r := mustRun(t, dir, "plan"); !strings.Contains(r.stdout, "No changes.") {
		t.Errorf("not converged:\n%s", r)
	}
}

// TestE2ESnapshotBeforeDestroyResumes: destroy under before = ["destroy"]
// keeps the snapshot image, and applying again resumes with the file.
func TestE2ESnapshotBeforeDestroyResumes(t *testing.T) {
	parallel(t)
	cli := dockertest.Client(t)
	img := dockertest.BusyboxImage(t, cli)
	dir := t.TempDir()
	writeBottlefile(t, dir, policyBottlefile, "", "", img, 600, `["destroy"]`, 10)
	mustRun(t, dir, "apply", "-auto-approve")
	lineage := snapLineage(t, cli, dir)
	dockertest.Sh(t, cli, snapAgentContainer(t, cli, lineage).ID, "echo kept > /workspace/f")

	r := mustRun(t, dir, "plan", "-destroy")
	snapWant(t, "destroy plan", r.stdout, "@ agent.coder.snapshot.1 (snapshot)", "- agent.coder (container)")
	if strings.Contains(r.stdout, "- agent.coder.snapshot.1") {
		t.Errorf("the destroy plan removes the snapshot:\n%s", r.stdout)
	}
	mustRun(t, dir, "destroy", "-auto-approve")
	if left := containersWith(t, cli, drivers.LabelLineage+"="+lineage); len(left) != 0 {
		t.Fatalf("containers left after destroy: %+v", left)
	}
	rec, ok := snapRecord(t, dir, "agent.coder.snapshot.1")
	if !ok || !snapImageExists(t, cli, rec.Computed["image"]) {
		t.Fatalf("the snapshot did not survive the destroy: %+v", rec)
	}

	r = mustRun(t, dir, "plan")
	snapWant(t, "plan after destroy", r.stdout, "it resumes from agent.coder.snapshot.1")
	mustRun(t, dir, "apply", "-auto-approve")
	id := snapAgentContainer(t, cli, lineage).ID
	if got := dockertest.Sh(t, cli, id, "cat /workspace/f"); got != "kept\n" {
		t.Errorf("the resumed container has /workspace/f = %q", got)
	}
	if r := mustRun(t, dir, "plan"); !strings.Contains(r.stdout, "No changes.") {
		t.Errorf("not converged:\n%s", r)
	}

	// No policy covers a replace: the plan says what it would discard
	// (the container's writable layer, as the engine measures it), or,
	// on an engine that would read every file to measure it, that it
	// discards whatever was written, and why it was not measured.
	dockertest.Sh(t, cli, id, "head -c 307200 /dev/zero > /workspace/big")
	writeBottlefile(t, dir, policyBottlefile, "", "", img, 700, `["destroy"]`, 10)
	r = mustRun(t, dir, "plan")
	if ok, why := engineMeasuresWrites(t, cli); ok {
		snapWant(t, "plan of an uncovered replace", r.stdout, "this replace discards 300.", "KiB written inside it since ", `no snapshot_policy covers "replace"`)
	} else {
		snapWant(t, "plan of an uncovered replace", r.stdout, "this replace discards whatever was written inside it since ", "(not measured: "+why+`); no snapshot_policy covers "replace"`)
	}
}

// TestE2ESnapshotPrune: with keep_last = 2 and four snapshots, plan prunes
// the two oldest and apply removes their images.
func TestE2ESnapshotPrune(t *testing.T) {
	parallel(t)
	cli := dockertest.Client(t)
	img := dockertest.BusyboxImage(t, cli)
	dir := t.TempDir()
	var lineage string
	for i := range 4 {
		writeBottlefile(t, dir, policyBottlefile, "", "", img, 600+i, `["replace"]`, 100)
		mustRun(t, dir, "apply", "-auto-approve")
		if i == 0 {
			lineage = snapLineage(t, cli, dir)
		}
		dockertest.Sh(t, cli, snapAgentContainer(t, cli, lineage).ID, fmt.Sprintf("echo %d >> /workspace/f", i))
	}
	mustRun(t, dir, "apply", "-auto-approve", "-replace=agent.coder")
	refs := map[int]string{}
	for n := 1; n <= 4; n++ {
		rec, ok := snapRecord(t, dir, fmt.Sprintf("agent.coder.snapshot.%d", n))
		if !ok || !snapImageExists(t, cli, rec.Computed["image"]) {
			t.Fatalf("snapshot %d missing: %+v", n, rec)
		}
		refs[n] = rec.Computed["image"]
	}

	writeBottlefile(t, dir, policyBottlefile, "", "", img, 603, `["replace"]`, 2)
	r := mustRun(t, dir, "plan")
	snapWant(t, "plan", r.stdout,
		"# agent.coder.snapshot.1 will be destroyed",
		"# agent.coder.snapshot.2 will be destroyed",
		"snapshot_policy.keep_last = 2",
		"its snapshot_policy changed, and is recorded",
		"Plan: 0 to add, 1 to change, 2 to destroy, 2 snapshots deleted.")
	if strings.Contains(r.stdout, "agent.coder.snapshot.3 will") || strings.Contains(r.stdout, "agent.coder.snapshot.4 will") {
		t.Errorf("plan prunes a snapshot it should keep:\n%s", r.stdout)
	}
	mustRun(t, dir, "apply", "-auto-approve")
	for n, ref := range refs {
		if exists := snapImageExists(t, cli, ref); exists != (n > 2) {
			t.Errorf("after the prune, image %s exists: %t", ref, exists)
		}
	}
	list := mustRun(t, dir, "state", "list").stdout
	if strings.Contains(list, "snapshot.1") || strings.Contains(list, "snapshot.2") || !strings.Contains(list, "snapshot.4") {
		t.Errorf("state after the prune:\n%s", list)
	}
	// The newer snapshots, committed on top of the pruned ones, still boot.
	mustRun(t, dir, "apply", "-auto-approve", "-replace=agent.coder")
	if got := dockertest.Sh(t, cli, snapAgentContainer(t, cli, lineage).ID, "cat /workspace/f"); got != "0\n1\n2\n3\n" {
		t.Errorf("after pruning and resuming, /workspace/f = %q", got)
	}
	if r := mustRun(t, dir, "plan"); !strings.Contains(r.stdout, "No changes.") {
		t.Errorf("not converged:\n%s", r)
	}
}

// TestE2ESnapshotFlattenChain: snapshot-and-resume cycles past a low
// flatten_depth keep working, flattening on the way, and the file written
// in the first cycle is still there at the end.
func TestE2ESnapshotFlattenChain(t *testing.T) {
	parallel(t)
	cli := dockertest.Client(t)
	img := dockertest.BusyboxImage(t, cli)
	dir := t.TempDir()
	const depth = 3
	rt := fmt.Sprintf("runtime \"local\" {\n  driver        = \"docker\"\n  flatten_depth = %d\n}\n", depth)
	const cycles = 6
	var lineage string
	var want strings.Builder
	var depths []string
	for i := 0; i <= cycles; i++ {
		writeBottlefile(t, dir, policyBottlefile, rt, "runtime = runtime.local", img, 600+i, `["replace"]`, 2)
		mustRun(t, dir, "apply", "-auto-approve")
		if i == 0 {
			lineage = snapLineage(t, cli, dir)
		} else {
			rec, ok := snapRecord(t, dir, fmt.Sprintf("agent.coder.snapshot.%d", i))
			if !ok {
				t.Fatalf("cycle %d took no snapshot", i)
			}
			depths = append(depths, rec.Computed["depth"])
			if d, _ := strconv.Atoi(rec.Computed["depth"]); d < 1 || d >= depth {
				t.Errorf("cycle %d: snapshot of depth %s, want below flatten_depth %d", i, rec.Computed["depth"], depth)
			}
		}
		id := snapAgentContainer(t, cli, lineage).ID
		if got := dockertest.Sh(t, cli, id, "cat /workspace/f 2>/dev/null"); got != want.String() {
			t.Fatalf("cycle %d: /workspace/f = %q, want %q", i, got, want.String())
		}
		line := fmt.Sprintf("cycle %d\n", i)
		dockertest.Sh(t, cli, id, "printf '"+line+"' >> /workspace/f")
		want.WriteString(line)
	}
	t.Logf("snapshot depths over %d cycles with flatten_depth %d: %v", cycles, depth, depths)
	if !slices.Contains(depths, "1") {
		t.Errorf("no snapshot was flattened: depths %v", depths)
	}
	got := dockertest.Sh(t, cli, snapAgentContainer(t, cli, lineage).ID, "cat /workspace/f")
	if !strings.HasPrefix(got, "cycle 0\n") || got != want.String() {
		t.Errorf("at the end /workspace/f = %q, want %q", got, want.String())
	}
	if r := mustRun(t, dir, "plan"); !strings.Contains(r.stdout, "No changes.") {
		t.Errorf("not converged:\n%s", r)
	}
}

// TestE2ESnapshotExportImport: a snapshot exported from one state is
// imported into another (another directory, as on another machine), where
// the agent is then created from it with the file.
func TestE2ESnapshotExportImport(t *testing.T) {
	parallel(t)
	cli := dockertest.Client(t)
	img := dockertest.BusyboxImage(t, cli)
	src := t.TempDir()
	writeBottlefile(t, src, policyBottlefile, "", "", img, 600, `["replace"]`, 10)
	mustRun(t, src, "apply", "-auto-approve")
	srcLineage := snapLineage(t, cli, src)
	dockertest.Sh(t, cli, snapAgentContainer(t, cli, srcLineage).ID, "echo travelled > /workspace/f")
	writeBottlefile(t, src, policyBottlefile, "", "", img, 601, `["replace"]`, 10)
	mustRun(t, src, "apply", "-auto-approve")

	tarball := filepath.Join(t.TempDir(), "coder.tar")
	r := mustRun(t, src, "snapshot", "export", "agent.coder.snapshot.1", "-o", tarball)
	snapWant(t, "export", r.stdout, "Exported agent.coder.snapshot.1", tarball)
	if fi, err := os.Stat(tarball); err != nil || fi.Size() < 1<<20 {
		t.Fatalf("the export wrote %v (%v)", fi, err)
	}
	if r := bottlefile(t, src, "snapshot", "export", "agent.coder", "-o", tarball); r.code != 1 || !strings.Contains(r.stderr, "not a snapshot") {
		t.Errorf("exporting a container: %s", r)
	}

	dst := t.TempDir()
	writeBottlefile(t, dst, policyBottlefile, "", "", img, 600, `["replace"]`, 10)
	r = mustRun(t, dst, "snapshot", "import", tarball)
	snapWant(t, "import", r.stdout, "as agent.coder.snapshot.1", "The next apply creates agent.coder from it")
	dstLineage := snapLineage(t, cli, dst)
	if dstLineage == srcLineage {
		t.Fatal("the two states share a lineage")
	}
	rec, ok := snapRecord(t, dst, "agent.coder.snapshot.1")
	if !ok || rec.Computed["image"] != "bf-"+dstLineage[:8]+"-coder-snap:1" || rec.Runtime != "default" {
		t.Fatalf("imported record: %+v", rec)
	}
	r = mustRun(t, dst, "plan")
	snapWant(t, "plan after import", r.stdout, "it resumes from agent.coder.snapshot.1", "Plan: ")
	if strings.Contains(r.stdout, "agent.coder.snapshot.1 will") || strings.Contains(r.stdout, "agent.coder.snapshot.1 must") {
		t.Errorf("the imported snapshot is not in line with the configuration:\n%s", r.stdout)
	}
	mustRun(t, dst, "apply", "-auto-approve")
	if got := dockertest.Sh(t, cli, snapAgentContainer(t, cli, dstLineage).ID, "cat /workspace/f"); got != "travelled\n" {
		t.Errorf("the agent created from the import has /workspace/f = %q", got)
	}
	// A second import takes the next number.
	r = mustRun(t, dst, "snapshot", "import", "-agent=agent.coder", tarball)
	snapWant(t, "second import", r.stdout, "as agent.coder.snapshot.2", "agent.coder exists now")
	if r := mustRun(t, dst, "plan"); !strings.Contains(r.stdout, "No changes.") {
		t.Errorf("not converged after imports:\n%s", r)
	}
	if r := bottlefile(t, dst, "snapshot", "import", "-agent=agent.nobody", tarball); r.code != 1 || !strings.Contains(r.stderr, "declares no such agent") {
		t.Errorf("import for a missing agent: %s", r)
	}
}

// ---- a second engine ----

// snapSecondEngine starts another dockerd beside the machine's, with its own
// data root, exec root, pid file and socket, no bridge and no iptables,
// in a network namespace of its own, and stops it by its PID when the test
// ends. It returns the engine's host address and a client.
//
// The namespace matters: dockerd 20.10 started with --bridge none deletes
// any interface named docker0 it can see (removeDefaultBridgeInterface),
// which on the host is the first engine's default bridge. In its own
// namespace it sees none, and whatever networks it makes stay there too.
func snapSecondEngine(t *testing.T, first *client.Client) (string, *client.Client) {
	t.Helper()
	dockerd, err := exec.LookPath("dockerd")
	if err != nil {
		dockerd = "/usr/sbin/dockerd"
	}
	if _, err := os.Stat(dockerd); err != nil {
		snapRequire(t, "no dockerd binary to start a second engine with: %v", err)
	}
	if os.Geteuid() != 0 {
		snapRequire(t, "a second dockerd needs root (running as uid %d)", os.Geteuid())
	}
	info, err := first.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// A short path: the socket's must fit in 108 bytes.
	dir, err := os.MkdirTemp("", "bf-engine2-")
	if err != nil {
		t.Fatal(err)
	}
	// The machine's /etc/docker/daemon.json may set data-root, which a
	// flag may not repeat: give the second engine a file of its own, with
	// the first one's storage driver (overlay may not nest here).
	cfg := filepath.Join(dir, "daemon.json")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`{"storage-driver": %q}`, info.Driver)), 0o644); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "docker.sock")
	logf, err := os.Create(filepath.Join(dir, "dockerd.log"))
	if err != nil {
		t.Fatal(err)
	}
	hostBridge := hasInterface("docker0")
	args := []string{
		"--config-file", cfg,
		"--data-root", filepath.Join(dir, "root"),
		"--exec-root", filepath.Join(dir, "exec"),
		"--pidfile", filepath.Join(dir, "pid"),
		"-H", "unix://" + sock,
		// Its own containerd namespaces: where the machine's containerd is
		// shared, the second engine must not see the first one's tasks.
		"--containerd-namespace", "bf-" + filepath.Base(dir),
		"--containerd-plugins-namespace", "bf-" + filepath.Base(dir) + "-plugins",
	}
	if os.Getenv(engine2BridgeEnv) == "1" {
		t.Logf("%s=1: the second engine has its own default bridge and iptables rules, inside its network namespace", engine2BridgeEnv)
	} else {
		args = append(args, "--bridge", "none", "--iptables=false", "--ip-masq=false")
	}
	// sh brings the namespace's loopback up, then becomes dockerd (same PID).
	cmd := exec.Command("sh", append([]string{"-c", `ip link set lo up 2>/dev/null; exec "$0" "$@"`, dockerd}, args...)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Cloneflags: syscall.CLONE_NEWNET}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting a second dockerd in a network namespace of its own: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		logf.Close()
		if err := os.RemoveAll(dir); err != nil {
			t.Logf("removing the second engine's files: %v", err)
		}
	})
	host := "unix://" + sock
	cli, err := client.NewClientWithOpts(client.WithHost(host), client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := cli.Ping(ctx)
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) || cmd.ProcessState != nil {
			log, _ := os.ReadFile(filepath.Join(dir, "dockerd.log"))
			t.Fatalf("the second dockerd did not answer at %s: %v\n%s", host, err, log)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if hostBridge && !hasInterface("docker0") {
		t.Fatal("starting the second dockerd removed the host's docker0")
	}
	return host, cli
}

// engine2BridgeEnv set to 1 starts the second engine with dockerd's
// defaults (its own docker0 and iptables rules, all inside its network
// namespace, so the host's are not touched) instead of --bridge none
// --iptables=false: the docker driver then agrees to plan bottles on it,
// and TestE2EMigrateBetweenEngines migrates through plan and apply.
const engine2BridgeEnv = "BOTTLEFILE_TEST_ENGINE2_BRIDGE"

func hasInterface(name string) bool {
	_, err := net.InterfaceByName(name)
	return err == nil
}

func snapRequire(t *testing.T, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if os.Getenv(dockertest.RequireEnv) == "1" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// snapCopyImage streams an image from one engine to another (save into load).
func snapCopyImage(t *testing.T, from, to *client.Client, ref string) {
	t.Helper()
	ctx := context.Background()
	rc, err := from.ImageSave(ctx, []string{ref})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	resp, err := to.ImageLoad(ctx, rc, client.ImageLoadWithQuiet(true))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		t.Fatal(err)
	}
}

// secondEngineOptOut is what a runtime block on the second engine needs
// so that bottlefile agrees to plan bottles there: the engine runs with
// --iptables=false (so as never to touch the host's firewall), on which
// the docker driver refuses to promise egress isolation unless told, in
// so many words, that the runtime is not isolated.
const secondEngineOptOut = "insecure_skip_isolation_check = true"

const migrateBottlefile = `
runtime "a" {
  driver = "docker"
}

runtime "b" {
  driver = "docker"
  host   = %q
  %s
}

agent "coder" {
  runtime = runtime.%s
  image   = %q
  command = ["sleep", "600"]
  workdir = "/workspace"
}
`

// TestE2EMigrateBetweenEngines moves an agent from the machine's engine
// to a second dockerd. Where the driver plans bottles on the second engine
// the move is one plan and apply (=> migrate); where it refuses to (no
// isolation on an --iptables=false engine, see secondEngineOptOut) the
// same move is made with snapshot export and import through the binary,
// and the migration's driver steps (snapshot, save piped into load, create
// from the snapshot, remove the original) run on the two engines directly.
func TestE2EMigrateBetweenEngines(t *testing.T) {
	parallel(t)
	cli := dockertest.Client(t)
	img := dockertest.BusyboxImage(t, cli)
	host, cli2 := snapSecondEngine(t, cli)
	snapCopyImage(t, cli, cli2, img) // for anything not migrated

	dir := t.TempDir()
	writeBottlefile(t, dir, migrateBottlefile, host, secondEngineOptOut, "a", img)
	mustRun(t, dir, "apply", "-auto-approve")
	lineage := snapLineage(t, cli, dir)
	t.Cleanup(func() { snapRemoveImages(t, cli2, lineage) })
	old := snapAgentContainer(t, cli, lineage)
	dockertest.Sh(t, cli, old.ID, "echo migrated > /workspace/f")

	writeBottlefile(t, dir, migrateBottlefile, host, secondEngineOptOut, "b", img)
	r := bottlefile(t, dir, "plan")
	if r.code != 0 && strings.Contains(r.stderr, "cannot promise egress isolation") {
		t.Logf("bottlefile refuses to plan bottles on the second engine (dockerd --iptables=false), so the move is made with snapshot export/import; the refusal:\n%s", r.stderr)
		snapMigrateByExport(t, cli, cli2, dir, lineage, host, img)
		snapMigrateDriverSteps(t, cli, cli2, host)
		return
	}
	if r.code != 0 {
		t.Fatalf("plan of the migration: %s", r)
	}
	snapWant(t, "migration plan", r.stdout,
		"=> agent.coder (container)",
		`its runtime changes from "a" to "b"`,
		"@ agent.coder.snapshot.1 (snapshot)",
		`committed on runtime "a" and moved to "b"`)
	mustRun(t, dir, "apply", "-auto-approve")
	moved := snapAgentContainer(t, cli2, lineage)
	if got := dockertest.Sh(t, cli2, moved.ID, "cat /workspace/f"); got != "migrated\n" {
		t.Errorf("on the new engine /workspace/f = %q", got)
	}
	if left := containersWith(t, cli, drivers.LabelAddress+"=agent.coder", drivers.LabelLineage+"="+lineage); len(left) != 0 {
		t.Errorf("the old container is still on the first engine: %+v", left)
	}
	snapWant(t, "state show", mustRun(t, dir, "state", "show", "agent.coder").stdout, "runtime     = b")
	if r := mustRun(t, dir, "plan"); !strings.Contains(r.stdout, "No changes.") {
		t.Errorf("not converged after the migration:\n%s", r)
	}
}

// snapMigrateByExport moves the agent's filesystem to the second engine with
// the binary alone: a snapshot block taken on engine a, exported to a
// file, imported into the agent's new runtime b; state records it there,
// and the image on engine b holds the file.
func snapMigrateByExport(t *testing.T, cli, cli2 *client.Client, dir, lineage, host, img string) {
	t.Helper()
	writeBottlefile(t, dir, migrateBottlefile+"\nsnapshot \"move\" {\n  agent = agent.coder\n}\n", host, secondEngineOptOut, "a", img)
	mustRun(t, dir, "apply", "-auto-approve")
	tarball := filepath.Join(t.TempDir(), "move.tar")
	mustRun(t, dir, "snapshot", "export", "snapshot.move", "-o", tarball)

	// The agent now belongs on b: the import goes to b's engine.
	writeBottlefile(t, dir, migrateBottlefile, host, secondEngineOptOut, "b", img)
	r := mustRun(t, dir, "snapshot", "import", tarball)
	snapWant(t, "import", r.stdout, "as agent.coder.snapshot.1 on runtime \"b\"")
	rec, ok := snapRecord(t, dir, "agent.coder.snapshot.1")
	if !ok || rec.Runtime != "b" {
		t.Fatalf("the imported snapshot is not recorded on runtime b: %+v", rec)
	}
	info, err := cli2.ImageInspect(context.Background(), rec.Computed["image"])
	if err != nil || info.ID != rec.ID {
		t.Fatalf("the imported image on engine b: %v (%s, recorded %s)", err, info.ID, rec.ID)
	}
	if got := dockertest.RunImage(t, cli2, rec.Computed["image"], "cat", "/workspace/f"); got != "migrated\n" {
		t.Errorf("on engine b the snapshot has /workspace/f = %q", got)
	}
	snapWant(t, "state show", mustRun(t, dir, "state", "show", "agent.coder.snapshot.1").stdout, "runtime     = b")
}

// snapMigrateDriverSteps runs what the executor does for "=> migrate" with the
// docker driver on two engines: snapshot on the old one, ExportSnapshot
// piped into ImportSnapshot, create on the new one booting from it, check
// it runs with the file, delete the old container and snapshot.
func snapMigrateDriverSteps(t *testing.T, cli, cli2 *client.Client, host string) {
	t.Helper()
	ctx := context.Background()
	lineage := dockertest.NewLineage()
	t.Cleanup(func() { snapRemoveImages(t, cli, lineage); snapRemoveImages(t, cli2, lineage) })
	img := dockertest.BusyboxImage(t, cli)
	conf := func(h string) drivers.Driver {
		d, err := docker.New(hclog.NewNullLogger())
		if err != nil {
			t.Fatal(err)
		}
		hv := cty.NullVal(cty.String)
		if h != "" {
			hv = cty.StringVal(h)
		}
		if err := d.Configure(ctx, drivers.ConfigureRequest{Runtime: "x", Config: cty.ObjectVal(map[string]cty.Value{"host": hv})}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.(drivers.Closer).Close() })
		return d
	}
	a, b := conf(""), conf(host)
	apply := func(d drivers.Driver, req drivers.ApplyRequest) drivers.ApplyResponse {
		t.Helper()
		req.Lineage = lineage
		if req.Hash == "" {
			req.Hash = "h-" + req.Object.Addr
		}
		resp, err := d.Apply(ctx, req)
		if err != nil {
			t.Fatalf("%s %s: %v", req.Op, req.Object.Addr, err)
		}
		return resp
	}
	agent := &drivers.AgentSpec{
		Addr: "agent.coder",
		Name: "coder",
		Workload: drivers.MustWorkload(map[string]cty.Value{
			"image":   cty.StringVal(img),
			"command": cty.ListVal([]cty.Value{cty.StringVal("sleep"), cty.StringVal("600")}),
			"workdir": cty.StringVal("/workspace"),
		}),
	}
	netObj := drivers.Object{Addr: "agent.coder.network", Kind: "network", Attrs: map[string]cty.Value{"internal": cty.True}}
	ctrObj := drivers.Object{Addr: "agent.coder", Kind: "container", Workload: true, DependsOn: []string{netObj.Addr}, Attrs: map[string]cty.Value{
		"image": drivers.WorkloadAttr(agent.Workload, "image"), "command": drivers.WorkloadAttr(agent.Workload, "command"), "workdir": drivers.WorkloadAttr(agent.Workload, "workdir"), "network": cty.StringVal(netObj.Addr)}}
	snapObj := drivers.Object{Addr: "agent.coder.snapshot.1", Kind: drivers.KindSnapshot, Attrs: map[string]cty.Value{
		"agent": cty.StringVal("agent.coder"), "description": cty.StringVal("before migrate"), "triggers": cty.NullVal(cty.Map(cty.String)), "policy": cty.True}}

	oldNet := apply(a, drivers.ApplyRequest{Op: drivers.OpCreate, Object: netObj})
	oldCtr := apply(a, drivers.ApplyRequest{Op: drivers.OpCreate, Object: ctrObj})
	dockertest.Sh(t, cli, oldCtr.ID, "echo driver-move > /workspace/f")
	taken := apply(a, drivers.ApplyRequest{Op: drivers.OpCreate, Object: snapObj, Agent: agent})

	pr, pw := io.Pipe()
	exportErr := make(chan error, 1)
	go func() {
		err := a.(drivers.SnapshotExporter).ExportSnapshot(ctx, taken.Computed["image"], pw)
		pw.CloseWithError(err)
		exportErr <- err
	}()
	start := time.Now()
	moved, err := b.(drivers.SnapshotImporter).ImportSnapshot(ctx, drivers.ImportRequest{Lineage: lineage, Object: snapObj, Hash: "h-" + snapObj.Addr}, pr)
	pr.CloseWithError(err)
	if xerr := <-exportErr; err != nil || xerr != nil {
		t.Fatalf("moving the snapshot: import %v, export %v", err, xerr)
	}
	t.Logf("snapshot streamed from engine a to engine b in %s (%s bytes)", time.Since(start).Round(time.Millisecond), moved.Computed["size"])
	if moved.ID != taken.ID || moved.Computed["image"] != taken.Computed["image"] {
		t.Errorf("the moved snapshot changed: %+v -> %+v", taken, moved)
	}

	apply(b, drivers.ApplyRequest{Op: drivers.OpCreate, Object: netObj})
	newCtr := apply(b, drivers.ApplyRequest{Op: drivers.OpCreate, Object: ctrObj, BootImage: moved.Computed["image"]})
	if got := dockertest.Sh(t, cli2, newCtr.ID, "cat /workspace/f"); got != "driver-move\n" {
		t.Errorf("on engine b the migrated container has /workspace/f = %q", got)
	}
	apply(a, drivers.ApplyRequest{Op: drivers.OpDelete, ID: taken.ID, Object: drivers.Object{Addr: snapObj.Addr, Kind: snapObj.Kind}})
	apply(a, drivers.ApplyRequest{Op: drivers.OpDelete, ID: oldCtr.ID, Object: drivers.Object{Addr: ctrObj.Addr, Kind: ctrObj.Kind}})
	apply(a, drivers.ApplyRequest{Op: drivers.OpDelete, ID: oldNet.ID, Object: drivers.Object{Addr: netObj.Addr, Kind: netObj.Kind}})
	liveA, err := a.Read(ctx, drivers.ReadRequest{Lineage: lineage})
	if err != nil || len(liveA.Objects) != 0 {
		t.Errorf("left on engine a: %+v (%v)", liveA.Objects, err)
	}
	liveB, err := b.Read(ctx, drivers.ReadRequest{Lineage: lineage})
	if err != nil {
		t.Fatal(err)
	}
	var addrs []string
	for _, o := range liveB.Objects {
		addrs = append(addrs, o.Kind+" "+o.Addr)
	}
	if want := []string{"container agent.coder", "network agent.coder.network", "snapshot agent.coder.snapshot.1"}; !slices.Equal(addrs, want) {
		t.Errorf("on engine b: %v, want %v", addrs, want)
	}
	f := filters.NewArgs(filters.Arg("label", drivers.LabelLineage+"="+lineage))
	if imgs, _ := cli.ImageList(ctx, image.ListOptions{All: true, Filters: f}); len(imgs) != 0 {
		t.Errorf("images left on engine a: %d", len(imgs))
	}
}

// TestE2ESnapshotTakeListRm: snapshot take commits a running agent without
// touching it, prunes by keep_last, list shows what it took, and rm leaves
// no image of the lineage while the agent keeps running.
func TestE2ESnapshotTakeListRm(t *testing.T) {
	parallel(t)
	cli := dockertest.Client(t)
	img := dockertest.BusyboxImage(t, cli)
	dir := t.TempDir()
	writeBottlefile(t, dir, policyBottlefile, "", "", img, 600, `["destroy"]`, 1)
	mustRun(t, dir, "apply", "-auto-approve")
	lineage := snapLineage(t, cli, dir)
	ctr := snapAgentContainer(t, cli, lineage)
	dockertest.Sh(t, cli, ctr.ID, "echo before-risky > /workspace/f")

	r := mustRun(t, dir, "snapshot", "take", "agent.coder", "-description", "before risky")
	if got := strings.TrimSpace(r.stdout[strings.LastIndex(strings.TrimRight(r.stdout, "\n"), "\n")+1:]); got != "agent.coder.snapshot.1" {
		t.Fatalf("take printed %q last:\n%s", got, r)
	}
	first, ok := snapRecord(t, dir, "agent.coder.snapshot.1")
	if !ok || !snapImageExists(t, cli, first.Computed["image"]) {
		t.Fatalf("take recorded %+v", first)
	}
	// keep_last = 1: the second take prunes the first, image and record.
	r = mustRun(t, dir, "snapshot", "take", "agent.coder")
	snapWant(t, "second take", r.stdout, "- agent.coder.snapshot.1", "snapshot_policy.keep_last = 1", "agent.coder.snapshot.2\n")
	if _, ok := snapRecord(t, dir, "agent.coder.snapshot.1"); ok || snapImageExists(t, cli, first.Computed["image"]) {
		t.Errorf("the second take kept agent.coder.snapshot.1")
	}
	if now := snapAgentContainer(t, cli, lineage); now.ID != ctr.ID || now.State != "running" {
		t.Errorf("take touched the agent: %+v", now)
	}

	list := mustRun(t, dir, "snapshot", "list").stdout
	snapWant(t, "list", list, "agent.coder.snapshot.2  agent.coder  take", "taken by snapshot take")
	if strings.Count(list, "\n") != 2 || strings.Contains(list, " 0 B ") {
		t.Errorf("list should have one row with a size:\n%s", list)
	}

	mustRun(t, dir, "snapshot", "rm", "-auto-approve", "agent.coder.snapshot.2")
	if list := mustRun(t, dir, "snapshot", "list", "-json").stdout; !strings.Contains(list, `"snapshots": []`) {
		t.Errorf("list after rm:\n%s", list)
	}
	ctx := context.Background()
	imgs, err := cli.ImageList(ctx, image.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", drivers.LabelLineage+"="+lineage))})
	if err != nil || len(imgs) != 0 {
		t.Errorf("images of the lineage after rm (%v): %+v", err, imgs)
	}
	if now := snapAgentContainer(t, cli, lineage); now.ID != ctr.ID || now.State != "running" {
		t.Errorf("rm touched the agent: %+v", now)
	}
	if r := mustRun(t, dir, "plan"); !strings.Contains(r.stdout, "No changes.") {
		t.Errorf("not converged after rm:\n%s", r)
	}
}
