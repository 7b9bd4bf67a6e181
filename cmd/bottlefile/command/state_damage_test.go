package command

import (
	"crypto/rand"
	"encoding/binary"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/bottlefile/bottlefile/state"
)

const twoAgents = `
agent "coder" {
  image   = "busybox:1"
  command = ["sleep", "600"]
}

agent "reviewer" {
  image   = "busybox:1"
  command = ["sleep", "600"]
}
`

// TestStateDamageEndToEnd: each kind of damage to state.db makes plan,
// apply and destroy fail with what is wrong and how to restore, touching
// no bottle; state restore-backup puts the backup back, and plan then
// finds nothing to do.
func TestStateDamageEndToEnd(t *testing.T) {
	overwrite := func(t *testing.T, path string, off, n int64) {
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		buf := make([]byte, n)
		rand.Read(buf)
		f.WriteAt(buf, off)
	}
	const page = 4096 // bbolt's page size is the OS's
	cases := []struct {
		name   string
		damage func(t *testing.T, w *workspace, path string)
		want   string
	}{
		{"empty", func(t *testing.T, w *workspace, path string) { os.Truncate(path, 0) }, "empty (0 bytes)"},
		{"truncated to half", func(t *testing.T, w *workspace, path string) {
			// Half of the pages the newest transaction uses (the file's
			// tail beyond them holds nothing, and cutting it loses nothing).
			os.Truncate(path, usedBytes(t, path)/2)
		}, "truncated"},
		{"random bytes over page 0", func(t *testing.T, w *workspace, path string) { overwrite(t, path, 0, page) }, "meta page 0 is damaged"},
		{"random bytes over the second meta page", func(t *testing.T, w *workspace, path string) { overwrite(t, path, page, page) }, "meta page 1 is damaged"},
		{"deleted", func(t *testing.T, w *workspace, path string) { os.Remove(path) }, "does not exist, but its backup"},
		{"serial lower than backup", func(t *testing.T, w *workspace, path string) {
			old, _ := os.ReadFile(path)
			w.must("state rm", "agent.reviewer") // one more write; the bottle still runs
			w.must("apply", "-auto-approve")     // adopts it back, and keeps the backup
			w.must("apply", "-auto-approve")
			os.WriteFile(path, old, 0o600)
		}, "went back in time"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorkspace(t)
			w.write(twoAgents)
			w.must("apply", "-auto-approve")
			w.must("apply", "-auto-approve") // a second writing run keeps the full state as the backup
			lineage := w.lineage()
			live := len(w.fake.Objects(lineage))
			path := state.Path(w.dir)
			tc.damage(t, w, path)

			for _, args := range [][]string{{"plan"}, {"apply", "-auto-approve"}, {"destroy", "-auto-approve"}, {"state list"}} {
				code, out, errs := w.run(args[0], args[1:]...)
				errs = flat(errs)
				if code != 1 || !strings.Contains(errs, tc.want) || !strings.Contains(errs, "bottlefile state restore-backup") {
					t.Fatalf("%v: want exit 1 saying %q and how to restore, got %d:\n%s%s", args, tc.want, code, out, errs)
				}
				if strings.Contains(out, "No changes.") || strings.Contains(errs, "panic") {
					t.Fatalf("%v: %s%s", args, out, errs)
				}
			}
			if got := len(w.fake.Objects(lineage)); got != live {
				t.Fatalf("a refused command changed the runtime: %d objects, had %d", got, live)
			}

			// restore-backup asks first.
			if code, out, _ := w.run("state restore-backup"); code != 1 || !strings.Contains(out, "Do you want to put the backup back") || !strings.Contains(out, "Restore cancelled.") {
				t.Fatalf("restore-backup without approval: %d\n%s", code, out)
			}
			out := w.must("state restore-backup", "-auto-approve")
			if !strings.Contains(out, "Restored the state from") {
				t.Errorf("restore-backup says:\n%s", out)
			}
			if w.lineage() != lineage {
				t.Fatalf("restored lineage %q, want %q", w.lineage(), lineage)
			}
			if out := w.must("plan"); !strings.Contains(out, "No changes.") {
				t.Fatalf("plan after restoring the backup:\n%s", out)
			}
		})
	}
}

