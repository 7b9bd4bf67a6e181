package drivers

import (
	"context"
	"io"
	"time"
)

// KindSnapshot is the kind of the objects the core plans for snapshots:
// snapshot blocks ("snapshot.NAME") and automatic policy snapshots
// ("agent.NAME.snapshot.N"). Drivers do not return them from Plan; they
// create, delete and list them.
//
// A snapshot object's Attrs are:
//
//	"agent"       string: the address of the agent whose workload is committed
//	"description" string or null
//	"triggers"    map of string or null: a change re-takes the snapshot
//	"policy"      bool: taken automatically by a snapshot_policy
//	"trigger"     string, policy snapshots only: what took it ("replace",
//	              "destroy", "migrate", or "take" for snapshot take); absent
//	              from snapshots recorded before it was
//
// Creating one commits the agent's workload (pausing it briefly) so that it
// boots like the agent declared in ApplyRequest.Agent, not like whatever
// it last ran. The response's ID is the snapshot's id (an image id, a pack
// path) and Computed carries:
//
//	"image"   what a workload boots from (an image reference, a .smolmachine path)
//	"size"    bytes, decimal
//	"created" RFC 3339
//	"source"  the workload's id it was taken from
//
// Deleting one removes the image or pack. Read lists them like any object.
const KindSnapshot = "snapshot"

// Written is what a driver reports about a workload's own filesystem, so a
// plan can say how much a replacement or a destroy would discard.
type Written struct {
	Bytes int64     // bytes written to the workload's own layer
	Since time.Time // when the workload was created
	// Unmeasured, when set, says why Bytes is not known: the runtime
	// could tell only at a cost out of proportion to a warning (docker
	// on a storage driver that sizes a layer by reading every file).
	Unmeasured string
}

// WrittenReader is implemented by drivers that can tell how much a
// workload has written. The planner calls it, read-only, only for workloads
// a plan would replace or destroy without a snapshot first, and for one a
// snapshot is taken of when a max_total_size counts what it will add.
type WrittenReader interface {
	Written(ctx context.Context, lineage string, obj LiveObject) (Written, error)
}

// SnapshotExporter is implemented by drivers whose snapshots can leave the
// runtime as a docker-save tar stream (for migration and snapshot export).
type SnapshotExporter interface {
	ExportSnapshot(ctx context.Context, image string, w io.Writer) error
}

// SnapshotImporter is implemented by drivers that can take a snapshot in as
// a docker-save tar stream. It returns what a workload boots from; the
// imported image carries the lineage and address labels.
type SnapshotImporter interface {
	ImportSnapshot(ctx context.Context, req ImportRequest, r io.Reader) (ApplyResponse, error)
}

// ImportRequest names the snapshot being imported.
type ImportRequest struct {
	Lineage string
	Object  Object // the snapshot object on this runtime
	Hash    string
}
