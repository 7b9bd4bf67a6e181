package nodesnap

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/diff"
	"github.com/containerd/containerd/v2/core/images"
	"github.com/containerd/containerd/v2/pkg/rootfs"
	"github.com/containerd/platforms"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/engine"
)

func TestLabelSnapshotOfIsTheEngines(t *testing.T) {
	if LabelSnapshotOf != engine.LabelSnapshotOf {
		t.Fatalf("LabelSnapshotOf = %q, the other drivers' is %q", LabelSnapshotOf, engine.LabelSnapshotOf)
	}
}

// TestBadInput: each bad argument is refused with an error naming it,
// before anything is reached.
func TestBadInput(t *testing.T) {
	ctx := context.Background()
	good := Ref{Registry: Registry{Host: "127.0.0.1:1"}, Repo: "bottlefile/a", Lineage: "l", Agent: "agent.a", Address: "snapshot.s"}
	node := Node{Socket: "/nonexistent/containerd.sock"}
	for _, tc := range []struct {
		name string
		edit func(*Ref)
		want string
	}{
		{"no registry", func(r *Ref) { r.Registry.Host = "" }, "no registry"},
		{"registry with a scheme", func(r *Ref) { r.Registry.Host = "http://r:5000" }, "not HOST[:PORT]"},
		{"registry with a path", func(r *Ref) { r.Registry.Host = "r:5000/team" }, "not HOST[:PORT]"},
		{"upper-case repo", func(r *Ref) { r.Repo = "Bottlefile/A" }, "not a registry repository"},
		{"empty repo", func(r *Ref) { r.Repo = "" }, "not a registry repository"},
		{"bad tag", func(r *Ref) { r.Tag = "a:b" }, "not a registry tag"},
		{"no lineage", func(r *Ref) { r.Lineage = "" }, "lineage, agent and address"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ref := good
			tc.edit(&ref)
			_, _, err := Commit(ctx, node, "c1", ref)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Commit: error %v, want one saying %q", err, tc.want)
			}
		})
	}
	if _, _, err := Commit(ctx, node, "", good); err == nil || !strings.Contains(err.Error(), "no container id") {
		t.Fatalf("Commit without a container id: %v", err)
	}
	if _, _, err := Commit(ctx, Node{}, "c1", good); err == nil || !strings.Contains(err.Error(), "no containerd socket") {
		t.Fatalf("Commit without a socket: %v", err)
	}
	if err := Delete(ctx, good.Registry, "bottlefile/a", "latest"); err == nil || !strings.Contains(err.Error(), "not a manifest digest") {
		t.Fatalf("Delete of a tag: %v", err)
	}
	if _, err := PushImage(ctx, good.Registry, "bottlefile/a", "", nil, ocispec.ImageConfig{}); err == nil || !strings.Contains(err.Error(), "at least one layer") {
		t.Fatalf("PushImage without layers: %v", err)
	}
	if _, err := PushImage(ctx, good.Registry, "bottlefile/a", "", []Layer{{DiffID: "sha256:nothex", Open: func() (io.ReadCloser, error) { return nil, nil }}}, ocispec.ImageConfig{}); err == nil || !strings.Contains(err.Error(), "diff id") {
		t.Fatalf("PushImage with a bad diff id: %v", err)
	}
}

// TestCommitNoContainer: a container the node does not have is named in
// the error (a real containerd answers).
func TestCommitNoContainer(t *testing.T) {
	need(t)
	cd := startContainerd(t)
	ref := Ref{Registry: Registry{Host: "127.0.0.1:1"}, Repo: "bottlefile/a", Lineage: "l", Agent: "agent.a", Address: "snapshot.s"}
	_, _, err := Commit(context.Background(), Node{Socket: "unix://" + cd.socket}, "nosuch", ref)
	if err == nil || !strings.Contains(err.Error(), "has no container nosuch in namespace k8s.io") {
		t.Fatalf("Commit of a missing container: %v", err)
	}
}

