package operations

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/bottlefile/bottlefile/state"
)

// TestStateReads: pull, list and show read what the state records; a
// directory where nothing was applied reads as empty.
func TestStateReads(t *testing.T) {
	dir := writeRecords(t,
		state.Record{Addr: "agent.b", Kind: "container", Runtime: "default"},
		state.Record{Addr: "agent.a", Kind: "container", Runtime: "default"})
	st, diags := StatePull(dir)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	if st.Lineage == "" || len(st.Records) != 2 {
		t.Errorf("pull: %+v", st)
	}
	if addrs, _ := StateList(dir); !slices.Equal(addrs, []string{"agent.a", "agent.b"}) {
		t.Errorf("list: %q", addrs)
	}
	if r, diags := StateShow(dir, "agent.b"); diags.HasErrors() || r.Kind != "container" {
		t.Errorf("show agent.b: %+v %v", r, diags)
	}
	if _, diags := StateShow(dir, "agent.c"); !diags.HasErrors() || diags[0].Summary != "No such record" {
		t.Errorf("show agent.c: %v", diags)
	}
	empty, diags := StatePull(t.TempDir())
	if diags.HasErrors() || empty.Lineage != "" || len(empty.Records) != 0 {
		t.Errorf("an empty directory: %+v %v", empty, diags)
	}
}

// TestStateRm: records go in order, and the first address not recorded
// stops it, leaving those after it.
func TestStateRm(t *testing.T) {
	dir := writeRecords(t,
		state.Record{Addr: "agent.a", Kind: "container"},
		state.Record{Addr: "agent.b", Kind: "container"},
		state.Record{Addr: "agent.c", Kind: "container"})
	removed, diags := StateRm(dir, []string{"agent.a", "agent.x", "agent.b"}, 0)
	if !diags.HasErrors() || diags[0].Summary != "No such record" || !slices.Equal(removed, []string{"agent.a"}) {
		t.Errorf("rm: removed %q, %v", removed, diags)
	}
	if addrs, _ := StateList(dir); !slices.Equal(addrs, []string{"agent.b", "agent.c"}) {
		t.Errorf("left: %q", addrs)
	}
}

// TestStateRelocate: a directory with no state has nothing to relocate; a
// state copied to another directory is recorded there.
func TestStateRelocate(t *testing.T) {
	if _, diags := StateRelocate(t.TempDir(), 0); !diags.HasErrors() || diags[0].Summary != "No state" {
		t.Errorf("no state: %v", diags)
	}
	from := writeRecords(t, state.Record{Addr: "agent.a", Kind: "container"})
	to := t.TempDir()
	if err := os.MkdirAll(filepath.Dir(StatePath(to)), 0o755); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(StatePath(from))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(StatePath(to), data, 0o600); err != nil {
		t.Fatal(err)
	}
	prev, diags := StateRelocate(to, 0)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	if abs, _ := filepath.Abs(from); prev != abs && prev != "" {
		t.Errorf("relocate said it belonged to %q, want %q", prev, abs)
	}
	if addrs, diags := StateList(to); diags.HasErrors() || !slices.Equal(addrs, []string{"agent.a"}) {
		t.Errorf("after relocate: %q %v", addrs, diags)
	}
}
