package docker

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"testing"
)

// TestLabelAfterFrom: a LABEL goes after each FROM instruction, by the
// classic builder's rules for continuations, comments and the escape
// directive, and nowhere else.
func TestLabelAfterFrom(t *testing.T) {
	const l = "LABEL x=1"
	for name, c := range map[string]struct{ in, want string }{
		"simple":       {"FROM scratch\nCOPY . /\n", "FROM scratch\nLABEL x=1\nCOPY . /\n"},
		"no newline":   {"FROM scratch", "FROM scratch\nLABEL x=1\n"},
		"lower case":   {"from a as b\nrun x\nFROM b\n", "from a as b\nLABEL x=1\nrun x\nFROM b\nLABEL x=1\n"},
		"continued":    {"FROM \\\n  # comment\n\n  scratch\nRUN a \\\n FROM b\n", "FROM \\\n  # comment\n\n  scratch\nLABEL x=1\nRUN a \\\n FROM b\n"},
		"escape":       {"# escape=`\nFROM a `\n  AS b\nRUN c \\\nFROM d\n", "# escape=`\nFROM a `\n  AS b\nLABEL x=1\nRUN c \\\nFROM d\nLABEL x=1\n"},
		"comment from": {"# FROM a\nARG V=1\nFROM a:$V\n", "# FROM a\nARG V=1\nFROM a:$V\nLABEL x=1\n"},
		"crlf":         {"FROM a\r\nRUN b\r\n", "FROM a\r\nLABEL x=1\nRUN b\r\n"},
		"cut off":      {"FROM a \\\n", "FROM a \\\n"},
	} {
		if got := string(labelAfterFrom([]byte(c.in), l)); got != c.want {
			t.Errorf("%s:\n%q\nwant\n%q", name, got, c.want)
		}
	}
}

// TestContextTarLabelsBuild: with buildOf set, the Dockerfile sent has the
// label, and the hash is still that of the Dockerfile as it is.
func TestContextTarLabelsBuild(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"Dockerfile": "FROM scratch\nCOPY a /\n", "a": "a"})
	bc, err := resolveBuildContext(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	sum, err := hashContext(bc)
	if err != nil {
		t.Fatal(err)
	}
	bc.buildOf = "L"
	var buf bytes.Buffer
	tarSum, err := tarContext(bc, &buf)
	if err != nil || tarSum != sum {
		t.Fatalf("tar hash %s (%v), plan hash %s", tarSum, err, sum)
	}
	tr := tar.NewReader(&buf)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			t.Fatal("no Dockerfile in the tar")
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Name == "Dockerfile" {
			data, _ := io.ReadAll(tr)
			if want := "FROM scratch\nLABEL " + labelBuildOf + "=L\nCOPY a /\n"; string(data) != want {
				t.Errorf("Dockerfile sent:\n%s\nwant\n%s", data, want)
			}
			return
		}
	}
}