// TestCommit: a container that wrote a file is committed through its
// containerd and pushed by digest; a second, fresh containerd pulls that
// digest and a container of it reads the file, over busybox's layer; the
// image carries the snapshot's labels; the tag lists it, and Delete
// removes it.
func TestCommit(t *testing.T) {
	need(t)
	node := startContainerd(t)
	reg := startRegistry(t)
	base := node.importBusybox(t)
	node.run(t, base, "agent-1", "/bin/sh", "-c", "mkdir -p /work && echo kept-by-snapshot > /work/notes.txt && rm /etc/passwd")

	ref := Ref{Registry: Registry{Host: reg, PlainHTTP: true}, Repo: "bottlefile/nodesnap-test/agent-a", Tag: "snap-1",
		Lineage: "nodesnap-test", Agent: "agent.a", Address: "snapshot.s1"}
	dgst, size, err := Commit(context.Background(), Node{Socket: node.socket, Namespace: testNamespace}, "agent-1", ref)
	if err != nil {
		t.Fatalf("Commit: %v", err)
	}
	if _, err := digest.Parse(dgst); err != nil {
		t.Fatalf("Commit returned %q, not a digest: %v", dgst, err)
	}
	if size <= 0 {
		t.Fatalf("Commit returned a layer size of %d", size)
	}
	t.Logf("committed %s (new layer %d bytes)", dgst, size)

	// The node keeps no image of the commit.
	imgs, err := node.client.ImageService().List(node.ctx())
	if err != nil {
		t.Fatal(err)
	}
	if len(imgs) != 1 {
		t.Errorf("the node has %d images after the commit, want only busybox: %v", len(imgs), imgs)
	}

	other := startContainerd(t)
	pulled := other.pull(t, reg+"/"+ref.Repo+"@"+dgst)
	if got := pulled.Target().Digest.String(); got != dgst {
		t.Fatalf("pulled %s, want %s", got, dgst)
	}
	labels := imageLabels(t, other.ctx(), pulled)
	for k, want := range map[string]string{drivers.LabelLineage: "nodesnap-test", drivers.LabelAddress: "snapshot.s1", LabelSnapshotOf: "agent.a"} {
		if labels[k] != want {
			t.Errorf("label %s = %q, want %q (labels %v)", k, labels[k], want, labels)
		}
	}
	spec, err := pulled.Spec(other.ctx())
	if err != nil {
		t.Fatal(err)
	}
	if n := len(spec.RootFS.DiffIDs); n != 2 {
		t.Errorf("the snapshot has %d layers, want busybox's and the new one", n)
	}
	out := other.run(t, pulled, "resumed-1", "/bin/sh", "-c", "cat /work/notes.txt; ls /etc/passwd 2>&1 || echo passwd-gone; echo applets: $(ls /bin | head -n 3)")
	if got := lines(out); len(got) < 3 || got[0] != "kept-by-snapshot" || got[len(got)-2] != "passwd-gone" || !strings.Contains(got[len(got)-1], "busybox") {
		t.Fatalf("a container of the snapshot printed %q: want the written file, the removed one gone, and busybox's files", out)
	}

	tags, err := List(context.Background(), ref.Registry, ref.Repo)
	if err != nil {
		t.Fatal(err)
	}
	if len(tags) != 1 || tags[0] != (Tagged{Tag: "snap-1", Digest: dgst}) {
		t.Fatalf("List = %v, want snap-1 at %s", tags, dgst)
	}
	if err := Delete(context.Background(), ref.Registry, ref.Repo, dgst); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if tags, err := List(context.Background(), ref.Registry, ref.Repo); err != nil || len(tags) != 0 {
		t.Fatalf("List after Delete = %v, %v; want none", tags, err)
	}
	if err := Delete(context.Background(), ref.Registry, ref.Repo, dgst); err != nil {
		t.Fatalf("a second Delete of the same digest: %v", err)
	}
	if tags, err := List(context.Background(), ref.Registry, "bottlefile/never-pushed"); err != nil || len(tags) != 0 {
		t.Fatalf("List of an unknown repository = %v, %v; want none, no error", tags, err)
	}
}

