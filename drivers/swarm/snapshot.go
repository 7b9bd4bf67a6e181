package swarm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/swarm"
	"github.com/docker/docker/client"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/engine"
)

// Snapshots (drivers.KindSnapshot) of an agent on a swarm live in the
// runtime's registry, where every node can pull them:
//
//	REGISTRY/bf-<lineage[:8]>-<agent>-snap:<N>     agent.<agent>.snapshot.N
//	REGISTRY/bf-<lineage[:8]>-<agent>-snap:<NAME>  snapshot.NAME
//
// the repository and tags the docker driver gives them (engine.SnapshotRef),
// under the registry. A snapshot's id, and what a workload boots from, is
// its reference by digest, REGISTRY/bf-...-snap@sha256:...: exactly what
// was taken, whatever happens to the tag.
//
// Taking one commits the agent's task container through the engine of the
// node it runs on (node_hosts, nodes.go), as the docker driver commits a
// container (engine.Driver CommitSnapshot): the image's config is that of
// the image the task runs, with this lineage's labels, never the task
// container's (whose env holds the agent's secrets), and no image being
// made is ever swept. The node's engine pushes it to the registry, and its
// local tags go: the registry holds it, the node nothing more.
//
// Each snapshot taken (or imported) is indexed in the cluster as a swarm
// config bf-<lineage[:8]>-<agent>-snap_<N or NAME>, labelled like every
// object (lineage, address, config hash; io.bottlefile.kind "snapshot")
// and holding the reference and what was recorded of it: Read lists them
// with one call, and never needs the registry. Deleting one deletes its
// manifest (and its tag) from the registry through the registry's API
// (registry.go), then its config, and the copies the nodes pulled to run
// it that no container uses.
//
// Export pulls a snapshot onto the manager's engine and saves it (docker
// save); import loads one there (the docker driver's import, which gives it
// this lineage's labels) and pushes it. The manager keeps no copy of
// either.
//
// Without a registry there are no snapshots: they could only stay on the
// node that took them.

// snapshotRegistry is the registry snapshots go to, or an error that says
// one is needed.
func (d *Driver) snapshotRegistry(addr string) (string, *registryAPI, error) {
	d.mu.RLock()
	registry, api, runtime := d.registry, d.regAPI, d.runtime
	d.mu.RUnlock()
	if registry == "" || api == nil {
		return "", nil, fmt.Errorf("%s: snapshots on a swarm live in a registry every node pulls from, and runtime %q has none: set registry (and, when its API is not at https://REGISTRY, registry_url) in the runtime block", addr, runtime)
	}
	return registry, api, nil
}

// createSnapshot commits the agent's running task container through its
// node's engine, pushes it to the registry from there, and removes the
// node's tags of it.
func (d *Driver) createSnapshot(ctx context.Context, api swarmAPI, req drivers.ApplyRequest) (drivers.ApplyResponse, error) {
	addr := req.Object.Addr
	fail := func(format string, args ...any) (drivers.ApplyResponse, error) {
		return drivers.ApplyResponse{}, fmt.Errorf("taking snapshot %s: %s", addr, fmt.Sprintf(format, args...))
	}
	registry, _, err := d.snapshotRegistry(addr)
	if err != nil {
		return drivers.ApplyResponse{}, err
	}
	agentAddr, err := drivers.String(req.Object.Attr("agent"))
	if err != nil {
		return fail("agent: %v", err)
	}
	if agentAddr == "" && req.Agent != nil {
		agentAddr = req.Agent.Addr
	}
	if agentAddr == "" {
		return fail("no agent named to commit")
	}
	t, node, err := d.taskOf(ctx, api, req.Lineage, req.NamedAddr(agentAddr))
	if err != nil {
		return fail("%v", err)
	}
	eng, host, err := d.nodeEngine(ctx, node)
	if err != nil {
		return fail("%v", err)
	}
	ctrID := t.Status.ContainerStatus.ContainerID
	start := time.Now()
	limit := d.nodeTimeout()
	cb := d.bound(ctx, "node "+node, commitBounds*limit)
	taken, err := eng.CommitSnapshot(cb.ctx, req, ctrID)
	cb.release()
	if err != nil {
		return drivers.ApplyResponse{}, nodeFailed(node, host, cb.err(err))
	}
	cli, err := eng.Client(ctx)
	if err != nil {
		return fail("%v", nodeFailed(node, host, err))
	}
	local := taken.Snapshot.Image
	pb := d.bound(ctx, "node "+node, limit)
	ref, err := pushSnapshot(pb.ctx, cli, local, registry, pb)
	pb.release()
	if err != nil {
		return fail("pushing it from node %s to the registry %s: %v", node, registry, pb.err(err))
	}
	out := drivers.ApplyResponse{
		ID:       ref,
		Snapshot: &drivers.SnapshotResult{Image: ref, Size: taken.Snapshot.Size, Created: taken.Snapshot.Created, Source: ctrID},
		Computed: map[string]string{"node": node},
	}
	if depth := taken.Computed["depth"]; depth != "" {
		out.Computed["depth"] = depth
	}
	if err := d.indexSnapshot(ctx, api, req, req.Object.Addr, agentAddr, *out.Snapshot); err != nil {
		return fail("%v", err)
	}
	d.log.Info("took snapshot", "addr", addr, "node", node, "ref", ref, "elapsed", time.Since(start))
	return out, nil
}

