package smolvm

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/zclconf/go-cty/cty"

	"github.com/bottlefile/bottlefile/drivers"
)

// withState returns a driver on the fake configured as runtime "vm" with
// a state directory (<dir>/.bottlefile), as the core configures it.
func (f *fake) withState(t testing.TB, runtime, dir string) *Driver {
	t.Helper()
	d := f.unconfigured(t)
	err := d.Configure(context.Background(), drivers.ConfigureRequest{
		Runtime: runtime, Config: cfgBinary(f.bin), StateDir: filepath.Join(dir, ".bottlefile"),
	})
	if err != nil {
		t.Fatalf("Configure: %v", err)
	}
	return d
}

func snapshotObject(addr, agent string) drivers.Object {
	return drivers.Object{Addr: addr, Kind: drivers.KindSnapshot, Attrs: map[string]cty.Value{
		"agent":       cty.StringVal(agent),
		"description": cty.NullVal(cty.String),
		"triggers":    cty.NullVal(cty.Map(cty.String)),
		"policy":      cty.True,
	}}
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// TestSnapshotLifecycle takes a snapshot of a running machine (stop, pack,
// start), lists it, restores an agent from it with its egress allowlist,
// deletes it while the restored machine still needs its pack, and deletes
// the machine.
func TestSnapshotLifecycle(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	dir := t.TempDir()
	d := f.withState(t, "vm", dir)
	ctx := context.Background()
	lineage := "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"
	name := "bf-0f1e2d3c-coder"

	a := agentSpec("coder", "alpine:3")
	a.Workload = drivers.WithWorkloadAttr(a.Workload, "egress", cty.ListVal([]cty.Value{cty.StringVal("api.anthropic.com"), cty.StringVal("10.1.0.0/16")}))
	obj := planOne(t, d, a)
	create(t, d, lineage, obj)
	if _, _, code := f.cli(t, "", "machine", "exec", "--name", name, "--", "touch", "/workspace/notes.md"); code != 0 {
		t.Fatal("touch in the guest")
	}

	f.resetCalls(t)
	snap := snapshotObject("agent.coder.snapshot.1", "agent.coder")
	resp, err := d.Apply(ctx, drivers.ApplyRequest{Op: drivers.OpCreate, Lineage: lineage, Object: snap, Hash: "snaphash", Agent: &a})
	if err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	base := filepath.Join(dir, ".bottlefile", "snapshots", "0f1e2d3c", "agent.coder.snapshot.1-1")
	checkCalls(t, f.calls(t), [][]string{
		{"machine", "ls", "--json"},
		{"machine", "stop", "--name", name},
		{"pack", "create", "--from-vm", name, "-o", base},
		{"machine", "start", "--name", name},
		{"machine", "exec", "--name", name, "--", "true"},
	})
	wantID := "./.bottlefile/snapshots/0f1e2d3c/agent.coder.snapshot.1-1.smolmachine"
	if resp.ID != wantID || resp.Snapshot.Image != wantID || resp.Snapshot.Source != name {
		t.Errorf("snapshot response: %+v", resp)
	}
	info, err := os.Stat(base + ".smolmachine")
	if err != nil || resp.Snapshot.Size != info.Size() {
		t.Errorf("size %d, pack %v %v", resp.Snapshot.Size, info, err)
	}
	if created := resp.Snapshot.Created; created.IsZero() || time.Since(created) > time.Minute {
		t.Errorf("created %v", created)
	}
	for _, p := range []string{base, base + ".smolmachine", base + ".json"} {
		if !exists(p) {
			t.Errorf("%s is missing", p)
		}
	}
	if m := f.machines(t); len(m) != 1 || m[0].State != "running" {
		t.Errorf("the machine is not running again after the snapshot: %+v", m)
	}

	read, err := d.Read(ctx, drivers.ReadRequest{Lineage: lineage})
	if err != nil {
		t.Fatal(err)
	}
	if len(read.Objects) != 2 || read.Objects[1].Addr != "agent.coder.snapshot.1" || read.Objects[1].Kind != drivers.KindSnapshot ||
		read.Objects[1].ID != wantID || read.Objects[1].Hash != "snaphash" {
		t.Fatalf("Read after the snapshot: %+v", read.Objects)
	}
	// Another runtime sharing the state directory does not see it, nor
	// does another lineage.
	if other, _ := f.withState(t, "other", dir).Read(ctx, drivers.ReadRequest{Lineage: lineage}); len(other.Objects) != 1 {
		t.Errorf("runtime other lists %+v", other.Objects)
	}
	if other, _ := d.Read(ctx, drivers.ReadRequest{Lineage: "0f1e2d3c-ffff-0000-0000-000000000000"}); len(other.Objects) != 0 {
		t.Errorf("another lineage with the same prefix lists %+v", other.Objects)
	}

	// Restore: the machine goes, and comes back from the pack with the
	// agent's settings and its allowlist, which packs never carry.
	if _, err := d.Apply(ctx, drivers.ApplyRequest{Op: drivers.OpDelete, Lineage: lineage, ID: name, Object: drivers.Object{Addr: "agent.coder", Kind: "machine"}}); err != nil {
		t.Fatal(err)
	}
	f.resetCalls(t)
	if _, err := d.Apply(ctx, drivers.ApplyRequest{Op: drivers.OpCreate, Lineage: lineage, Object: obj, Hash: "cafe01", BootImage: resp.Snapshot.Image}); err != nil {
		t.Fatalf("create from the snapshot: %v", err)
	}
	link := filepath.Join(dir, ".bottlefile", "boot", "0f1e2d3c", name+".smolmachine")
	calls := f.calls(t)
	want := []string{"machine", "create", "--name", name, "--from", link,
		"--allow-host", "api.anthropic.com", "--allow-cidr", "10.1.0.0/16",
		"--label", "io.bottlefile.lineage=" + lineage, "--label", "io.bottlefile.address=agent.coder", "--label", "io.bottlefile.config-hash=cafe01", "--label", "io.bottlefile.runtime=vm",
		"--", "sleep", "600"}
	if len(calls) < 2 || !slices.Equal(calls[1], want) {
		t.Errorf("create from the snapshot ran\n%q\nwant\n%q", calls, want)
	}
	if _, _, code := f.cli(t, "", "machine", "exec", "--name", name, "--", "test", "-e", "/workspace/notes.md"); code != 0 {
		t.Error("the restored machine lacks the file written before the snapshot")
	}

	// Deleting (pruning) the snapshot leaves the machine's own link, so it
	// still starts.
	if _, err := d.Apply(ctx, drivers.ApplyRequest{Op: drivers.OpDelete, Lineage: lineage, ID: resp.ID, Object: drivers.Object{Addr: snap.Addr, Kind: drivers.KindSnapshot}}); err != nil {
		t.Fatalf("delete snapshot: %v", err)
	}
	for _, p := range []string{base, base + ".smolmachine", base + ".json"} {
		if exists(p) {
			t.Errorf("%s is left after the delete", p)
		}
	}
	f.cli(t, "", "machine", "stop", "--name", name)
	if _, err := d.Apply(ctx, drivers.ApplyRequest{Op: drivers.OpStart, Lineage: lineage, ID: name, Object: obj}); err != nil {
		t.Errorf("starting the restored machine after its snapshot was deleted: %v", err)
	}
	if _, err := d.Apply(ctx, drivers.ApplyRequest{Op: drivers.OpDelete, Lineage: lineage, ID: resp.ID, Object: drivers.Object{Addr: snap.Addr, Kind: drivers.KindSnapshot}}); err != nil {
		t.Errorf("deleting a snapshot that is already gone: %v", err)
	}
	if _, err := d.Apply(ctx, drivers.ApplyRequest{Op: drivers.OpDelete, Lineage: lineage, ID: name, Object: drivers.Object{Addr: "agent.coder", Kind: "machine"}}); err != nil {
		t.Fatal(err)
	}
	if exists(link) {
		t.Error("the deleted machine's boot link is left")
	}
	if read, _ := d.Read(ctx, drivers.ReadRequest{Lineage: lineage}); len(read.Objects) != 0 {
		t.Errorf("Read after everything was deleted: %+v", read.Objects)
	}
}

// TestSnapshotStoppedMachine packs a stopped machine without starting it.
func TestSnapshotStoppedMachine(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	d := f.withState(t, "vm", t.TempDir())
	lineage := newLineage()
	a := agentSpec("coder", "alpine:3")
	id := create(t, d, lineage, planOne(t, d, a)).ID
	f.cli(t, "", "machine", "stop", "--name", id)
	f.resetCalls(t)
	if _, err := d.Apply(context.Background(), drivers.ApplyRequest{Op: drivers.OpCreate, Lineage: lineage, Object: snapshotObject("snapshot.s", "agent.coder"), Hash: "h", Agent: &a}); err != nil {
		t.Fatal(err)
	}
	for _, c := range f.calls(t) {
		if c[1] == "start" || c[1] == "stop" {
			t.Errorf("a stopped machine was %sed: %q", c[1], c)
		}
	}
	if m := f.machines(t); m[0].State != "stopped" {
		t.Errorf("state after the snapshot: %s", m[0].State)
	}
}

// failingRunner fails every call whose first arguments match.
type failingRunner struct {
	runner
	prefix []string
}

func (r failingRunner) run(ctx context.Context, args []string, env []string) ([]byte, error) {
	if len(args) >= len(r.prefix) && slices.Equal(args[:len(r.prefix)], r.prefix) {
		return nil, &cliError{Args: args, Code: 1, Stderr: "Error: pack failed on purpose\n"}
	}
	return r.runner.run(ctx, args, env)
}

// TestSnapshotFailures: a failed pack leaves no files and the machine
// running; a snapshot of an agent without a machine, or without a state
// directory, is an error.
func TestSnapshotFailures(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	dir := t.TempDir()
	d := f.withState(t, "vm", dir)
	d.newRunner = func(binary string) runner {
		return failingRunner{execRunner{binary: binary, env: f.env}, []string{"pack", "create"}}
	}
	if err := d.Configure(context.Background(), drivers.ConfigureRequest{Runtime: "vm", Config: cfgBinary(f.bin), StateDir: filepath.Join(dir, ".bottlefile")}); err != nil {
		t.Fatal(err)
	}
	lineage := newLineage()
	a := agentSpec("coder", "alpine:3")
	create(t, d, lineage, planOne(t, d, a))
	req := drivers.ApplyRequest{Op: drivers.OpCreate, Lineage: lineage, Object: snapshotObject("snapshot.s", "agent.coder"), Hash: "h", Agent: &a}
	_, err := d.Apply(context.Background(), req)
	if err == nil || !strings.Contains(err.Error(), "pack failed on purpose") {
		t.Fatalf("snapshot with a failing pack: %v", err)
	}
	if m := f.machines(t); m[0].State != "running" {
		t.Errorf("the machine was not started again after a failed pack: %s", m[0].State)
	}
	left, _ := filepath.Glob(filepath.Join(dir, ".bottlefile", "snapshots", "*", "*"))
	if len(left) != 0 {
		t.Errorf("a failed snapshot left files: %v", left)
	}

	other := agentSpec("ghost", "alpine:3")
	req.Agent = &other
	if _, err := d.Apply(context.Background(), req); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("snapshot of an agent without a machine: %v", err)
	}
	req.Agent = &a
	if _, err := f.driver(t).Apply(context.Background(), req); err == nil || !strings.Contains(err.Error(), "state directory") {
		t.Errorf("snapshot without a state directory: %v", err)
	}
}

