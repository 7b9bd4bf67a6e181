package docker

import (
	"archive/tar"
	"context"
	"io"
	"sync"

	cerrdefs "github.com/containerd/errdefs"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/gateway"
	"github.com/bottlefile/bottlefile/egress"
)

// Gateway drift (issue 25). A gateway takes a rules or credentials file
// changed in its container (docker cp, then SIGHUP) as it takes the
// driver's, unless it lies outside its ceiling: the labels cannot tell.
// So each gateway reports the digest of every file as it last read it,
// taken or refused (-state gateway.StatePath), the driver records the
// digests of the files it wrote (gatewayFiles, as computed values), and
// Read reports the gateway's as LiveObject.Config: the planner updates a
// gateway whose files differ, which writes them again. The ceiling cannot
// drift so: it is on the command line, and a container made again has
// another id. Someone who can write the report too (root in the
// container) can hide a change; the ceiling still holds against them.

// gatewayReportReads bounds the reads of gateway reports Read makes at
// once: one call per running gateway, beside the one list call.
const gatewayReportReads = 8

// maxGatewayReport bounds what is read of one report.
const maxGatewayReport = 64 << 10

// gatewayReport is a running gateway Read asks for its report: the
// object at index of the response.
type gatewayReport struct {
	index int
	id    string
}

// readGatewayReports sets objs[r.index].Config for each report, reading
// at most gatewayReportReads at once.
func (d *Driver) readGatewayReports(ctx context.Context, api dockerAPI, objs []drivers.LiveObject, reports []gatewayReport) {
	sem := make(chan struct{}, gatewayReportReads)
	var wg sync.WaitGroup
	for _, r := range reports {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			objs[r.index].Config = drivers.LiveConfig(d.gatewayLoaded(ctx, api, r.id))
		})
	}
	wg.Wait()
}

// gatewayLoaded is what the gateway id reports of its files, the digest
// of each by kind. A gateway started with -state that has no
// report (removed by hand) differs from everything recorded: "missing".
// nil when the engine cannot say (the report is then not judged).
func (d *Driver) gatewayLoaded(ctx context.Context, api dockerAPI, id string) map[string]string {
	missing := map[string]string{"rules": "missing", "credentials": "missing"}
	rc, _, err := api.CopyFromContainer(ctx, id, gateway.StatePath)
	if cerrdefs.IsNotFound(err) {
		return missing
	}
	if err != nil {
		d.log.Debug("reading a gateway's report", "id", shortID(id), "error", err)
		return nil
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	if _, err := tr.Next(); err != nil {
		return missing
	}
	data, err := io.ReadAll(io.LimitReader(tr, maxGatewayReport))
	if err != nil {
		d.log.Debug("reading a gateway's report", "id", shortID(id), "error", err)
		return nil
	}
	loaded, err := egress.ParseLoaded(data)
	if err != nil {
		return missing
	}
	return loaded
}
