package swarm

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/swarm"

	"github.com/bottlefile/bottlefile/drivers"
)

// What the nodes pulled or kept of the lineage (a snapshot a service
// booted from, a built image, a composed one) goes with what it was
// pulled for, through each node's engine. A node that is down, or that
// stalls, when that happens keeps its copy: so that a later apply or
// destroy finishes the job, each copy to remove is recorded in the
// cluster before the removal is tried, as a swarm config
//
//	bf-<lineage[:8]>-copy-<hash of node and image>   io.bottlefile.kind=node-copy
//
// holding the node, the image and the service whose task ran from it,
// and the record goes once the copy is gone. A refresh lists these
// records (with the snapshots' index, one call) and reports each whose
// node is ready again as a leftover of the lineage, which the plan
// removes by its id: removeNodeCopy.

// kindNodeCopy marks a config recording a node's copy to remove.
const kindNodeCopy = "node-copy"

// nodeCopyID prefixes the id a refresh gives a recorded copy.
const nodeCopyID = "node-copy:"

// nodeCopy is what a copy's config holds.
type nodeCopy struct {
	Node    string `json:"node"`
	Image   string `json:"image"`             // a reference, or an image id (sha256:...)
	Service string `json:"service,omitempty"` // whose task containers go first
}

func copyConfigName(lineage string, c nodeCopy) string {
	sum := sha256.Sum256([]byte(c.Node + "\x00" + c.Image))
	return "bf-" + drivers.LineagePrefix(lineage) + "-copy-" + hex.EncodeToString(sum[:6])
}

// ofLineage reports whether an image reference names one of the
// lineage's own repositories (built, snapshot, composed images).
func ofLineage(lineage, ref string) bool {
	if strings.HasPrefix(ref, "sha256:") {
		return true // an id: callers pass only the lineage's
	}
	name, _, _ := strings.Cut(ref, "@")
	if i := strings.LastIndex(name, "/"); i >= 0 {
		name = name[i+1:]
	}
	return strings.HasPrefix(name, "bf-"+drivers.LineagePrefix(lineage)+"-")
}

// recordCopy records, before it is removed, a copy of the lineage's on
// a node, for the object at addr.
func (d *Driver) recordCopy(ctx context.Context, api swarmAPI, lineage, addr string, c nodeCopy) error {
	data, err := json.Marshal(c)
	if err != nil {
		return err
	}
	labels := map[string]string{drivers.LabelLineage: lineage, drivers.LabelAddress: addr, labelKind: kindNodeCopy}
	if runtime, _, _, _ := d.settings(); runtime != "" {
		labels[drivers.LabelRuntime] = runtime
	}
	_, err = ensureConfig(context.WithoutCancel(ctx), api, copyConfigName(lineage, c), data, labels)
	return err
}

// forgetCopy removes a copy's record once the copy is gone.
func (d *Driver) forgetCopy(ctx context.Context, api swarmAPI, lineage string, c nodeCopy) {
	name := copyConfigName(lineage, c)
	list, err := api.ConfigList(context.WithoutCancel(ctx), swarm.ConfigListOptions{Filters: filters.NewArgs(filters.Arg("name", name))})
	if err != nil {
		d.log.Warn("listing the record of a node's copy", "name", name, "error", err)
		return
	}
	for _, cfg := range list {
		if cfg.Spec.Name == name && cfg.Spec.Labels[drivers.LabelLineage] == lineage {
			if err := api.ConfigRemove(context.WithoutCancel(ctx), cfg.ID); err != nil && !cerrdefs.IsNotFound(err) {
				d.log.Warn("removing the record of a node's copy", "name", name, "error", err)
			}
		}
	}
}

// removeCopy removes c from its node, recorded first: on success the
// record goes, otherwise it stays for a later apply or destroy, and the
// failure is only logged.
func (d *Driver) removeCopy(ctx context.Context, api swarmAPI, lineage, addr string, c nodeCopy) {
	track := ofLineage(lineage, c.Image)
	if track {
		if err := d.recordCopy(ctx, api, lineage, addr, c); err != nil {
			d.log.Warn("could not record a node's copy before removing it", "node", c.Node, "image", c.Image, "error", err)
		}
	}
	if err := d.removeCopyOn(ctx, lineage, c, track); err != nil {
		d.log.Info("a node keeps a copy for now: a later apply or destroy removes it", "node", c.Node, "image", c.Image, "error", err)
		return
	}
	if track {
		d.forgetCopy(ctx, api, lineage, c)
	}
}

