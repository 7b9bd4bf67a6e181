package operations

import (
	"encoding/json"
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

// TestStateMv: an agent's records move with everything below it, in one
// write: the attributes that name its address name the new one (with
// their hash, so a plan for the renamed block has nothing to do), its
// dependencies follow, and the records say which names the engine
// objects keep. Bad moves change nothing: the same address, a non-agent
// address, a destination already recorded, a source not recorded.
func TestStateMv(t *testing.T) {
	network := json.RawMessage(`"agent.a.network"`)
	dir := writeRecords(t,
		state.Record{Addr: "agent.a", Kind: "container", ID: "c1", DependsOn: []string{"agent.a.network"},
			Attrs: map[string]json.RawMessage{"network": network}, AttrHashes: map[string]string{"network": "old"}, Hash: "h"},
		state.Record{Addr: "agent.a.network", Kind: "network", ID: "n1"},
		state.Record{Addr: "agent.a.snapshot.1", Kind: "snapshot", ID: "s1"},
		state.Record{Addr: "agent.ab", Kind: "container", ID: "c2"},
		state.Record{Addr: "agent.b", Kind: "container", ID: "c3"})

	for _, bad := range []struct{ from, to, summary string }{
		{"agent.a", "agent.a", "Redundant move"},
		{"agent.a", "agent.b", "Moved object already exists"},
		{"agent.a.network", "agent.c.network", "Invalid move address"},
		{"agent.x", "agent.y", "No such record"},
		{"agent..a", "agent.c", "Invalid address"},
	} {
		if _, diags := StateMv(dir, bad.from, bad.to, 0); !diags.HasErrors() || diags[0].Summary != bad.summary {
			t.Errorf("state mv %s %s: %v, want %q", bad.from, bad.to, diags, bad.summary)
		}
	}
	if addrs, _ := StateList(dir); len(addrs) != 5 || addrs[0] != "agent.a" {
		t.Fatalf("a refused move changed the state: %q", addrs)
	}

	moved, diags := StateMv(dir, "agent.a", "agent.c", 0)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	want := [][2]string{{"agent.a", "agent.c"}, {"agent.a.network", "agent.c.network"}, {"agent.a.snapshot.1", "agent.c.snapshot.1"}}
	if !slices.Equal(moved, want) {
		t.Errorf("moved %q, want %q", moved, want)
	}
	if addrs, _ := StateList(dir); !slices.Equal(addrs, []string{"agent.ab", "agent.b", "agent.c", "agent.c.network", "agent.c.snapshot.1"}) {
		t.Errorf("after the move: %q", addrs)
	}
	r, _ := StateShow(dir, "agent.c")
	if r.ID != "c1" || !slices.Equal(r.DependsOn, []string{"agent.c.network"}) || string(r.Attrs["network"]) != `"agent.c.network"` {
		t.Errorf("the moved agent's record: %+v", r)
	}
	if r.AttrHashes["network"] == "old" || r.Hash == "h" {
		t.Errorf("the moved attribute's hash was not made again: %+v", r)
	}
	if r.Computed["name_addr"] != "agent.a" {
		t.Errorf("the moved record does not say its objects keep the names of agent.a: %v", r.Computed)
	}
	// Back again: the names are its own once more.
	if _, diags := StateMv(dir, "agent.c", "agent.a", 0); diags.HasErrors() {
		t.Fatal(diags)
	}
	if r, _ := StateShow(dir, "agent.a"); r.Computed["name_addr"] != "" || string(r.Attrs["network"]) != `"agent.a.network"` || r.AttrHashes["network"] == "old" {
		t.Errorf("moved back: %+v", r)
	}
}
