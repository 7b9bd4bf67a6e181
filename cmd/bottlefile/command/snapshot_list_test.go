package command

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bottlefile/bottlefile/state"
)

// listBase is the Bottlefile of the snapshot list/rm/take tests: an agent
// with a policy that snapshots before a replace and keeps %s, and a
// snapshot block of it (or not, when the caller cuts it).
const listBase = `
agent "coder" {
  image   = "busybox:1"
  command = ["sleep", "%s"]

  snapshot_policy {
    before    = ["replace"]
    keep_last = %s
  }
}
`

const listBlock = `
snapshot "base" {
  agent       = agent.coder
  description = "clean tree"
}
`

func listConfig(sleep, keep string, block bool) string {
	src := strings.Replace(strings.Replace(listBase, "%s", sleep, 1), "%s", keep, 1)
	if block {
		src += listBlock
	}
	return src
}

// clock fixes the time the fake driver stamps snapshots with and the time
// snapshot list measures ages from; set moves it.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func fixClock(t *testing.T, w *workspace) *clock {
	c := &clock{t: time.Date(2026, 11, 25, 6, 0, 0, 0, time.UTC)}
	w.fake.Now = c.now
	old := now
	now = c.now
	t.Cleanup(func() { now = old })
	return c
}

// runWith runs a command with the given standard input.
func (w *workspace) runWith(stdin, name string, args ...string) (int, string, string) {
	w.t.Helper()
	var out, errb bytes.Buffer
	m := &Meta{
		Stdout: &out, Stderr: &errb, Stdin: strings.NewReader(stdin),
		Log: w.logger(), Registry: w.registry(),
		Ctx: context.Background(), Abandon: context.Background(),
		Dir: w.dir,
	}
	c, err := Commands(m)[name]()
	if err != nil {
		w.t.Fatal(err)
	}
	code := c.Run(args)
	return code, out.String(), errb.String()
}

// record reads one record of the workspace's state.
func (w *workspace) record(addr string) (state.Record, bool) {
	w.t.Helper()
	s, err := state.Open(w.dir, state.Options{ReadOnly: true})
	if err != nil {
		w.t.Fatal(err)
	}
	defer s.Close()
	r, ok, err := s.Get(addr)
	if err != nil {
		w.t.Fatal(err)
	}
	return r, ok
}

// setComputed changes one computed value of a record.
func (w *workspace) setComputed(addr, name, value string) {
	w.t.Helper()
	s, err := state.Open(w.dir, state.Options{})
	if err != nil {
		w.t.Fatal(err)
	}
	defer s.Close()
	r, ok, err := s.Get(addr)
	if err != nil || !ok {
		w.t.Fatalf("%s: %v %v", addr, ok, err)
	}
	r.Computed[name] = value
	if err := s.Put(r); err != nil {
		w.t.Fatal(err)
	}
}

// listWorkspace has three snapshots: snapshot.base (a block), then
// agent.coder.snapshot.1 (before a replace, which the new container boots
// from) and agent.coder.snapshot.2 (imported), at known times.
func listWorkspace(t *testing.T) (*workspace, *clock) {
	w := newWorkspace(t)
	c := fixClock(t, w)
	w.write(listConfig("600", "5", true))
	w.must("apply", "-auto-approve", "-parallelism=1")
	w.fake.WriteFile(w.lineage(), "agent.coder", "/workspace/notes.txt")

	c.t = c.t.Add(90 * time.Minute)
	w.write(listConfig("700", "5", true))
	w.must("apply", "-auto-approve", "-parallelism=1")

	c.t = c.t.Add(2 * time.Hour)
	file := filepath.Join(w.dir, "coder.tar")
	w.mustSnapshot("export", "agent.coder.snapshot.1", "-o", file)
	w.mustSnapshot("import", file)
	// The fake stamps an import with the real clock.
	w.setComputed("agent.coder.snapshot.2", "created", c.t.Format(time.RFC3339Nano))
	c.t = c.t.Add(3 * time.Hour)
	return w, c
}

