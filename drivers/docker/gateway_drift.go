package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"strconv"
	"sync"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"

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
//
// The gateway also logs each change of its report on stderr (a
// files-in-force line, egress.LoadedEvent), before the events of the
// reload that made it. Read takes the last such line among the last
// gatewayReportTail lines of the gateway's log: the engine reads them from
// the end of the log file, a few milliseconds, where a copy of the report
// out of the container mounts it (about 30 ms each on fuse-overlayfs, most
// of a no-op plan with ten gateways). The last line logged is the report
// in force, so an edit of a file followed by a SIGHUP (or the next poll)
// shows as drift as it did through the file. When the line is not among
// those lines (many decisions logged since, the log rotated away, or a
// gateway of a bottlefile before the line), the report file is read as
// before.

// gatewayReportReads bounds the reads of gateway reports Read makes at
// once: one call per running gateway, beside the one list call.
const gatewayReportReads = 8

// maxGatewayReport bounds what is read of one report.
const maxGatewayReport = 64 << 10

// gatewayReportTail is how many of the last lines of a gateway's log
// (decisions on stdout included: the engine counts them before it leaves
// them out) Read looks in for its last files-in-force line.
const gatewayReportTail = 200

// gatewayReport is a running gateway Read asks for its report: the
// object at index of the response.
type gatewayReport struct {
	index int
	id    string
}

// readGatewayReports starts reading each report, at most
// gatewayReportReads at once, and returns a func that waits for them and
// sets objs[r.index].Config for each. Read lists the networks and images
// meanwhile: the reads no longer come after them (issue 28).
func (d *Driver) readGatewayReports(ctx context.Context, api dockerAPI, reports []gatewayReport) (set func(objs []drivers.LiveObject)) {
	loaded := make([]map[string]string, len(reports))
	sem := make(chan struct{}, gatewayReportReads)
	var wg sync.WaitGroup
	for i, r := range reports {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			loaded[i] = d.gatewayLoaded(ctx, api, r.id)
		})
	}
	return func(objs []drivers.LiveObject) {
		wg.Wait()
		for i, r := range reports {
			objs[r.index].Config = drivers.LiveConfig(loaded[i])
		}
	}
}

// gatewayLoaded is what the gateway id reports of its files, the digest
// of each by kind: its last files-in-force line, else its report file. A
// gateway started with -state that has neither (the file removed by hand,
// the line scrolled away) differs from everything recorded: "missing".
// nil when the engine cannot say (the report is then not judged).
func (d *Driver) gatewayLoaded(ctx context.Context, api dockerAPI, id string) map[string]string {
	if loaded, ok := d.gatewayLoggedReport(ctx, api, id); ok {
		return loaded
	}
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

// gatewayLoggedReport is the report of the last files-in-force line among
// the last gatewayReportTail lines of the gateway's log, and whether there
// is one.
func (d *Driver) gatewayLoggedReport(ctx context.Context, api dockerAPI, id string) (map[string]string, bool) {
	rc, err := api.ContainerLogs(ctx, id, container.LogsOptions{ShowStderr: true, Tail: strconv.Itoa(gatewayReportTail)})
	if err != nil {
		d.log.Debug("reading the end of a gateway's log", "id", shortID(id), "error", err)
		return nil, false
	}
	defer rc.Close()
	var stderr bytes.Buffer
	if _, err := stdcopy.StdCopy(io.Discard, &stderr, rc); err != nil {
		d.log.Debug("reading the end of a gateway's log", "id", shortID(id), "error", err)
		return nil, false
	}
	lines := bytes.Split(stderr.Bytes(), []byte("\n"))
	for i := len(lines) - 1; i >= 0; i-- {
		if loaded, ok := egress.ParseLoadedEvent(lines[i]); ok {
			return loaded, true
		}
	}
	return nil, false
}