// TestSnapshotDeleteStaysInside: a delete never removes a file outside
// the snapshots directory, whatever id the state holds.
func TestSnapshotDeleteStaysInside(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	dir := t.TempDir()
	d := f.withState(t, "vm", dir)
	victim := filepath.Join(dir, "precious.smolmachine")
	os.WriteFile(victim, []byte("x"), 0o644)
	for _, id := range []string{victim, "./precious.smolmachine", "./.bottlefile/snapshots/../../precious.smolmachine", "./.bottlefile/state.db"} {
		_, err := d.Apply(context.Background(), drivers.ApplyRequest{Op: drivers.OpDelete, Lineage: newLineage(), ID: id, Object: drivers.Object{Addr: "snapshot.s", Kind: drivers.KindSnapshot}})
		if err == nil {
			t.Errorf("delete of snapshot id %q succeeded", id)
		}
	}
	if !exists(victim) {
		t.Fatal("a snapshot delete removed a file outside the snapshots directory")
	}
}

// dockerSave is a minimal docker-save archive.
func dockerSave(t testing.TB) []byte {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for name, body := range map[string]string{
		"manifest.json": `[{"Config":"config.json","RepoTags":["snap:1"],"Layers":["layer.tar"]}]`,
		"config.json":   `{}`,
		"layer.tar":     strings.Repeat("\x00", 1024),
	} {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body))}); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(body))
	}
	tw.Close()
	return buf.Bytes()
}

