package command

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const unformatted = `agent "coder" {
image = "busybox:1"
  command=["sleep","600"]
}
`

func TestFmt(t *testing.T) {
	w := newWorkspace(t)
	w.write(unformatted)
	sub := filepath.Join(w.dir, "nested")
	os.MkdirAll(sub, 0o755)
	os.WriteFile(filepath.Join(sub, "extra.bottle.hcl"), []byte(unformatted), 0o644)

	code, out, errs := w.run("fmt", "-check", "-diff")
	if code != exitNotFormatted {
		t.Fatalf("fmt -check of an unformatted file: want exit %d, got %d\n%s%s", exitNotFormatted, code, out, errs)
	}
	golden(t, filepath.Join("testdata", "fmt", "diff.txt"), w.normalize(out))
	if got, _ := os.ReadFile(filepath.Join(w.dir, "Bottlefile")); string(got) != unformatted {
		t.Fatal("fmt -check changed the file")
	}

	w.must("fmt")
	if code, _, _ := w.run("fmt", "-check"); code != 0 {
		t.Errorf("after fmt, fmt -check still fails")
	}
	if got, _ := os.ReadFile(filepath.Join(sub, "extra.bottle.hcl")); string(got) != unformatted {
		t.Errorf("fmt without -recursive changed a subdirectory")
	}
	out = w.must("fmt", "-recursive")
	if !strings.Contains(out, "extra.bottle.hcl") {
		t.Errorf("fmt -recursive did not format the subdirectory:\n%s", out)
	}

	// A file that does not parse is reported, not mangled.
	w.write("agent \"x\" {\n  image = \n}\n")
	code, _, errs = w.run("fmt")
	if code != 1 || !strings.Contains(errs, "Bottlefile line") {
		t.Errorf("fmt of a broken file: exit %d\n%s", code, errs)
	}
	// with its source snippet, as every other diagnostic has.
	if !strings.Contains(errs, "2:   image = ") {
		t.Errorf("fmt's syntax error has no source snippet:\n%s", errs)
	}
	golden(t, filepath.Join("testdata", "fmt", "syntax-error.txt"), w.normalize(errs))
}
