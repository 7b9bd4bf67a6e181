package drivers

import (
	"maps"
	"strconv"
	"time"
)

// SnapshotResult is what a snapshot create (a take, or an import) made:
// ApplyResponse.Snapshot.
type SnapshotResult struct {
	// Image is what a workload boots from: an image reference (docker),
	// a .smolmachine path (smolvm).
	Image string
	// Size is the snapshot's size in bytes; -1 when not known.
	Size int64
	// Created is when this runtime made it; zero when not known.
	Created time.Time
	// Taken is, for an import, when the snapshot was taken on the runtime
	// it came from; zero otherwise.
	Taken time.Time
	// Source is the runtime's id of the workload it was taken of; "" when
	// not known (an import).
	Source string
}

// The state stores what apply computed as one string map per record
// (state.Record.Computed), and a snapshot's result sits in it under the
// keys below, as it has since the first state files. RecordComputed and
// RecordedSnapshot are the one place the typed result and that map meet:
// RecordComputed when a response is recorded (the executor, an import in
// operations), RecordedSnapshot when a record is read (planner, executor,
// operations). State files and saved plans keep their format.
const (
	computedImage   = "image"
	computedSize    = "size"
	computedCreated = "created"
	computedTaken   = "taken"
	computedSource  = "source"
)

// RecordComputed is what a state record stores of the response: its
// Computed values, and its snapshot result when it has one.
func (r ApplyResponse) RecordComputed() map[string]string {
	s := r.Snapshot
	if s == nil {
		return r.Computed
	}
	out := maps.Clone(r.Computed)
	if out == nil {
		out = map[string]string{}
	}
	out[computedImage] = s.Image
	out[computedSize] = strconv.FormatInt(s.Size, 10)
	if !s.Created.IsZero() {
		out[computedCreated] = s.Created.UTC().Format(time.RFC3339Nano)
	}
	if !s.Taken.IsZero() {
		out[computedTaken] = s.Taken.UTC().Format(time.RFC3339Nano)
	}
	if s.Source != "" {
		out[computedSource] = s.Source
	}
	return out
}

// RecordedSnapshot is the snapshot result a record's computed values hold;
// false when they record no image (not a snapshot). A value missing or
// that does not parse is left as not known.
func RecordedSnapshot(computed map[string]string) (SnapshotResult, bool) {
	image, ok := computed[computedImage]
	s := SnapshotResult{Image: image, Size: -1, Source: computed[computedSource]}
	if n, err := strconv.ParseInt(computed[computedSize], 10, 64); err == nil {
		s.Size = n
	}
	s.Created, _ = time.Parse(time.RFC3339Nano, computed[computedCreated])
	s.Taken, _ = time.Parse(time.RFC3339Nano, computed[computedTaken])
	return s, ok
}
