package lang

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/hcl/v2"
)

// TestValidConfigs loads every directory under testdata/valid and wants no
// diagnostics at all, not even warnings.
func TestValidConfigs(t *testing.T) {
	dirs, err := filepath.Glob("testdata/valid/*")
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) < 15 {
		t.Errorf("only %d valid configurations; want at least 15", len(dirs))
	}
	for _, dir := range dirs {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			p := NewParser()
			cfg, diags := p.LoadDir(dir)
			if len(diags) > 0 {
				var buf bytes.Buffer
				_ = WriteDiagnostics(&buf, p.Files(), diags, 0, false)
				t.Fatalf("unexpected diagnostics:\n%s", buf.String())
			}
			if len(cfg.Agents) == 0 {
				t.Errorf("no agents decoded")
			}
		})
	}
}

// expectedDiag is an error a fixture says it must produce.
type expectedDiag struct {
	File    string // base name
	Line    int    // 0 when the diagnostic has no range
	Summary string
}

func (e expectedDiag) String() string { return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Summary) }

// TestInvalidConfigs loads every directory under testdata/invalid and
// matches the diagnostics it gets, both ways, against those the fixture
// expects: a line that must carry an error ends with "# ERROR: <summary>"
// (several may follow each other), and a want_errors.txt file lists, one
// per line, "FILE:LINE: summary" for files without comments (JSON) and
// ":0: summary" for diagnostics without a range.
func TestInvalidConfigs(t *testing.T) {
	dirs, err := filepath.Glob("testdata/invalid/*")
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) < 40 {
		t.Errorf("only %d invalid configurations; want at least 40", len(dirs))
	}
	for _, dir := range dirs {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			want := expectedDiags(t, dir)
			if len(want) == 0 {
				t.Fatalf("fixture %s expects no errors; mark them with # ERROR: <summary>", dir)
			}
			p := NewParser()
			_, diags := p.LoadDir(dir)
			var got []expectedDiag
			for _, d := range diags {
				e := expectedDiag{Summary: d.Summary}
				if d.Severity != hcl.DiagError {
					e.Summary = "WARNING " + e.Summary
				}
				if d.Subject != nil {
					e.File = filepath.Base(d.Subject.Filename)
					e.Line = d.Subject.Start.Line
				}
				got = append(got, e)
			}
			sortExpected(got)
			if diff := cmp.Diff(want, got); diff != "" {
				var buf bytes.Buffer
				_ = WriteDiagnostics(&buf, p.Files(), diags, 0, false)
				t.Errorf("diagnostics differ (-want +got):\n%s\nall diagnostics:\n%s", diff, buf.String())
			}
		})
	}
}

const errorMarker = "# ERROR: "

func expectedDiags(t *testing.T, dir string) []expectedDiag {
	t.Helper()
	var want []expectedDiag
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		path := filepath.Join(dir, e.Name())
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if e.Name() == "want_errors.txt" {
			for _, line := range strings.Split(strings.TrimSpace(string(src)), "\n") {
				file, rest, _ := strings.Cut(line, ":")
				num, summary, _ := strings.Cut(rest, ": ")
				n, err := strconv.Atoi(num)
				if err != nil {
					t.Fatalf("%s: bad line %q", path, line)
				}
				want = append(want, expectedDiag{File: file, Line: n, Summary: summary})
			}
			continue
		}
		sc := bufio.NewScanner(bytes.NewReader(src))
		for n := 1; sc.Scan(); n++ {
			parts := strings.Split(sc.Text(), errorMarker)
			for _, summary := range parts[1:] {
				want = append(want, expectedDiag{File: e.Name(), Line: n, Summary: strings.TrimSpace(summary)})
			}
		}
	}
	sortExpected(want)
	return want
}

func sortExpected(list []expectedDiag) {
	sort.SliceStable(list, func(i, j int) bool {
		a, b := list[i], list[j]
		if a.File != b.File {
			return a.File < b.File
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Summary < b.Summary
	})
}