func TestSnapshotList(t *testing.T) {
	w, _ := listWorkspace(t)

	out := w.must("snapshot list")
	golden(t, "testdata/snapshot-list/list.txt", w.normalize(out))
	out = w.must("snapshot list", "-json")
	golden(t, "testdata/snapshot-list/list.json", w.normalize(out))

	var doc struct {
		FormatVersion string `json:"format_version"`
		Snapshots     []struct {
			Address  string   `json:"address"`
			Trigger  string   `json:"trigger"`
			Size     *int64   `json:"size_bytes"`
			BootedBy []string `json:"booted_by"`
		} `json:"snapshots"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	var addrs []string
	for _, s := range doc.Snapshots {
		addrs = append(addrs, s.Address+" "+s.Trigger)
	}
	want := []string{"agent.coder.snapshot.1 before replace", "agent.coder.snapshot.2 import", "snapshot.base block"}
	if doc.FormatVersion != "1.0" || !slices.Equal(addrs, want) {
		t.Errorf("list -json: version %q, snapshots %q, want %q", doc.FormatVersion, addrs, want)
	}
	// The replacement container was created from snapshot 1: its record
	// says so, and nothing else boots from a snapshot.
	if s := doc.Snapshots[0]; !slices.Equal(s.BootedBy, []string{"agent.coder"}) || s.Size == nil || *s.Size != 1000 {
		t.Errorf("agent.coder.snapshot.1: booted by %q, size %v", s.BootedBy, s.Size)
	}
	if len(doc.Snapshots[1].BootedBy)+len(doc.Snapshots[2].BootedBy) != 0 {
		t.Errorf("others boot from nothing: %+v", doc.Snapshots)
	}

	// One agent's, one address, and what is not a snapshot.
	if out := w.must("snapshot list", "agent.coder"); strings.Count(out, "agent.coder.snapshot.") != 2 || !strings.Contains(out, "snapshot.base") {
		t.Errorf("list agent.coder:\n%s", out)
	}
	if out := w.must("snapshot list", "snapshot.base"); strings.Contains(out, "agent.coder.snapshot.") || !strings.Contains(out, "clean tree") {
		t.Errorf("list snapshot.base:\n%s", out)
	}
	if out := w.must("snapshot list", "agent.other"); !strings.Contains(out, "no snapshot of agent.other") {
		t.Errorf("list agent.other:\n%s", out)
	}
	for args, want := range map[string]string{
		"agent.coder.network":    "agent.coder.network is a network, not a snapshot",
		"agent.coder.snapshot.9": "records no snapshot at agent.coder.snapshot.9",
		"a b":                    "at most one address",
		"-bogus":                 "flag provided but not defined",
	} {
		code, out, errs := w.run("snapshot list", strings.Fields(args)...)
		if code != 1 || !strings.Contains(errs, want) {
			t.Errorf("snapshot list %s: exit %d, want 1 and %q\n%s%s", args, code, want, out, errs)
		}
	}
}

// TestSnapshotListEmpty: no state at all is an empty list, not an error,
// and -json is still one document with a list.
func TestSnapshotListEmpty(t *testing.T) {
	w := newWorkspace(t)
	if out := w.must("snapshot list"); out != "The state records no snapshot.\n" {
		t.Errorf("list: %q", out)
	}
	if out := w.must("snapshot list", "-json"); out != "{\n  \"format_version\": \"1.0\",\n  \"snapshots\": []\n}\n" {
		t.Errorf("list -json: %q", out)
	}
	if _, err := os.Stat(filepath.Join(w.dir, state.Dir)); err == nil {
		t.Errorf("list created the state directory")
	}
}

func TestAge(t *testing.T) {
	at := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	for d, want := range map[time.Duration]string{
		-time.Second: "0s ago", 5 * time.Second: "5s ago", 59 * time.Minute: "59m ago",
		3 * time.Hour: "3h ago", 47 * time.Hour: "47h ago", 72 * time.Hour: "3d ago",
	} {
		if got := age(at.Add(-d), at); got != want {
			t.Errorf("age(%s) = %q, want %q", d, got, want)
		}
	}
	if got := age(time.Time{}, at); got != "-" {
		t.Errorf("age(zero) = %q", got)
	}
}