// TestImportSnapshot: a docker-save stream lands in one .tar under the
// state directory, is listed as a snapshot, and a machine boots from it
// with --image; a stream that is not a docker-save archive leaves nothing.
func TestImportSnapshot(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	dir := t.TempDir()
	d := f.withState(t, "vm", dir)
	ctx := context.Background()
	lineage := "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"
	name := "bf-0f1e2d3c-coder"
	snap := snapshotObject("agent.coder.snapshot.1", "agent.coder")
	archive := dockerSave(t)

	resp, err := d.ImportSnapshot(ctx, drivers.ImportRequest{Lineage: lineage, Object: snap, Hash: "snaphash"}, bytes.NewReader(archive))
	if err != nil {
		t.Fatalf("ImportSnapshot: %v", err)
	}
	wantID := "./.bottlefile/snapshots/0f1e2d3c/agent.coder.snapshot.1-1.tar"
	if resp.ID != wantID || resp.Snapshot.Image != wantID || resp.Snapshot.Size != int64(len(archive)) {
		t.Errorf("import response: %+v", resp)
	}
	tarPath := filepath.Join(dir, ".bottlefile", "snapshots", "0f1e2d3c", "agent.coder.snapshot.1-1.tar")
	if got, err := os.ReadFile(tarPath); err != nil || !bytes.Equal(got, archive) {
		t.Fatalf("the tar under the state directory: %v", err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, ".bottlefile", "snapshots", "0f1e2d3c", "*"))
	if len(files) != 2 { // the tar and its metadata, no temporary copy
		t.Errorf("files after the import: %v", files)
	}
	if len(f.calls(t)) != 1 { // --version at Configure: an import runs no smolvm command
		t.Errorf("the import ran smolvm: %q", f.calls(t))
	}
	read, _ := d.Read(ctx, drivers.ReadRequest{Lineage: lineage})
	if len(read.Objects) != 1 || read.Objects[0].ID != wantID || read.Objects[0].Hash != "snaphash" {
		t.Errorf("Read after the import: %+v", read.Objects)
	}

	f.resetCalls(t)
	a := agentSpec("coder", "busybox:1")
	if _, err := d.Apply(ctx, drivers.ApplyRequest{Op: drivers.OpCreate, Lineage: lineage, Object: planOne(t, d, a), Hash: "h", BootImage: resp.Snapshot.Image}); err != nil {
		t.Fatalf("create from the imported snapshot: %v", err)
	}
	link := filepath.Join(dir, ".bottlefile", "boot", "0f1e2d3c", name+".tar")
	if c := f.calls(t); len(c) < 2 || !slices.Equal(c[1][:6], []string{"machine", "create", "--name", name, "--image", link}) {
		t.Errorf("create from the imported snapshot ran %q", c)
	}

	// Not a docker-save archive: an error, and no file left.
	_, err = d.ImportSnapshot(ctx, drivers.ImportRequest{Lineage: lineage, Object: snapshotObject("snapshot.bad", "agent.coder"), Hash: "h"}, strings.NewReader(`["a JSON stream"]`))
	if err == nil || !strings.Contains(err.Error(), "not a docker-save archive") {
		t.Errorf("import of a non-archive: %v", err)
	}
	// A stream that fails halfway: the error, and no file left.
	_, err = d.ImportSnapshot(ctx, drivers.ImportRequest{Lineage: lineage, Object: snapshotObject("snapshot.cut", "agent.coder"), Hash: "h"}, errReader{})
	if err == nil || !strings.Contains(err.Error(), "export broke") {
		t.Errorf("import of a broken stream: %v", err)
	}
	left, _ := filepath.Glob(filepath.Join(dir, ".bottlefile", "snapshots", "0f1e2d3c", "snapshot.*"))
	if len(left) != 0 {
		t.Errorf("failed imports left %v", left)
	}
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("export broke") }

