package docker

import (
	"archive/tar"
	"bytes"
	"io"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestReroot: a tar of a workspace path, named relative to the path's
// parent as the archive API names it, is renamed relative to "/", hard
// link targets too, and keeps owners, modes and symlink targets.
func TestReroot(t *testing.T) {
	var in bytes.Buffer
	tw := tar.NewWriter(&in)
	for _, h := range []*tar.Header{
		{Typeflag: tar.TypeDir, Name: ".claude/", Mode: 0o700, Uid: 1000, Gid: 1000},
		{Typeflag: tar.TypeReg, Name: ".claude/settings.json", Mode: 0o640, Uid: 1000, Gid: 1000, Size: 2},
		{Typeflag: tar.TypeLink, Name: ".claude/copy.json", Linkname: ".claude/settings.json", Uid: 1000, Gid: 1000},
		{Typeflag: tar.TypeSymlink, Name: ".claude/latest", Linkname: "settings.json", Uid: 1000, Gid: 1000},
	} {
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Size > 0 {
			tw.Write([]byte("{}"))
		}
	}
	tw.Close()

	for dir, prefix := range map[string]string{"/home/agent": "home/agent/", "/": ""} {
		var out bytes.Buffer
		if err := reroot(tar.NewReader(bytes.NewReader(in.Bytes())), &out, dir); err != nil {
			t.Fatal(err)
		}
		type entry struct {
			Name, Link string
			Mode       int64
			Uid        int
			Body       string
		}
		var got []entry
		tr := tar.NewReader(&out)
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(tr)
			got = append(got, entry{h.Name, h.Linkname, h.Mode, h.Uid, string(body)})
		}
		want := []entry{
			{prefix + ".claude/", "", 0o700, 1000, ""},
			{prefix + ".claude/settings.json", "", 0o640, 1000, "{}"},
			{prefix + ".claude/copy.json", prefix + ".claude/settings.json", 0, 1000, ""},
			{prefix + ".claude/latest", "settings.json", 0, 1000, ""},
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("reroot under %s (-want +got):\n%s", dir, diff)
		}
	}
}
