package docker

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/network"

	"github.com/bottlefile/bottlefile/addrs"
	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/gateway"
)

// Read lists the containers, networks and images of one lineage: one
// filtered list call per kind. Objects without an address label are not
// bottlefile's to manage by address and are left out (logged).
func (d *Driver) Read(ctx context.Context, req drivers.ReadRequest) (drivers.ReadResponse, error) {
	resp, err := d.read(ctx, req)
	return resp, d.Unreachable(err)
}

func (d *Driver) read(ctx context.Context, req drivers.ReadRequest) (drivers.ReadResponse, error) {
	var resp drivers.ReadResponse
	if req.Lineage == "" {
		return resp, nil
	}
	api, _, err := d.engine(ctx)
	if err != nil {
		return resp, err
	}
	byLineage := filters.NewArgs(filters.Arg("label", drivers.LabelLineage+"="+req.Lineage))

	// One list call carries what status needs of every container: its
	// state, and in Status ("Exited (3) 2 minutes ago", "Up 5 minutes")
	// its exit code and times, to the unit that text names. No inspect.
	sizes := req.Sizes
	if sizes {
		sizes, _ = d.writesMeasurable(ctx, api)
	}
	// The three lists at once: a no-op plan is mostly waiting on them
	// (issue 28).
	var (
		networks           []network.Summary
		images             []image.Summary
		networkErr, imgErr error
		lists              sync.WaitGroup
	)
	lists.Go(func() { networks, networkErr = api.NetworkList(ctx, network.ListOptions{Filters: byLineage}) })
	lists.Go(func() { images, imgErr = api.ImageList(ctx, image.ListOptions{Filters: byLineage}) })
	defer lists.Wait()
	containers, err := api.ContainerList(ctx, container.ListOptions{All: true, Filters: byLineage, Size: sizes})
	if err != nil {
		return resp, fmt.Errorf("listing containers of lineage %s: %w", req.Lineage, err)
	}
	var reports []gatewayReport // running gateways that report what they loaded
	for _, c := range containers {
		name := ""
		if len(c.Names) > 0 {
			name = strings.TrimPrefix(c.Names[0], "/")
		}
		kind := kindContainer
		if c.Labels[labelKind] == gateway.Kind {
			kind = gateway.Kind
		}
		if o, ok := d.live(c.Labels, kind, c.ID, name); ok {
			o.Running = c.State == container.StateRunning
			// A gateway is connected to the egress network and given its
			// rules between create and start: one never started may not
			// have them. An agent or sidecar is started right after create.
			o.Unfinished = kind == gateway.Kind && c.State == container.StateCreated
			o.ImageID = c.ImageID
			runFacts(&o, c, time.Now())
			if sizes {
				n := written(ctx, api, c.ID, c.Labels, c.SizeRw)
				o.Written = &n
			}
			if a, err := addrs.Parse(o.Addr); err == nil && (a.Kind() == addrs.ImageKind || a.Kind() == addrs.SidecarImageKind) {
				// A container never stands at an image's address: this is
				// the classic builder's, of a build a killed apply cut off
				// (its steps inherit the labels the build gives).
				o.Leftover = "a builder container of a build that was cut off"
			} else if c.State == container.StateRemoving || c.State == container.StateDead {
				// A removal asked for by a run that was killed goes on (or
				// failed halfway): no record can be it any more, and it
				// cannot be committed or started. The plan removes it by
				// its id, waiting the removal out, and creates the address
				// again when it is wanted.
				o.Leftover = "being removed (a removal asked for by a run that was cut off, or one the engine could not finish)"
			}
			if kind == kindContainer && (c.State == container.StateExited || c.State == container.StateDead) {
				o.Exit = exitFromStatus(c.Status)
				if o.Exit != nil {
					o.Exit.At = o.Finished
				}
			}
			if kind == gateway.Kind && o.Running && strings.Contains(c.Command, "-state "+gateway.StatePath) {
				reports = append(reports, gatewayReport{index: len(resp.Objects), id: c.ID})
			}
			resp.Objects = append(resp.Objects, o)
		}
	}
	setReports := func([]drivers.LiveObject) {}
	if !req.NoConfig {
		setReports = d.readGatewayReports(ctx, api, reports)
	}

	lists.Wait()
	if err := networkErr; err != nil {
		return resp, fmt.Errorf("listing networks of lineage %s: %w", req.Lineage, err)
	}
	for _, n := range networks {
		if o, ok := d.live(n.Labels, kindNetwork, n.ID, n.Name); ok {
			resp.Objects = append(resp.Objects, o)
		}
	}

	if err := imgErr; err != nil {
		return resp, fmt.Errorf("listing images of lineage %s: %w", req.Lineage, err)
	}
	// Every image of the lineage is accounted for: one a record may be
	// (a tagged snapshot or built image), one a container of the lineage
	// runs or another image is made on (kept for it, removed by a sweep
	// once free), or a leftover the plan removes.
	inUse := map[string]bool{}
	for _, c := range containers {
		inUse[c.ImageID] = true
	}
	for _, img := range images {
		if img.ParentID != "" {
			inUse[img.ParentID] = true
		}
	}
	for _, img := range images {
		kind, leftover := kindImage, ""
		switch {
		case img.Labels[labelSnapshotIntermediate] != "":
			kind, leftover = drivers.KindSnapshot, "the intermediate image of a snapshot, left by an apply cut off while taking it"
		case img.Labels[labelSnapshotOf] != "":
			kind = drivers.KindSnapshot
			if !hasSnapshotTag(req.Lineage, img.RepoTags) {
				// Deleted while in use, or its tag went to a snapshot taken
				// again after an apply cut off before recording it.
				leftover = "an untagged snapshot image no record names (its snapshot was deleted or taken again)"
			}
		case !hasTags(img.RepoTags):
			leftover = "an untagged built image no record names"
		}
		if leftover != "" && inUse[img.ID] {
			continue
		}
		if o, ok := d.live(img.Labels, kind, img.ID, imageName(img.RepoTags)); ok {
			if leftover != "" {
				o.Leftover, o.Name = leftover, shortID(img.ID)
			}
			resp.Objects = append(resp.Objects, o)
		}
	}

	setReports(resp.Objects)
	drivers.SortLive(resp.Objects)
	return resp, nil
}