// TestUnfinishedSnapshot: a crash while packing leaves metadata that Read
// reports without a hash (so it is never adopted), behind a whole one at
// the same address; a delete without an id removes both.
func TestUnfinishedSnapshot(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	dir := t.TempDir()
	d := f.withState(t, "vm", dir)
	lineage := newLineage()
	snapDir := filepath.Join(dir, ".bottlefile", "snapshots", drivers.LineagePrefix(lineage))
	whole, err := reserve(snapDir, snapshotMeta{Lineage: lineage, Address: "snapshot.s", ConfigHash: "h", Runtime: "vm", Format: formatPack}, packExt)
	if err != nil {
		t.Fatal(err)
	}
	m, _ := readMeta(whole)
	m.Complete = true
	writeMeta(whole, m)
	os.WriteFile(whole+packExt, []byte("pack"), 0o600)
	if _, err := reserve(snapDir, snapshotMeta{Lineage: lineage, Address: "snapshot.s", ConfigHash: "h", Runtime: "vm", Format: formatPack}, packExt); err != nil {
		t.Fatal(err)
	}
	read, _ := d.Read(context.Background(), drivers.ReadRequest{Lineage: lineage})
	if len(read.Objects) != 2 || read.Objects[0].Hash != "" || read.Objects[1].Hash != "h" || !strings.HasSuffix(read.Objects[1].ID, "snapshot.s-1.smolmachine") {
		t.Errorf("Read: %+v", read.Objects)
	}
	if _, err := d.Apply(context.Background(), drivers.ApplyRequest{Op: drivers.OpDelete, Lineage: lineage, Object: drivers.Object{Addr: "snapshot.s", Kind: drivers.KindSnapshot}}); err != nil {
		t.Fatal(err)
	}
	if left, _ := os.ReadDir(snapDir); len(left) != 0 {
		t.Errorf("left after a delete without an id: %v", left)
	}
}