// TestWritten: what a container wrote to its own layer is measured
// through its containerd: a 3 MiB file counts, the base image does not.
func TestWritten(t *testing.T) {
	need(t)
	node := startContainerd(t)
	base := node.importBusybox(t)
	node.run(t, base, "quiet", "/bin/sh", "-c", ":")
	node.run(t, base, "writer", "/bin/sh", "-c", "dd if=/dev/zero of=/blob bs=1M count=3 2>/dev/null")
	n := Node{Socket: node.socket}
	quiet, err := Written(context.Background(), n, "quiet")
	if err != nil {
		t.Fatal(err)
	}
	wrote, err := Written(context.Background(), n, "writer")
	if err != nil {
		t.Fatal(err)
	}
	if quiet >= 1<<20 || wrote < 3<<20 || wrote > 4<<20 {
		t.Fatalf("Written = %d for a container that wrote nothing, %d for one that wrote 3 MiB", quiet, wrote)
	}
	if _, err := Written(context.Background(), n, "nosuch"); err == nil || !strings.Contains(err.Error(), "has no container nosuch") {
		t.Fatalf("Written of a missing container: %v", err)
	}
}

// TestCommitUncompressed: a snapshot whose layer is a plain tar is
// pushed as one (the manifest says so) and holds the file.
func TestCommitUncompressed(t *testing.T) {
	need(t)
	node := startContainerd(t)
	reg := startRegistry(t)
	base := node.importBusybox(t)
	node.run(t, base, "plain-1", "/bin/sh", "-c", "echo plain > /plain.txt")
	ref := Ref{Registry: Registry{Host: reg}, Repo: "bottlefile/plain", Lineage: "nodesnap-test", Agent: "agent.a", Address: "snapshot.p", Uncompressed: true}
	dgst, size, err := Commit(context.Background(), Node{Socket: node.socket}, "plain-1", ref)
	if err != nil {
		t.Fatal(err)
	}
	other := startContainerd(t)
	img := other.pull(t, reg+"/"+ref.Repo+"@"+dgst)
	m, err := images.Manifest(other.ctx(), other.client.ContentStore(), img.Target(), platforms.Default())
	if err != nil {
		t.Fatal(err)
	}
	top := m.Layers[len(m.Layers)-1]
	if top.MediaType != images.MediaTypeDockerSchema2Layer || top.Size != size {
		t.Fatalf("the new layer is %s of %d bytes, want an uncompressed Docker layer of %d", top.MediaType, top.Size, size)
	}
	spec, err := img.Spec(other.ctx())
	if err != nil {
		t.Fatal(err)
	}
	if got := spec.RootFS.DiffIDs[len(spec.RootFS.DiffIDs)-1]; got != top.Digest {
		t.Fatalf("the new layer's diff_id is %s, want its digest %s", got, top.Digest)
	}
	if out := other.run(t, img, "check", "/bin/cat", "/plain.txt"); out != "plain\n" {
		t.Fatalf("the snapshot holds %q", out)
	}
}