// pushSnapshot pushes the engine's snapshot image local (tagged
// bf-...-snap:TAG) to the registry as REGISTRY/bf-...-snap:TAG, then
// removes both tags from the engine, and returns the pushed image's
// reference by digest.
func pushSnapshot(ctx context.Context, cli client.APIClient, local, registry string, b *bounded) (string, error) {
	remote := registry + "/" + local
	defer func() {
		// Bounded too: the node may be what stalled.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), b.bound)
		defer cancel()
		for _, tag := range []string{remote, local} {
			if _, err := cli.ImageRemove(rctx, tag, image.RemoveOptions{}); err != nil && !cerrdefs.IsNotFound(err) && !cerrdefs.IsConflict(err) {
				_ = err // a sweep of the node's engine takes what is left
			}
		}
	}()
	if err := cli.ImageTag(ctx, local, remote); err != nil {
		return "", fmt.Errorf("tagging %s as %s: %w", local, remote, err)
	}
	digest, err := pushDigest(ctx, cli, remote, b)
	if err != nil {
		return "", err
	}
	repo := remote
	if i := strings.LastIndex(remote, ":"); i > strings.LastIndex(remote, "/") {
		repo = remote[:i]
	}
	return repo + "@" + digest, nil
}

// pushDigest pushes ref and returns the digest the registry gave it.
func pushDigest(ctx context.Context, cli swarmAPI, ref string, b *bounded) (string, error) {
	rc, err := cli.ImagePush(ctx, ref, image.PushOptions{RegistryAuth: "e30="}) // "{}": no credentials
	if err != nil {
		return "", err
	}
	defer rc.Close()
	dec := json.NewDecoder(b.reader(rc))
	digest := ""
	for {
		var m struct {
			Error       string `json:"error"`
			ErrorDetail *struct {
				Message string `json:"message"`
			} `json:"errorDetail"`
			Aux struct {
				Digest string `json:"Digest"`
			} `json:"aux"`
		}
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return "", fmt.Errorf("reading the push's progress: %w", err)
		}
		if m.ErrorDetail != nil && m.ErrorDetail.Message != "" {
			return "", errors.New(strings.TrimSpace(m.ErrorDetail.Message))
		}
		if m.Error != "" {
			return "", errors.New(strings.TrimSpace(m.Error))
		}
		if m.Aux.Digest != "" {
			digest = m.Aux.Digest
		}
	}
	if digest == "" {
		return "", errors.New("the registry gave the pushed image no digest")
	}
	return digest, nil
}

// splitRef splits REGISTRY/REPO@DIGEST into REPO (without the registry)
// and DIGEST.
func splitRef(registry, ref string) (repo, digest string, err error) {
	name, digest, ok := strings.Cut(ref, "@")
	repo, inRegistry := strings.CutPrefix(name, registry+"/")
	if !ok || !inRegistry || !strings.HasPrefix(digest, "sha256:") {
		return "", "", fmt.Errorf("%q is not a snapshot in the registry %s (REGISTRY/REPOSITORY@sha256:...)", ref, registry)
	}
	return repo, digest, nil
}

