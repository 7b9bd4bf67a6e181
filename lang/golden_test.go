package lang

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

// TestGoldenDiagnostics renders the diagnostics of each configuration under
// testdata/golden, for people (human.golden) and as JSON (json.golden).
// Loading is followed by NewScope without variable values when it succeeds,
// so that evaluation errors are covered too. Run with -update to rewrite.
func TestGoldenDiagnostics(t *testing.T) {
	dirs, err := filepath.Glob("testdata/golden/*")
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range dirs {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			p := NewParser()
			cfg, diags := p.LoadDir(dir)
			if !diags.HasErrors() {
				_, moreDiags := cfg.NewScope(nil)
				diags = append(diags, moreDiags...)
			}
			if len(diags) == 0 {
				t.Fatal("no diagnostics to render")
			}
			var human bytes.Buffer
			if err := WriteDiagnostics(&human, p.Files(), diags, 78, false); err != nil {
				t.Fatal(err)
			}
			js, err := DiagnosticsJSON(p.Files(), diags)
			if err != nil {
				t.Fatal(err)
			}
			js = append(js, '\n')
			checkGolden(t, filepath.Join(dir, "human.golden"), human.Bytes())
			checkGolden(t, filepath.Join(dir, "json.golden"), js)
		})
	}
}

func checkGolden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -run TestGoldenDiagnostics -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s differs (-want +got):\n%s", path, diff)
	}
}