// TestCommitRunning: a Pod's container is running when its snapshot is
// taken; what it wrote so far is in the snapshot, and it keeps running.
func TestCommitRunning(t *testing.T) {
	need(t)
	node := startContainerd(t)
	reg := startRegistry(t)
	base := node.importBusybox(t)
	task, logPath := node.start(t, base, "live-1", "/bin/sh", "-c", "echo live > /live.txt && echo ready && exec sleep 600")
	defer func() { _, _ = task.Delete(node.ctx(), containerd.WithProcessKill) }()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if b, _ := os.ReadFile(logPath); strings.Contains(string(b), "ready") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the container did not write its file")
		}
	}
	ref := Ref{Registry: Registry{Host: reg}, Repo: "bottlefile/live", Lineage: "nodesnap-test", Agent: "agent.a", Address: "snapshot.live"}
	dgst, _, err := Commit(context.Background(), Node{Socket: node.socket}, "live-1", ref)
	if err != nil {
		t.Fatalf("Commit of a running container: %v", err)
	}
	st, err := task.Status(node.ctx())
	if err != nil || st.Status != containerd.Running {
		t.Fatalf("after the commit the container is %v (%v), want running", st.Status, err)
	}
	other := startContainerd(t)
	img := other.pull(t, reg+"/"+ref.Repo+"@"+dgst)
	if out := other.run(t, img, "check", "/bin/cat", "/live.txt"); out != "live\n" {
		t.Fatalf("the snapshot holds %q", out)
	}
}

// TestCommitOfACommit: a snapshot resumed and committed again stacks a
// third layer and keeps both files; its labels are the new snapshot's.
func TestCommitOfACommit(t *testing.T) {
	need(t)
	node := startContainerd(t)
	reg := startRegistry(t)
	base := node.importBusybox(t)
	node.run(t, base, "gen-1", "/bin/sh", "-c", "echo one > /one")
	ref := Ref{Registry: Registry{Host: reg}, Repo: "bottlefile/stack", Lineage: "nodesnap-test", Agent: "agent.a", Address: "snapshot.s1"}
	d1, _, err := Commit(context.Background(), Node{Socket: node.socket}, "gen-1", ref)
	if err != nil {
		t.Fatal(err)
	}
	first := node.pull(t, reg+"/"+ref.Repo+"@"+d1)
	node.run(t, first, "gen-2", "/bin/sh", "-c", "echo two > /two")
	ref.Address = "snapshot.s2"
	d2, _, err := Commit(context.Background(), Node{Socket: node.socket}, "gen-2", ref)
	if err != nil {
		t.Fatal(err)
	}
	other := startContainerd(t)
	second := other.pull(t, reg+"/"+ref.Repo+"@"+d2)
	if out := other.run(t, second, "check", "/bin/sh", "-c", "cat /one /two"); out != "one\ntwo\n" {
		t.Fatalf("the second snapshot holds %q, want both files", out)
	}
	if l := imageLabels(t, other.ctx(), second); l[drivers.LabelAddress] != "snapshot.s2" {
		t.Fatalf("the second snapshot's address label is %q", l[drivers.LabelAddress])
	}
}

// TestPushImage: an image of tar layers pushed by digest runs in a
// containerd that pulls it.
func TestPushImage(t *testing.T) {
	need(t)
	reg := startRegistry(t)
	bb := busyboxLayer(t)
	var conf bytes.Buffer
	tw := tar.NewWriter(&conf)
	body := []byte("allow = example.org\n")
	_ = tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: "etc/gateway/", Mode: 0o755, ModTime: time.Unix(1, 0)})
	_ = tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "etc/gateway/allow", Mode: 0o644, Size: int64(len(body)), ModTime: time.Unix(1, 0)})
	_, _ = tw.Write(body)
	_ = tw.Close()
	layer := func(b []byte) Layer {
		return Layer{DiffID: digest.FromBytes(b), Size: int64(len(b)), Open: func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }}
	}
	cfg := ocispec.ImageConfig{Cmd: []string{"/bin/cat", "/etc/gateway/allow"}, Env: []string{"PATH=/bin"}, Labels: testLabels(t)}
	reg0 := Registry{Host: reg}
	dgst, err := PushImage(context.Background(), reg0, "bottlefile/gateway", "v1", []Layer{layer(bb), layer(conf.Bytes())}, cfg)
	if err != nil {
		t.Fatalf("PushImage: %v", err)
	}
	again, err := PushImage(context.Background(), reg0, "bottlefile/gateway", "", []Layer{layer(bb), layer(conf.Bytes())}, cfg)
	if err != nil || again != dgst {
		t.Fatalf("the same image pushed again: %s, %v; want %s", again, err, dgst)
	}
	cd := startContainerd(t)
	img := cd.pull(t, reg+"/bottlefile/gateway@"+dgst)
	if out := cd.run(t, img, "gw", "/bin/cat", "/etc/gateway/allow"); out != string(body) {
		t.Fatalf("a container of the pushed image printed %q, want %q", out, body)
	}
	tags, err := List(context.Background(), reg0, "bottlefile/gateway")
	if err != nil || len(tags) != 1 || tags[0].Digest != dgst {
		t.Fatalf("List = %v, %v", tags, err)
	}
}

