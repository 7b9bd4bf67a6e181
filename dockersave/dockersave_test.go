package dockersave

import (
	"archive/tar"
	"bytes"
	"errors"
	"testing"
)

// archive makes a tar of name/content pairs.
func archive(t *testing.T, files ...string) *bytes.Reader {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for i := 0; i < len(files); i += 2 {
		if err := tw.WriteHeader(&tar.Header{Name: files[i], Mode: 0o644, Size: int64(len(files[i+1])), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(files[i+1]))
	}
	tw.Close()
	return bytes.NewReader(buf.Bytes())
}

func TestLabels(t *testing.T) {
	f := archive(t, "./manifest.json", `[{"Config":"blobs/c.json"}]`, "blobs/c.json", `{"config":{"Labels":{"a":"b"}}}`)
	labels, err := Labels(f)
	if err != nil || labels["a"] != "b" {
		t.Errorf("Labels = %v, %v", labels, err)
	}
	if _, err := Labels(archive(t, "x", "y")); !errors.Is(err, ErrNoManifest) {
		t.Errorf("a tar without a manifest: %v", err)
	}
	if _, err := Labels(archive(t, "manifest.json", `[{"Config":"a"},{"Config":"b"}]`)); err == nil {
		t.Error("two images are accepted")
	}
}

func TestCheckManifest(t *testing.T) {
	if err := CheckManifest(archive(t, "./manifest.json", "[]")); err != nil {
		t.Errorf("with a manifest: %v", err)
	}
	if err := CheckManifest(archive(t, "layer.tar", "")); !errors.Is(err, ErrNoManifest) {
		t.Errorf("without one: %v", err)
	}
	if err := CheckManifest(bytes.NewReader([]byte("not a tar at all, but long enough to be read as a header block..."))); err == nil {
		t.Error("garbage is accepted")
	}
}
