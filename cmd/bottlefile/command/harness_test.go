package command

import (
	"bytes"
	"context"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/go-hclog"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/drivertest"
	"github.com/bottlefile/bottlefile/state"
)

var update = flag.Bool("update", false, "rewrite golden files")

// workspace is a Bottlefile directory whose "docker" runtime is the fake
// driver, with the commands run in process.
type workspace struct {
	t    *testing.T
	dir  string
	fake *drivertest.Fake
	// log, when set, receives the commands' logs (BOTTLEFILE_LOG).
	log io.Writer
	// extra registers more fake drivers by name, for several runtimes.
	extra map[string]*drivertest.Fake
}

func newWorkspace(t *testing.T) *workspace {
	return &workspace{t: t, dir: t.TempDir(), fake: &drivertest.Fake{DriverName: "docker"}}
}

// write makes src the workspace's Bottlefile.
func (w *workspace) write(src string) {
	w.t.Helper()
	if err := os.WriteFile(filepath.Join(w.dir, "Bottlefile"), []byte(src), 0o644); err != nil {
		w.t.Fatal(err)
	}
}

// writeFixture makes a testdata file the workspace's Bottlefile.
func (w *workspace) writeFixture(path string) {
	w.t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		w.t.Fatal(err)
	}
	w.write(string(src))
}

// run runs one command in process and returns its exit code and output.
func (w *workspace) run(name string, args ...string) (code int, stdout, stderr string) {
	w.t.Helper()
	var out, errb bytes.Buffer
	m := &Meta{
		Stdout: &out, Stderr: &errb, Stdin: strings.NewReader(""),
		Log:      w.logger(),
		Registry: w.registry(),
		Ctx:      context.Background(), Abandon: context.Background(),
		Dir: w.dir,
	}
	factory, ok := Commands(m)[name]
	if !ok {
		w.t.Fatalf("no command %q", name)
	}
	c, err := factory()
	if err != nil {
		w.t.Fatal(err)
	}
	code = c.Run(args)
	return code, out.String(), errb.String()
}

// must runs a command and fails the test unless it exits 0.
func (w *workspace) must(name string, args ...string) string {
	w.t.Helper()
	code, out, errs := w.run(name, args...)
	if code != 0 {
		w.t.Fatalf("%s %v: exit %d\n%s%s", name, args, code, out, errs)
	}
	return out
}

// lineage is the workspace state's lineage.
func (w *workspace) lineage() string {
	w.t.Helper()
	s, err := state.Open(w.dir, state.Options{ReadOnly: true})
	if err != nil {
		w.t.Fatal(err)
	}
	defer s.Close()
	return s.Lineage()
}

// normalize replaces what differs between runs (the lineage, the temporary
// directory) with fixed words, so output can be compared with golden files.
func (w *workspace) normalize(s string) string {
	if l := w.lineage(); l != "" {
		s = strings.ReplaceAll(s, l, "LINEAGE")
		s = strings.ReplaceAll(s, l[:8], "LINEAGE8")
	}
	return strings.ReplaceAll(s, w.dir, "WORKDIR")
}

// golden compares got with the file at path, or rewrites it under -update.
func golden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s differs (-want +got):\n%s", path, diff)
	}
}

func (w *workspace) logger() hclog.Logger {
	if w.log == nil {
		return hclog.NewNullLogger()
	}
	return hclog.New(&hclog.LoggerOptions{Level: hclog.Trace, Output: w.log})
}

func (w *workspace) registry() drivers.Registry {
	reg := drivers.Registry{"docker": w.fake.Factory()}
	for name, f := range w.extra {
		reg[name] = f.Factory()
	}
	return reg
}