// removeCopyOn waits (bounded) until the containers of c.Service are
// gone from c.Node, then, when img is true, removes c.Image there if
// it carries the lineage. One already gone is no error.
func (d *Driver) removeCopyOn(ctx context.Context, lineage string, c nodeCopy, img bool) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.nodeTimeout()+copyGone)
	defer cancel()
	eng, host, err := d.nodeEngine(ctx, c.Node)
	if err != nil {
		return err
	}
	cli, err := eng.Client(ctx)
	if err != nil {
		return nodeFailed(c.Node, host, err)
	}
	if c.Service != "" {
		f := filters.NewArgs(filters.Arg("label", "com.docker.swarm.service.id="+c.Service))
		for deadline := time.Now().Add(copyGone); ; {
			ctrs, err := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
			if err != nil {
				return nodeFailed(c.Node, host, err)
			}
			if len(ctrs) == 0 {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("node %s: %d containers of service %s are still there after %v", c.Node, len(ctrs), shortID(c.Service), copyGone)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	if !img {
		return nil
	}
	info, err := cli.ImageInspect(ctx, c.Image)
	if cerrdefs.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return nodeFailed(c.Node, host, err)
	}
	if info.Config == nil || info.Config.Labels[drivers.LabelLineage] != lineage {
		return nil // not the lineage's: left alone
	}
	force := strings.HasPrefix(c.Image, "sha256:") // an id with several tags
	for deadline := time.Now().Add(copyGone); ; {
		_, err := cli.ImageRemove(ctx, c.Image, image.RemoveOptions{Force: force, PruneChildren: true})
		if err == nil || cerrdefs.IsNotFound(err) {
			return nil
		}
		if !cerrdefs.IsConflict(err) {
			return nodeFailed(c.Node, host, err)
		}
		// In use: by the removed service's task a moment longer, else by
		// another container (a service running from the same snapshot),
		// whose own delete removes it; left alone either way.
		if c.Service == "" || time.Now().After(deadline) {
			d.log.Debug("a node's copy is in use; leaving it", "node", c.Node, "image", c.Image, "error", err)
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// reaches reports whether the runtime block says how to reach the
// engine of node: it is the manager's, or node_hosts names it.
func (d *Driver) reaches(ctx context.Context, node string) bool {
	return slices.Contains(d.engineNodes(ctx), node)
}

// readCopies lists the lineage's recorded copies whose node the manager
// says is ready, as leftovers the plan removes.
func (d *Driver) readCopies(ctx context.Context, api swarmAPI, lineage string) ([]drivers.LiveObject, error) {
	f := byLineage(lineage)
	f.Add("label", labelKind+"="+kindNodeCopy)
	list, err := api.ConfigList(ctx, swarm.ConfigListOptions{Filters: f})
	if err != nil || len(list) == 0 {
		return nil, err
	}
	nodes, err := api.NodeList(ctx, swarm.NodeListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	ready := map[string]bool{}
	for _, n := range nodes {
		ready[n.Description.Hostname] = n.Status.State == swarm.NodeStateReady
	}
	var out []drivers.LiveObject
	for _, cfg := range list {
		var c nodeCopy
		if err := json.Unmarshal(cfg.Spec.Data, &c); err != nil || c.Node == "" || !ready[c.Node] || !d.reaches(ctx, c.Node) {
			continue // down still, or no longer named: the plan cannot remove it yet
		}
		o, ok := d.live(cfg.Spec.Labels, kindImage, nodeCopyID+cfg.ID, c.Image+" on node "+c.Node)
		if !ok {
			continue
		}
		o.Leftover = fmt.Sprintf("a copy on node %s that the node kept when it could not be reached to remove it", c.Node)
		out = append(out, o)
	}
	return out, nil
}

// removeNodeCopy removes a recorded copy the plan names by its id, and
// its record.
func (d *Driver) removeNodeCopy(ctx context.Context, api swarmAPI, req drivers.ApplyRequest) (drivers.ApplyResponse, error) {
	id := strings.TrimPrefix(req.ID, nodeCopyID)
	f := byLineage(req.Lineage)
	f.Add("id", id)
	list, err := api.ConfigList(ctx, swarm.ConfigListOptions{Filters: f})
	if err != nil {
		return drivers.ApplyResponse{}, fmt.Errorf("reading the record of a node's copy: %w", err)
	}
	for _, cfg := range list {
		if cfg.ID != id {
			continue
		}
		var c nodeCopy
		if err := json.Unmarshal(cfg.Spec.Data, &c); err != nil {
			return drivers.ApplyResponse{}, fmt.Errorf("the record %s of a node's copy does not parse: %w", cfg.Spec.Name, err)
		}
		if c.Service != "" {
			if _, _, err := api.ServiceInspectWithRaw(ctx, c.Service, swarm.ServiceInspectOptions{}); err == nil {
				// Recorded by a delete of the service cut off before it
				// removed it: the copy is in use, and that delete,
				// done again, records it again.
				if err := api.ConfigRemove(ctx, cfg.ID); err != nil && !cerrdefs.IsNotFound(err) {
					return drivers.ApplyResponse{}, fmt.Errorf("removing the record %s of a node's copy: %w", cfg.Spec.Name, err)
				}
				continue
			}
		}
		if err := d.removeCopyOn(ctx, req.Lineage, c, true); err != nil {
			return drivers.ApplyResponse{}, fmt.Errorf("removing %s from node %s: %w", c.Image, c.Node, err)
		}
		if err := api.ConfigRemove(ctx, cfg.ID); err != nil && !cerrdefs.IsNotFound(err) {
			return drivers.ApplyResponse{}, fmt.Errorf("removing the record %s of a node's copy: %w", cfg.Spec.Name, err)
		}
	}
	return drivers.ApplyResponse{}, nil
}
