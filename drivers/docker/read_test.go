package docker

import (
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"

	"github.com/bottlefile/bottlefile/drivers"
)

// TestRunFacts: the state, exit code and times of a container come from
// one entry of the container list, Status read as docker ps writes it.
func TestRunFacts(t *testing.T) {
	now := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	created := now.Add(-time.Hour).Unix()
	for _, tc := range []struct {
		state, status string
		code          int
		started, done time.Duration // before now; -1 for none
	}{
		{"running", "Up 5 minutes", 0, 5 * time.Minute, -1},
		{"running", "Up Less than a second", 0, 0, -1},
		{"running", "Up About an hour (Paused)", 0, time.Hour, -1},
		{"exited", "Exited (3) 2 minutes ago", 3, -1, 2 * time.Minute},
		{"exited", "Exited (127) Less than a second ago", 127, -1, 0},
		{"exited", "Exited (0) 3 weeks ago", 0, -1, 21 * 24 * time.Hour},
		{"created", "Created", 0, -1, -1},
	} {
		var o drivers.LiveObject
		runFacts(&o, container.Summary{State: container.ContainerState(tc.state), Status: tc.status, Created: created}, now)
		if o.State != tc.state || o.ExitCode != tc.code || !o.Created.Equal(time.Unix(created, 0)) {
			t.Errorf("%q: state %q code %d created %v", tc.status, o.State, o.ExitCode, o.Created)
		}
		check := func(what string, got time.Time, want time.Duration) {
			if want < 0 {
				if !got.IsZero() {
					t.Errorf("%q: %s %v, want none", tc.status, what, got)
				}
				return
			}
			if !got.Equal(now.Add(-want)) {
				t.Errorf("%q: %s %v, want %v", tc.status, what, got, now.Add(-want))
			}
		}
		check("started", o.Started, tc.started)
		check("finished", o.Finished, tc.done)
	}
}