// TestStateFromAnotherDirectory: a state copied into another directory
// warns on plan, is refused by apply and destroy, and is taken on only by
// state relocate.
func TestStateFromAnotherDirectory(t *testing.T) {
	w := newWorkspace(t)
	w.write(twoAgents)
	w.must("apply", "-auto-approve")
	lineage := w.lineage()
	live := len(w.fake.Objects(lineage))

	copied := newWorkspace(t)
	copied.fake = w.fake // the same engine
	copied.write(twoAgents)
	os.MkdirAll(filepath.Join(copied.dir, state.Dir), 0o755)
	data, err := os.ReadFile(state.Path(w.dir))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(state.Path(copied.dir), data, 0o600)

	code, out, errs := copied.run("plan")
	errs = flat(errs)
	if code != 0 || !strings.Contains(errs, "State used from another directory") || !strings.Contains(errs, w.dir) {
		t.Fatalf("plan of a copied state: want a warning naming %s, got %d:\n%s%s", w.dir, code, out, errs)
	}
	for _, args := range [][]string{{"apply", "-auto-approve"}, {"destroy", "-auto-approve"}} {
		code, out, errs := copied.run(args[0], args[1:]...)
		errs = flat(errs)
		if code != 1 || !strings.Contains(errs, "records "+w.dir+" as its directory") || !strings.Contains(errs, "bottlefile state relocate") {
			t.Fatalf("%v of a copied state: want exit 1 explaining, got %d:\n%s%s", args, code, out, errs)
		}
	}
	if got := len(w.fake.Objects(lineage)); got != live {
		t.Fatalf("the copy touched the original's bottles: %d objects, had %d", got, live)
	}
	// The original directory is unaffected.
	if out := w.must("plan"); !strings.Contains(out, "No changes.") {
		t.Fatalf("plan in the original directory:\n%s", out)
	}
	// Accepting the move is explicit.
	out = copied.must("state relocate")
	if !strings.Contains(out, "now belongs to "+copied.dir) {
		t.Errorf("state relocate says:\n%s", out)
	}
	code, out, errs = copied.run("plan")
	if code != 0 || strings.Contains(errs, "another directory") || !strings.Contains(out, "No changes.") {
		t.Fatalf("plan after relocate: %d\n%s%s", code, out, errs)
	}
}

// TestStateLockNamesHolder: a held lock names its holder, and
// restore-backup refuses while it is held.
func TestStateLockNamesHolder(t *testing.T) {
	w := newWorkspace(t)
	w.write(twoAgents)
	w.must("apply", "-auto-approve")
	w.must("apply", "-auto-approve")
	held, err := state.Open(w.dir, state.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	pid := "pid " + strconv.Itoa(os.Getpid())
	for _, args := range [][]string{{"apply", "-auto-approve"}, {"plan"}, {"state restore-backup", "-auto-approve"}} {
		code, out, errs := w.run(args[0], args[1:]...)
		errs = flat(errs)
		if code != 1 || !strings.Contains(errs, "state is locked") || !strings.Contains(errs, pid) || !strings.Contains(errs, "writing since") {
			t.Fatalf("%v while locked: want the holder named, got %d:\n%s%s", args, code, out, errs)
		}
	}
}

// flat undoes the diagnostics' line wrapping.
func flat(s string) string { return strings.Join(strings.Fields(s), " ") }

// usedBytes is how much of a bbolt file its newest transaction uses: the
// high-water mark in the newer meta page, times the page size.
func usedBytes(t *testing.T, path string) int64 {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	le := binary.LittleEndian
	pageSize := int64(le.Uint32(data[16+8:]))
	meta := func(off int64) (pgid, txid uint64) { return le.Uint64(data[off+16+40:]), le.Uint64(data[off+16+48:]) }
	p0, t0 := meta(0)
	p1, t1 := meta(pageSize)
	if t1 > t0 {
		p0 = p1
	}
	return int64(p0) * pageSize
}