// deleteSnapshot deletes a snapshot's manifest (and tag) from the
// registry, and the copies of it the nodes pulled that no container uses.
func (d *Driver) deleteSnapshot(ctx context.Context, req drivers.ApplyRequest) (drivers.ApplyResponse, error) {
	addr := req.Object.Addr
	if req.ID == "" {
		return drivers.ApplyResponse{}, nil
	}
	registry, reg, err := d.snapshotRegistry(addr)
	if err != nil {
		return drivers.ApplyResponse{}, err
	}
	repo, digest, err := splitRef(registry, req.ID)
	if err != nil {
		return drivers.ApplyResponse{}, fmt.Errorf("deleting snapshot %s: %w", addr, err)
	}
	if !strings.HasPrefix(repo, "bf-"+drivers.LineagePrefix(req.Lineage)+"-") || !strings.HasSuffix(repo, "-snap") {
		return drivers.ApplyResponse{}, fmt.Errorf("deleting snapshot %s: %s is not a snapshot repository of this state (lineage %s); leaving it alone", addr, repo, req.Lineage)
	}
	if err := reg.deleteManifest(ctx, repo, digest); err != nil {
		return drivers.ApplyResponse{}, fmt.Errorf("deleting snapshot %s: %w", addr, err)
	}
	if err := d.unindexSnapshot(ctx, req.Lineage, req.Object.Addr, req.ID); err != nil {
		return drivers.ApplyResponse{}, fmt.Errorf("deleting snapshot %s: %w", addr, err)
	}
	d.removeCopies(ctx, req.Lineage, req.Object.Addr, req.ID)
	d.log.Info("deleted snapshot", "addr", addr, "ref", req.ID)
	return drivers.ApplyResponse{}, nil
}

// removeCopies removes an image reference of the lineage from every node
// engine the driver can reach (those of node_hosts, and the manager's)
// where no container uses it. A node that cannot be reached keeps its
// copy, recorded for a later apply or destroy (nodecopy.go).
func (d *Driver) removeCopies(ctx context.Context, lineage, addr, ref string) {
	api, err := d.manager(ctx)
	if err != nil {
		return
	}
	for _, node := range d.engineNodes(ctx) {
		d.removeCopy(ctx, api, lineage, addr, nodeCopy{Node: node, Image: ref})
	}
}

