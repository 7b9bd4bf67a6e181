package nodesnap

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/bottlefile/bottlefile/dockersave"
	"github.com/bottlefile/bottlefile/drivers"
)

func TestContainerID(t *testing.T) {
	for _, tc := range []struct {
		in, want, err string
	}{
		{"containerd://4f2a9c", "4f2a9c", ""},
		{"", "", "no id yet"},
		{"4f2a9c", "", "not RUNTIME://ID"},
		{"containerd://", "", "not RUNTIME://ID"},
		{"cri-o://4f2a9c", "", "runs under cri-o, not containerd"},
	} {
		got, err := ContainerID(tc.in)
		if tc.err == "" && (err != nil || got != tc.want) {
			t.Errorf("ContainerID(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
		if tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("ContainerID(%q) = %q, %v; want an error saying %q", tc.in, got, err, tc.err)
		}
	}
}

// TestExportImport: a snapshot exported from the registry is a
// docker-save tar with its labels; imported back under another
// repository with other labels it is pushed by digest, carries the new
// labels only, and a container of it reads the file.
func TestExportImport(t *testing.T) {
	need(t)
	node := startContainerd(t)
	reg := startRegistry(t)
	base := node.importBusybox(t)
	node.run(t, base, "agent-1", "/bin/sh", "-c", "echo migrated > /kept.txt")
	ref := Ref{Registry: Registry{Host: reg}, Repo: "bottlefile/from", Lineage: "lineage-a", Agent: "agent.a", Address: "snapshot.s1"}
	dgst, _, err := Commit(context.Background(), Node{Socket: node.socket}, "agent-1", ref)
	if err != nil {
		t.Fatal(err)
	}
	var tarball bytes.Buffer
	if err := Export(context.Background(), ref.Registry, ref.Repo, dgst, &tarball); err != nil {
		t.Fatalf("Export: %v", err)
	}
	labels, err := dockersave.Labels(bytes.NewReader(tarball.Bytes()))
	if err != nil {
		t.Fatalf("the export is not a docker-save tar of one image: %v", err)
	}
	if labels[drivers.LabelLineage] != "lineage-a" || labels[LabelSnapshotOf] != "agent.a" {
		t.Fatalf("the export's labels are %v", labels)
	}

	want := map[string]string{drivers.LabelLineage: "lineage-b", drivers.LabelAddress: "snapshot.s2", LabelSnapshotOf: "agent.b"}
	in, err := Import(context.Background(), ref.Registry, "bottlefile/to", "s2", bytes.NewReader(tarball.Bytes()), want)
	if err != nil {
		t.Fatalf("Import: %v", err)
	}
	if in == dgst {
		t.Fatal("the import has the export's digest: its labels were not changed")
	}
	tags, err := List(context.Background(), ref.Registry, "bottlefile/to")
	if err != nil || len(tags) != 1 || tags[0] != (Tagged{Tag: "s2", Digest: in}) {
		t.Fatalf("List = %v, %v; want s2 at %s", tags, err, in)
	}
	other := startContainerd(t)
	img := other.pull(t, reg+"/bottlefile/to@"+in)
	got := imageLabels(t, other.ctx(), img)
	for k, v := range want {
		if got[k] != v {
			t.Errorf("label %s = %q, want %q", k, got[k], v)
		}
	}
	if len(got) != len(want) {
		t.Errorf("labels %v, want only %v", got, want)
	}
	if out := other.run(t, img, "check", "/bin/cat", "/kept.txt"); out != "migrated\n" {
		t.Fatalf("the imported snapshot holds %q", out)
	}

	if _, err := Import(context.Background(), ref.Registry, "bottlefile/to", "", strings.NewReader("not a tar"), want); err == nil || !strings.Contains(err.Error(), "docker-save tar") {
		t.Fatalf("Import of garbage: %v", err)
	}
}
