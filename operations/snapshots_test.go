package operations

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bottlefile/bottlefile/executor"
	"github.com/bottlefile/bottlefile/state"
)

// writeRecords makes a state in a new directory holding recs.
func writeRecords(t *testing.T, recs ...state.Record) string {
	t.Helper()
	dir := t.TempDir()
	s, err := state.Open(dir, state.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Init(); err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if err := s.Put(r); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// snapRecord is a snapshot record with the given attributes as JSON.
func snapRecord(addr string, attrs map[string]any, computed map[string]string) state.Record {
	r := state.Record{Addr: addr, Kind: "snapshot", Driver: "docker", Runtime: "default", Attrs: map[string]json.RawMessage{}, Computed: computed}
	for k, v := range attrs {
		r.Attrs[k], _ = json.Marshal(v)
	}
	return r
}

// TestListSnapshotsTriggers: the trigger a record carries, or for records
// made before triggers were recorded, the one its description implies;
// policy snapshots in number order (10 after 9), blocks after them.
func TestListSnapshotsTriggers(t *testing.T) {
	policy := func(desc string, trigger any) map[string]any {
		return map[string]any{"agent": "agent.a", "description": desc, "policy": true, "trigger": trigger}
	}
	dir := writeRecords(t,
		snapRecord("agent.a.snapshot.10", policy("before replace", nil), map[string]string{"size": "5", "created": "2026-11-25T06:00:00Z"}),
		snapRecord("agent.a.snapshot.9", policy("before migrate", nil), nil),
		snapRecord("agent.a.snapshot.2", policy("imported from x.tar", nil), map[string]string{"created": "2026-11-25T06:00:00Z", "taken": "2026-11-20T06:00:00Z"}),
		snapRecord("agent.a.snapshot.3", policy("hook", "take"), nil),
		snapRecord("agent.a.snapshot.4", policy("before destroy", "destroy"), nil),
		snapRecord("agent.a.snapshot.5", policy("who knows", nil), nil),
		snapRecord("snapshot.base", map[string]any{"agent": "agent.a", "description": "clean", "policy": false}, nil),
		snapRecord("agent.b.snapshot.1", map[string]any{"agent": "agent.b", "policy": true, "trigger": "replace"}, nil),
		state.Record{Addr: "agent.a", Kind: "container", Computed: map[string]string{executor.BootFromKey: "agent.a.snapshot.10"}},
		state.Record{Addr: "agent.b", Kind: "container"},
	)
	snaps, err := ListSnapshots(dir, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range snaps {
		got = append(got, s.Addr+" "+s.Trigger)
	}
	want := []string{
		"agent.a.snapshot.2 import", "agent.a.snapshot.3 take", "agent.a.snapshot.4 before destroy",
		"agent.a.snapshot.5 policy", "agent.a.snapshot.9 migrate", "agent.a.snapshot.10 before replace",
		"snapshot.base block", "agent.b.snapshot.1 before replace",
	}
	if !slices.Equal(got, want) {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	ten := snaps[5]
	if ten.Size != 5 || !slices.Equal(ten.BootedBy, []string{"agent.a"}) || !ten.Taken.Equal(time.Date(2026, 11, 25, 6, 0, 0, 0, time.UTC)) {
		t.Errorf("agent.a.snapshot.10: %+v", ten)
	}
	if imp := snaps[0]; !imp.Taken.Equal(time.Date(2026, 11, 20, 6, 0, 0, 0, time.UTC)) || imp.Size != -1 {
		t.Errorf("an import is dated when it was taken, not loaded: %+v", imp)
	}

	if snaps, err := ListSnapshots(dir, "agent.b", 0); err != nil || len(snaps) != 1 || snaps[0].Addr != "agent.b.snapshot.1" {
		t.Errorf("agent.b: %+v %v", snaps, err)
	}
	if snaps, err := ListSnapshots(dir, "snapshot.base", 0); err != nil || len(snaps) != 1 {
		t.Errorf("snapshot.base: %+v %v", snaps, err)
	}
	if _, err := ListSnapshots(dir, "agent.a.snapshot.1", 0); err == nil {
		t.Errorf("an address with no snapshot is no error")
	}
}