func TestPlanRejectsSidecars(t *testing.T) {
	t.Parallel()
	d := newFake(t).driver(t)
	a := agentSpec("coder", "alpine:3")
	a.Sidecars = []drivers.SidecarSpec{{Addr: "agent.coder.sidecar.db", Name: "db", Workload: drivers.MustWorkload(map[string]cty.Value{"image": cty.StringVal("postgres:16")})}}
	_, err := d.Plan(context.Background(), drivers.PlanRequest{Agent: a})
	if err == nil || !strings.Contains(err.Error(), `sidecar "db" cannot run on smolvm`) {
		t.Errorf("Plan with a sidecar: %v", err)
	}
}

// TestSnapshotScenario runs the snapshot scenario the real-binary test
// runs too, against the fake.
func TestSnapshotScenario(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	dir := t.TempDir()
	runSnapshotScenario(t, f.withState(t, "vm", dir), dir, "alpine:3", func(name string, args ...string) int {
		_, _, code := f.cli(t, "", append([]string{"machine", "exec", "--name", name, "--"}, args...)...)
		return code
	})
}

// TestImportScenario runs the import scenario the real-binary test runs
// too, against the fake.
func TestImportScenario(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	runImportScenario(t, f.withState(t, "vm", t.TempDir()), bytes.NewReader(dockerSave(t)))
}

// deleteAll removes what Read reports for a lineage, when the test ends.
func deleteAll(t *testing.T, d drivers.Driver, lineage string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		read, err := d.Read(ctx, drivers.ReadRequest{Lineage: lineage})
		if err != nil {
			t.Errorf("cleanup: %v", err)
			return
		}
		for _, o := range read.Objects {
			if _, err := d.Apply(ctx, drivers.ApplyRequest{Op: drivers.OpDelete, Lineage: lineage, ID: o.ID, Object: drivers.Object{Addr: o.Addr, Kind: o.Kind}}); err != nil {
				t.Errorf("cleanup: %v", err)
			}
		}
	})
}