// BenchmarkCommit commits a container that wrote BOTTLEFILE_BENCH_COMMIT_MIB
// MiB (100 by default) of random bytes: "diff" only takes its changed
// files into the node's content store (what ctr snapshots diff does),
// "commit" is the whole Commit, pushed to a loopback registry; each gzip
// and plain (-uncompressed). Each
// iteration is a new container, so no layer is already there.
//
//	go test -run '^$' -bench Commit -benchtime 3x ./drivers/kubernetes/nodesnap/
func BenchmarkCommit(b *testing.B) {
	need(b)
	mib := 100
	if s := os.Getenv("BOTTLEFILE_BENCH_COMMIT_MIB"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			b.Fatalf("BOTTLEFILE_BENCH_COMMIT_MIB=%q: want a positive number", s)
		}
		mib = n
	}
	node := startContainerd(b)
	reg := startRegistry(b)
	base := node.importBusybox(b)
	n := 0
	write := func(b *testing.B) string {
		b.StopTimer()
		defer b.StartTimer()
		n++
		id := fmt.Sprintf("bench-%d", n)
		node.run(b, base, id, "/bin/sh", "-c", fmt.Sprintf("dd if=/dev/urandom of=/data bs=1M count=%d 2>/dev/null", mib))
		return id
	}
	diffAs := func(mediaType string) func(b *testing.B) {
		return func(b *testing.B) {
			ctx := node.ctx()
			var total int64
			for i := 0; i < b.N; i++ {
				id := write(b)
				ctr, err := node.client.ContainerService().Get(ctx, id)
				if err != nil {
					b.Fatal(err)
				}
				desc, err := rootfs.CreateDiff(ctx, ctr.SnapshotKey, node.client.SnapshotService(ctr.Snapshotter), node.client.DiffService(), diff.WithMediaType(mediaType))
				if err != nil {
					b.Fatal(err)
				}
				total += desc.Size
			}
			b.SetBytes(int64(mib) << 20)
			b.ReportMetric(float64(total)/float64(b.N)/(1<<20), "layer-MiB/op")
		}
	}
	b.Run("diff", diffAs(ocispec.MediaTypeImageLayerGzip))
	b.Run("diff-uncompressed", diffAs(ocispec.MediaTypeImageLayer))
	commit := func(uncompressed bool) func(b *testing.B) {
		return func(b *testing.B) {
			var total int64
			for i := 0; i < b.N; i++ {
				id := write(b)
				ref := Ref{Registry: Registry{Host: reg}, Repo: "bottlefile/bench", Lineage: "nodesnap-bench", Agent: "agent.bench", Address: "snapshot." + id, Uncompressed: uncompressed}
				_, size, err := Commit(context.Background(), Node{Socket: node.socket}, id, ref)
				if err != nil {
					b.Fatal(err)
				}
				total += size
			}
			b.SetBytes(int64(mib) << 20)
			b.ReportMetric(float64(total)/float64(b.N)/(1<<20), "layer-MiB/op")
		}
	}
	b.Run("commit", commit(false))
	b.Run("commit-uncompressed", commit(true))
}
