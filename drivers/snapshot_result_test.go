package drivers

import (
	"maps"
	"testing"
	"time"
)

// A snapshot's result is stored in a state record's computed map under the
// keys state files have always had: what is recorded now is what an older
// bottlefile wrote, and what an older one wrote reads back typed.
func TestSnapshotResultStoredFormat(t *testing.T) {
	created := time.Date(2026, 11, 23, 9, 1, 2, 345000000, time.UTC)
	taken := time.Date(2026, 10, 1, 8, 0, 0, 0, time.UTC)
	tests := []struct {
		name   string
		resp   ApplyResponse
		stored map[string]string // as state files hold it
	}{
		{
			name: "docker take",
			resp: ApplyResponse{
				Snapshot: &SnapshotResult{Image: "bf-12345678-coder-snap:1", Size: 4096, Created: created, Source: "c0ffee"},
				Computed: map[string]string{"depth": "3"},
			},
			stored: map[string]string{"image": "bf-12345678-coder-snap:1", "size": "4096", "created": "2026-11-23T09:01:02.345Z", "source": "c0ffee", "depth": "3"},
		},
		{
			name:   "import",
			resp:   ApplyResponse{Snapshot: &SnapshotResult{Image: "bf-12345678-coder-snap:2", Size: 10, Created: created, Taken: taken}},
			stored: map[string]string{"image": "bf-12345678-coder-snap:2", "size": "10", "created": "2026-11-23T09:01:02.345Z", "taken": "2026-10-01T08:00:00Z"},
		},
		{
			name:   "not a snapshot",
			resp:   ApplyResponse{Computed: map[string]string{"name": "bf-x", "ip": "10.0.0.2"}},
			stored: map[string]string{"name": "bf-x", "ip": "10.0.0.2"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.resp.RecordComputed(); !maps.Equal(got, tt.stored) {
				t.Errorf("RecordComputed = %v, want %v", got, tt.stored)
			}
			got, ok := RecordedSnapshot(tt.stored)
			if ok != (tt.resp.Snapshot != nil) {
				t.Fatalf("RecordedSnapshot ok = %v", ok)
			}
			if !ok {
				if got.Size != -1 || !got.Created.IsZero() {
					t.Errorf("no snapshot: %+v", got)
				}
				return
			}
			want := *tt.resp.Snapshot
			if got.Image != want.Image || got.Size != want.Size || !got.Created.Equal(want.Created) || !got.Taken.Equal(want.Taken) || got.Source != want.Source {
				t.Errorf("RecordedSnapshot = %+v, want %+v", got, want)
			}
		})
	}
	// A record whose values do not parse reads as not known.
	if got, ok := RecordedSnapshot(map[string]string{"image": "x", "size": "big", "created": "yesterday"}); !ok || got.Size != -1 || !got.Created.IsZero() {
		t.Errorf("unparsable record = %+v, %v", got, ok)
	}
}
