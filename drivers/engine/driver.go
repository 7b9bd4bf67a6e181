package engine

import (
	"context"

	"github.com/docker/docker/client"
	"github.com/hashicorp/go-hclog"
	"github.com/zclconf/go-cty/cty"

	"github.com/bottlefile/bottlefile/drivers"
)

// Driver is what a driver that runs bottles on Docker engines it does not
// drive itself (swarm: its manager's, and each node's) needs of a driver
// of one engine, configured with a runtime block of that driver's
// (Declare's Schema.Runtime) pointed at the engine. cmd/bottlefile wires
// the docker driver in, so such a driver never names it.
//
// Besides a driver's Configure, Apply (of image objects: builds and
// deletes) and Close, and the workload's exec and log, it gives:
type Driver interface {
	drivers.Driver
	drivers.Closer
	drivers.Execer
	drivers.LogReader
	drivers.SnapshotExporter
	drivers.SnapshotImporter

	// Client is the engine client, as the whole Docker API, for calls the
	// driver does not make (swarm services). The first call checks that
	// the engine answers (Connect).
	Client(ctx context.Context) (client.APIClient, error)
	// Unreachable turns an error that says the engine cannot be reached
	// at all into a *drivers.UnreachableError naming the runtime and
	// where the engine was looked for; other errors pass unchanged.
	Unreachable(err error) error
	// PlanImage is the image object of a workload at addr with a build
	// block (addr + ".image", its context hashed) and the context hash the
	// workload's own object records as build_hash; nil and "" without a
	// build block. It reads the context and contacts nothing.
	PlanImage(addr string, w cty.Value) (*drivers.Object, string, error)
	// CommitSnapshot takes the snapshot req.Object of the agent req.Agent
	// from the container ctr (a name or an id) on the engine: no secret of
	// the container's config in the image, tagged SnapshotRef's reference.
	// The response is a snapshot create's.
	CommitSnapshot(ctx context.Context, req drivers.ApplyRequest, ctr string) (drivers.ApplyResponse, error)
	// SweepSnapshots removes what making snapshots of the lineage left on
	// the engine that nothing records.
	SweepSnapshots(ctx context.Context, lineage string)
	// ContainerActivity looks at running containers of the engine as
	// the driver's own activity looks do (activity.go): one Use per
	// container, in order. CPU is averaged since the last look at each,
	// remembered in the state directory under the name memory (a name
	// of the caller's, one per engine it asks: a look forgets the
	// containers of its memory it is not given). The error says the
	// engine could not be reached; a container it cannot tell about is
	// Unknown.
	ContainerActivity(ctx context.Context, memory string, ctrs []Watched) ([]Use, error)
	// ComposeWorkspace makes, on the engine, the image ref a workload with
	// a carried workspace boots from: base with req.Carry's paths copied
	// in, from the container src on the engine, or when src is "" from
	// req.Carry.Image. The caller pushes it and removes the tag.
	ComposeWorkspace(ctx context.Context, req drivers.ApplyRequest, base, src, ref string) error
}

// Factory makes an unconfigured Driver of one engine.
type Factory func(log hclog.Logger) (Driver, error)