func (d *Driver) live(labels map[string]string, kind, id, name string) (drivers.LiveObject, bool) {
	return drivers.Labelled(d.log, labels, kind, id, name)
}

// imageName picks the bottlefile tag of an image, else its first tag.
func imageName(tags []string) string {
	for _, t := range tags {
		if strings.HasPrefix(t, "bf-") {
			return t
		}
	}
	if len(tags) > 0 {
		return tags[0]
	}
	return ""
}

// runFacts fills a workload's state, exit code and times from one entry of
// the container list. The list gives the times only in Status, as docker
// ps shows them ("Up 5 minutes", "Exited (3) 2 minutes ago"), so they are
// as precise as the unit that text names; Created is exact.
func runFacts(o *drivers.LiveObject, c container.Summary, now time.Time) {
	o.State = string(c.State)
	if c.Created > 0 {
		o.Created = time.Unix(c.Created, 0).UTC()
	}
	status := c.Status
	switch {
	case strings.HasPrefix(status, "Up "):
		if d, ok := parseHumanDuration(strings.TrimPrefix(status, "Up ")); ok {
			o.Started = now.Add(-d).UTC().Truncate(time.Second)
		}
	case strings.HasPrefix(status, "Exited ("):
		rest := strings.TrimPrefix(status, "Exited (")
		code, ago, ok := strings.Cut(rest, ") ")
		if n, err := strconv.Atoi(code); err == nil {
			o.ExitCode = n
		}
		if ok {
			if d, ok := parseHumanDuration(strings.TrimSuffix(ago, " ago")); ok {
				o.Finished = now.Add(-d).UTC().Truncate(time.Second)
			}
		}
	}
}

// parseHumanDuration reads what go-units HumanDuration writes ("Less than
// a second", "5 seconds", "About a minute", "3 hours", "2 weeks"), with any
// trailing " (Paused)" or health note ignored.
func parseHumanDuration(s string) (time.Duration, bool) {
	if i := strings.Index(s, " ("); i >= 0 {
		s = s[:i]
	}
	s = strings.ToLower(strings.TrimSpace(s))
	switch s {
	case "less than a second":
		return 0, true
	case "about a minute":
		return time.Minute, true
	case "about an hour":
		return time.Hour, true
	}
	num, unit, ok := strings.Cut(s, " ")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(num)
	if err != nil {
		return 0, false
	}
	units := map[string]time.Duration{
		"second": time.Second, "minute": time.Minute, "hour": time.Hour,
		"day": 24 * time.Hour, "week": 7 * 24 * time.Hour,
		"month": 30 * 24 * time.Hour, "year": 365 * 24 * time.Hour,
	}
	u, ok := units[strings.TrimSuffix(unit, "s")]
	if !ok {
		return 0, false
	}
	return time.Duration(n) * u, true
}