// runSnapshotScenario: a file written in the machine survives a snapshot
// and a re-creation from it; the snapshot is listed, and deleted with its
// files. exec runs a guest command and returns its exit code.
func runSnapshotScenario(t *testing.T, d *Driver, dir, image string, exec func(name string, args ...string) int) {
	t.Helper()
	ctx := t.Context()
	lineage := newLineage()
	deleteAll(t, d, lineage)
	a := agentSpec("coder", image)
	obj := planOne(t, d, a)
	id := create(t, d, lineage, obj).ID
	if code := exec(id, "touch", "/root/bf-snapshot-mark"); code != 0 {
		t.Fatalf("touch in the guest: exit %d", code)
	}
	snap, err := d.Apply(ctx, drivers.ApplyRequest{Op: drivers.OpCreate, Lineage: lineage, Object: snapshotObject("agent.coder.snapshot.1", "agent.coder"), Hash: "snaphash", Agent: &a})
	if err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	if !strings.HasSuffix(snap.ID, ".smolmachine") || snap.Snapshot.Image != snap.ID || snap.Snapshot.Source != id {
		t.Errorf("snapshot response: %+v", snap)
	}
	read, err := d.Read(ctx, drivers.ReadRequest{Lineage: lineage})
	if err != nil {
		t.Fatal(err)
	}
	if len(read.Objects) != 2 || !read.Objects[0].Running || read.Objects[1].ID != snap.ID || read.Objects[1].Hash != "snaphash" {
		t.Fatalf("Read after the snapshot (the machine running again, and the snapshot): %+v", read.Objects)
	}
	if code := exec(id, "test", "-e", "/root/bf-snapshot-mark"); code != 0 {
		t.Errorf("the machine lost its file across the snapshot: exit %d", code)
	}

	if _, err := d.Apply(ctx, drivers.ApplyRequest{Op: drivers.OpDelete, Lineage: lineage, ID: id, Object: drivers.Object{Addr: obj.Addr, Kind: obj.Kind}}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Apply(ctx, drivers.ApplyRequest{Op: drivers.OpCreate, Lineage: lineage, Object: obj, Hash: "h2", BootImage: snap.Snapshot.Image}); err != nil {
		t.Fatalf("create from the snapshot: %v", err)
	}
	if code := exec(id, "test", "-e", "/root/bf-snapshot-mark"); code != 0 {
		t.Errorf("the machine created from the snapshot lacks the file: exit %d", code)
	}
	if _, err := d.Apply(ctx, drivers.ApplyRequest{Op: drivers.OpDelete, Lineage: lineage, ID: snap.ID, Object: drivers.Object{Addr: "agent.coder.snapshot.1", Kind: drivers.KindSnapshot}}); err != nil {
		t.Fatalf("delete snapshot: %v", err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".bottlefile", "snapshots", drivers.LineagePrefix(lineage), "*")); len(left) != 0 {
		t.Errorf("files left after the snapshot was deleted: %v", left)
	}
	if read, _ := d.Read(ctx, drivers.ReadRequest{Lineage: lineage}); len(read.Objects) != 1 || read.Objects[0].Kind != kindMachine {
		t.Errorf("Read after the snapshot was deleted: %+v", read.Objects)
	}
}

// runImportScenario: a docker-save stream imported as a snapshot boots a
// machine.
func runImportScenario(t *testing.T, d *Driver, r io.Reader) {
	t.Helper()
	ctx := t.Context()
	lineage := newLineage()
	deleteAll(t, d, lineage)
	snap, err := d.ImportSnapshot(ctx, drivers.ImportRequest{Lineage: lineage, Object: snapshotObject("agent.coder.snapshot.1", "agent.coder"), Hash: "snaphash"}, r)
	if err != nil {
		t.Fatalf("ImportSnapshot: %v", err)
	}
	obj := planOne(t, d, agentSpec("coder", "busybox:1"))
	if _, err := d.Apply(ctx, drivers.ApplyRequest{Op: drivers.OpCreate, Lineage: lineage, Object: obj, Hash: "h", BootImage: snap.Snapshot.Image}); err != nil {
		t.Fatalf("create from the imported snapshot: %v", err)
	}
	read, err := d.Read(ctx, drivers.ReadRequest{Lineage: lineage})
	if err != nil {
		t.Fatal(err)
	}
	if len(read.Objects) != 2 || !read.Objects[0].Running || !strings.HasSuffix(read.Objects[0].ImageID, ".tar") || read.Objects[1].ID != snap.ID {
		t.Errorf("Read after booting from the import: %+v", read.Objects)
	}
}

// TestImageNamesASnapshot: an agent whose image is a snapshot's pack
// (image = snapshot.X.image) boots from a link of its own too, so the
// snapshot can go while the machine stays.
func TestImageNamesASnapshot(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	dir := t.TempDir()
	d := f.withState(t, "vm", dir)
	ctx := context.Background()
	lineage := newLineage()
	a := agentSpec("coder", "alpine:3")
	create(t, d, lineage, planOne(t, d, a))
	snap, err := d.Apply(ctx, drivers.ApplyRequest{Op: drivers.OpCreate, Lineage: lineage, Object: snapshotObject("snapshot.s", "agent.coder"), Hash: "h", Agent: &a})
	if err != nil {
		t.Fatal(err)
	}
	f.resetCalls(t)
	id := create(t, d, lineage, planOne(t, d, agentSpec("copy", snap.Snapshot.Image))).ID
	link := filepath.Join(dir, ".bottlefile", "boot", drivers.LineagePrefix(lineage), id+".smolmachine")
	if c := f.calls(t); len(c) < 2 || !slices.Equal(c[1][4:6], []string{"--from", link}) {
		t.Errorf("create from snapshot.s.image ran %q", c)
	}
	if _, err := d.Apply(ctx, drivers.ApplyRequest{Op: drivers.OpDelete, Lineage: lineage, ID: snap.ID, Object: drivers.Object{Addr: "snapshot.s", Kind: drivers.KindSnapshot}}); err != nil {
		t.Fatal(err)
	}
	f.cli(t, "", "machine", "stop", "--name", id)
	if _, _, code := f.cli(t, "", "machine", "start", "--name", id); code != 0 {
		t.Error("the machine cannot start once the snapshot it was made from is deleted")
	}
}

// TestSnapshotPackHoldsNoSecret: a pack holds the machine's env, so a
// sensitive value is taken out of the stopped machine for the pack and
// put back before it starts again, never on a command line; the pack
// holds the other env (so the test can fail) and not the secret, and the
// machine runs with it again.
func TestSnapshotPackHoldsNoSecret(t *testing.T) {
	t.Parallel()
	const secret = "sk-smolvm-test-51f0"
	f := newFake(t)
	dir := t.TempDir()
	d := f.withState(t, "vm", dir)
	lineage := newLineage()
	a := agentSpec("coder", "alpine:3")
	a.Workload = drivers.WithWorkloadAttr(a.Workload, "env", cty.MapVal(map[string]cty.Value{"ROLE": cty.StringVal("packed"), "API_KEY": cty.StringVal(secret).Mark("sensitive")}))
	name := create(t, d, lineage, planOne(t, d, a)).ID
	f.resetCalls(t)
	resp, err := d.Apply(context.Background(), drivers.ApplyRequest{Op: drivers.OpCreate, Lineage: lineage, Object: snapshotObject("agent.coder.snapshot.1", "agent.coder"), Hash: "h", Agent: &a})
	if err != nil {
		t.Fatal(err)
	}
	base := filepath.Join(dir, ".bottlefile", "snapshots", lineage[:8], "agent.coder.snapshot.1-1")
	checkCalls(t, f.calls(t), [][]string{
		{"machine", "ls", "--json"},
		{"machine", "stop", "--name", name},
		{"machine", "update", "--name", name, "--remove-env", "API_KEY"},
		{"pack", "create", "--from-vm", name, "-o", base},
		{"machine", "update", "--name", name, "-e", "API_KEY"},
		{"machine", "start", "--name", name},
		{"machine", "exec", "--name", name, "--", "true"},
	})
	pack, err := os.ReadFile(base + ".smolmachine")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(pack, []byte("ROLE=packed")) {
		t.Fatalf("the pack holds no env at all (%s): the test proves nothing", resp.ID)
	}
	if bytes.Contains(pack, []byte(secret)) {
		t.Errorf("the pack holds the secret:\n%s", pack)
	}
	if out, _, code := f.cli(t, "", "machine", "exec", "--name", name, "--", "env"); code != 0 || !strings.Contains(out, "API_KEY="+secret) {
		t.Errorf("after the snapshot the machine's env is %q (exit %d): want the secret back", out, code)
	}
}