// engineNodes are the hostnames of the nodes whose engines the driver
// reaches: the manager's and those of node_hosts.
func (d *Driver) engineNodes(ctx context.Context) []string {
	var out []string
	if mgr, err := d.facts(ctx); err == nil && mgr.Description.Hostname != "" {
		out = append(out, mgr.Description.Hostname)
	}
	d.mu.RLock()
	ne := d.nodeEngs
	d.mu.RUnlock()
	if ne == nil {
		return out
	}
	ne.mu.Lock()
	defer ne.mu.Unlock()
	for _, name := range slices.Sorted(maps.Keys(ne.hosts)) {
		if !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out
}

// snapshotIndex is what a snapshot's config holds.
type snapshotIndex struct {
	Image   string    `json:"image"`
	Agent   string    `json:"agent"`
	Size    int64     `json:"size"`
	Created time.Time `json:"created"`
}

// kindSnapshotIndex marks a snapshot's config.
const kindSnapshotIndex = "snapshot"

// indexName is the name of the config indexing the snapshot at addr:
// bf-<lineage[:8]>-<agent>-snap_<N or NAME>.
func indexName(lineage, addr, agentAddr string) (string, error) {
	ref, err := engine.SnapshotRef(lineage, addr, agentAddr)
	if err != nil {
		return "", err
	}
	return strings.Replace(ref, ":", "_", 1), nil
}

// indexSnapshot records a snapshot in the cluster: a config that Read
// lists. One an interrupted apply left at the same name for the same
// address and lineage goes first.
func (d *Driver) indexSnapshot(ctx context.Context, api swarmAPI, req drivers.ApplyRequest, addr, agentAddr string, snap drivers.SnapshotResult) error {
	lineage, hash := req.Lineage, req.Hash
	// Named as the agent's other objects are (a moved agent keeps its
	// names), so that an agent given the old name later never meets it.
	name, err := indexName(lineage, req.NamedAddr(addr), req.NamedAddr(agentAddr))
	if err != nil {
		return err
	}
	data, err := json.Marshal(snapshotIndex{Image: snap.Image, Agent: agentAddr, Size: snap.Size, Created: snap.Created.UTC()})
	if err != nil {
		return err
	}
	labels := map[string]string{
		drivers.LabelLineage: lineage, drivers.LabelAddress: addr, drivers.LabelConfigHash: hash,
		labelKind: kindSnapshotIndex, engine.LabelSnapshotOf: agentAddr,
	}
	if req.Runtime != "" {
		labels[drivers.LabelRuntime] = req.Runtime
	}
	list, err := api.ConfigList(ctx, swarm.ConfigListOptions{Filters: filters.NewArgs(filters.Arg("name", name))})
	if err != nil {
		return fmt.Errorf("recording the snapshot in the cluster: %w", err)
	}
	for _, c := range list {
		if c.Spec.Name != name {
			continue
		}
		if c.Spec.Labels[drivers.LabelLineage] != lineage || c.Spec.Labels[drivers.LabelAddress] != addr {
			return fmt.Errorf("a swarm config named %s already exists and is not this state's %s (lineage %s); remove or rename it", name, addr, lineage)
		}
		if err := api.ConfigRemove(ctx, c.ID); err != nil && !cerrdefs.IsNotFound(err) {
			return fmt.Errorf("removing the unrecorded record %s of an earlier snapshot: %w", name, err)
		}
	}
	if _, err := api.ConfigCreate(ctx, swarm.ConfigSpec{Annotations: swarm.Annotations{Name: name, Labels: labels}, Data: data}); err != nil {
		return fmt.Errorf("recording the snapshot in the cluster (config %s): %w", name, err)
	}
	return nil
}

// unindexSnapshot removes the config of the snapshot ref at addr.
func (d *Driver) unindexSnapshot(ctx context.Context, lineage, addr, ref string) error {
	api, err := d.manager(ctx)
	if err != nil {
		return err
	}
	f := byLineage(lineage)
	f.Add("label", drivers.LabelAddress+"="+addr)
	f.Add("label", labelKind+"="+kindSnapshotIndex)
	list, err := api.ConfigList(ctx, swarm.ConfigListOptions{Filters: f})
	if err != nil {
		return fmt.Errorf("listing the snapshot's record in the cluster: %w", err)
	}
	for _, c := range list {
		var idx snapshotIndex
		if json.Unmarshal(c.Spec.Data, &idx) == nil && idx.Image != ref {
			continue // another snapshot at the address (taken again since)
		}
		if err := api.ConfigRemove(ctx, c.ID); err != nil && !cerrdefs.IsNotFound(err) {
			return fmt.Errorf("removing the snapshot's record %s from the cluster: %w", c.Spec.Name, err)
		}
	}
	return nil
}

// readSnapshots lists the lineage's snapshots: their configs.
func (d *Driver) readSnapshots(ctx context.Context, api swarmAPI, lineage string) ([]drivers.LiveObject, error) {
	f := byLineage(lineage)
	f.Add("label", labelKind+"="+kindSnapshotIndex)
	list, err := api.ConfigList(ctx, swarm.ConfigListOptions{Filters: f})
	if err != nil {
		return nil, fmt.Errorf("listing the snapshots of lineage %s: %w", lineage, err)
	}
	var out []drivers.LiveObject
	for _, c := range list {
		var idx snapshotIndex
		if err := json.Unmarshal(c.Spec.Data, &idx); err != nil || idx.Image == "" {
			d.log.Warn("a snapshot record of this lineage does not parse; ignoring it", "config", c.Spec.Name, "error", err)
			continue
		}
		o, ok := d.live(c.Spec.Labels, drivers.KindSnapshot, idx.Image, idx.Image)
		if !ok {
			continue
		}
		o.Created = idx.Created
		out = append(out, o)
	}
	return out, nil
}

// ExportSnapshot writes a snapshot as a docker-save tar stream: pulled
// onto the manager's engine, saved from there, and removed from it again
// unless a container there uses it.
func (d *Driver) ExportSnapshot(ctx context.Context, ref string, w io.Writer) error {
	api, err := d.manager(ctx)
	if err != nil {
		return err
	}
	registry, _, err := d.snapshotRegistry(ref)
	if err != nil {
		return err
	}
	if _, _, err := splitRef(registry, ref); err != nil {
		return fmt.Errorf("exporting snapshot: %w", err)
	}
	cli, ok := api.(client.APIClient)
	if !ok {
		return errors.New("exporting snapshot: the engine client cannot pull")
	}
	pb := d.bound(ctx, "the pull from the registry "+registry, d.nodeTimeout())
	rc, err := cli.ImagePull(pb.ctx, ref, image.PullOptions{RegistryAuth: "e30="})
	if err != nil {
		pb.release()
		return fmt.Errorf("exporting snapshot %s: pulling it from the registry onto the manager: %w", ref, pb.err(d.eng.Unreachable(err)))
	}
	err = engine.ReadProgress(pb.reader(rc))
	rc.Close()
	pb.release()
	if err != nil {
		return fmt.Errorf("exporting snapshot %s: pulling it from the registry onto the manager: %w", ref, pb.err(err))
	}
	defer d.removeFrom(ctx, cli, ref)
	return d.eng.ExportSnapshot(ctx, ref, w)
}

// removeFrom removes an image reference from one engine unless a
// container uses it.
func (d *Driver) removeFrom(ctx context.Context, cli client.APIClient, ref string) {
	if _, err := cli.ImageRemove(context.WithoutCancel(ctx), ref, image.RemoveOptions{}); err != nil && !cerrdefs.IsNotFound(err) && !cerrdefs.IsConflict(err) {
		d.log.Debug("could not remove a copy from the manager", "ref", ref, "error", err)
	}
}

// ImportSnapshot takes a docker-save tar stream in as the snapshot
// req.Object: loaded on the manager's engine with this lineage's labels
// (the docker driver's import), pushed to the registry, and its tags on
// the manager removed.
func (d *Driver) ImportSnapshot(ctx context.Context, req drivers.ImportRequest, r io.Reader) (drivers.ApplyResponse, error) {
	addr := req.Object.Addr
	registry, _, err := d.snapshotRegistry(addr)
	if err != nil {
		return drivers.ApplyResponse{}, err
	}
	api, err := d.manager(ctx)
	if err != nil {
		return drivers.ApplyResponse{}, err
	}
	cli, ok := api.(client.APIClient)
	if !ok {
		return drivers.ApplyResponse{}, errors.New("importing snapshot: the engine client cannot push")
	}
	in, err := d.eng.ImportSnapshot(ctx, req, r)
	if err != nil {
		return drivers.ApplyResponse{}, err
	}
	pb := d.bound(ctx, "the push to the registry "+registry, d.nodeTimeout())
	ref, err := pushSnapshot(pb.ctx, cli, in.Snapshot.Image, registry, pb)
	pb.release()
	if err != nil {
		return drivers.ApplyResponse{}, fmt.Errorf("importing snapshot %s: pushing it to the registry %s: %w", addr, registry, pb.err(err))
	}
	d.eng.SweepSnapshots(ctx, req.Lineage)
	out := *in.Snapshot
	out.Image = ref
	agentAddr, err := drivers.String(req.Object.Attr("agent"))
	if err != nil || agentAddr == "" {
		return drivers.ApplyResponse{}, fmt.Errorf("importing snapshot %s: it names no agent", addr)
	}
	if err := d.indexSnapshot(ctx, api, drivers.ApplyRequest{Lineage: req.Lineage, Hash: req.Hash, Runtime: d.runtimeName()}, addr, agentAddr, out); err != nil {
		return drivers.ApplyResponse{}, fmt.Errorf("importing snapshot %s: %w", addr, err)
	}
	d.log.Info("imported snapshot", "addr", addr, "ref", ref)
	return drivers.ApplyResponse{ID: ref, Snapshot: &out}, nil
}

var (
	_ drivers.SnapshotExporter = (*Driver)(nil)
	_ drivers.SnapshotImporter = (*Driver)(nil)
)
