package docker

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/network"

	"github.com/bottlefile/bottlefile/drivers"
)

// Read lists the containers, networks and images of one lineage: one
// filtered list call per kind. Objects without an address label are not
// bottlefile's to manage by address and are left out (logged).
func (d *Driver) Read(ctx context.Context, req drivers.ReadRequest) (drivers.ReadResponse, error) {
	var resp drivers.ReadResponse
	if req.Lineage == "" {
		return resp, nil
	}
	api, _, err := d.engine()
	if err != nil {
		return resp, err
	}
	byLineage := filters.NewArgs(filters.Arg("label", drivers.LabelLineage+"="+req.Lineage))

	containers, err := api.ContainerList(ctx, container.ListOptions{All: true, Filters: byLineage})
	if err != nil {
		return resp, fmt.Errorf("listing containers of lineage %s: %w", req.Lineage, err)
	}
	for _, c := range containers {
		name := ""
		if len(c.Names) > 0 {
			name = strings.TrimPrefix(c.Names[0], "/")
		}
		kind := kindContainer
		if c.Labels[labelKind] == kindGateway {
			kind = kindGateway
		}
		if o, ok := d.live(c.Labels, kind, c.ID, name); ok {
			o.Running = c.State == container.StateRunning
			// A gateway is connected to the egress network and given its
			// rules between create and start: one never started may not
			// have them. An agent or sidecar is started right after create.
			o.Unfinished = kind == kindGateway && c.State == container.StateCreated
			o.ImageID = c.ImageID
			resp.Objects = append(resp.Objects, o)
		}
	}

	networks, err := api.NetworkList(ctx, network.ListOptions{Filters: byLineage})
	if err != nil {
		return resp, fmt.Errorf("listing networks of lineage %s: %w", req.Lineage, err)
	}
	for _, n := range networks {
		if o, ok := d.live(n.Labels, kindNetwork, n.ID, n.Name); ok {
			resp.Objects = append(resp.Objects, o)
		}
	}

	images, err := api.ImageList(ctx, image.ListOptions{Filters: byLineage})
	if err != nil {
		return resp, fmt.Errorf("listing images of lineage %s: %w", req.Lineage, err)
	}
	for _, img := range images {
		kind := kindImage
		if img.Labels[labelSnapshotOf] != "" {
			kind = drivers.KindSnapshot
			if !hasSnapshotTag(req.Lineage, img.RepoTags) {
				continue // deleted while in use and kept only for that, or a copy tagged by hand (snapshot.go)
			}
		} else if !hasTags(img.RepoTags) {
			continue // a built image deleted while older snapshots needed it, kept only for them (image.go)
		}
		if o, ok := d.live(img.Labels, kind, img.ID, imageName(img.RepoTags)); ok {
			resp.Objects = append(resp.Objects, o)
		}
	}

	sort.SliceStable(resp.Objects, func(i, j int) bool {
		if resp.Objects[i].Addr != resp.Objects[j].Addr {
			return resp.Objects[i].Addr < resp.Objects[j].Addr
		}
		return resp.Objects[i].Kind < resp.Objects[j].Kind
	})
	return resp, nil
}

func (d *Driver) live(labels map[string]string, kind, id, name string) (drivers.LiveObject, bool) {
	addr := labels[drivers.LabelAddress]
	if addr == "" {
		d.log.Warn("object with this lineage has no address label; ignoring it", "kind", kind, "id", id, "name", name)
		return drivers.LiveObject{}, false
	}
	return drivers.LiveObject{
		Addr: addr,
		Kind: kind,
		ID:   id,
		Name: name,
		Hash: labels[drivers.LabelConfigHash],
	}, true
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
