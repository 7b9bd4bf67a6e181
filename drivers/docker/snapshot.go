package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"
	"github.com/hashicorp/hcl/v2/hcldec"
	"github.com/zclconf/go-cty/cty"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/engine"
)

// Snapshots (drivers.KindSnapshot) are images of the agent container's
// file system, tagged bf-<lineage[:8]>-<agent>-snap:<N> for the policy
// snapshot agent.<agent>.snapshot.N and :<NAME> for the block
// snapshot.NAME. Their config is that of the image the container was
// created from, never the container's or the agent's (createSnapshot):
// the agent's declared config, secrets included, is applied again when a
// container is created from one, so no image holds any of it. They have
// no parent image. Besides the lineage, address and config-hash labels
// they carry labelSnapshotOf (the agent's address), which is how Read
// tells them from built images, and labelSnapshotSource (the container
// committed).
//
// These are not io.bottlefile.kind: a container created from a snapshot
// inherits the image's labels, and io.bottlefile.kind on a container means
// what Read reports it as.
const (
	labelSnapshotOf     = engine.LabelSnapshotOf
	labelSnapshotSource = drivers.LabelPrefix + "snapshot-source"
)

// DefaultFlattenDepth is the number of layers at which a snapshot is
// flattened when the runtime block sets no flatten_depth. Chained commits
// fail at the engine's layer limit (the 126th layer on overlay2 and
// fuse-overlayfs), so flattening well before it keeps snapshot and resume
// cycles going for ever.
const DefaultFlattenDepth = 100

// maxFlattenDepth is the highest flatten_depth that still flattens before
// the engine's limit.
const maxFlattenDepth = 125

// snapshotConfig is what a runtime block says about snapshots.
type snapshotConfig struct {
	// flattenDepth: a snapshot that would have this many layers or more is
	// flattened into one (export piped into import, config re-applied).
	flattenDepth int
}

// snapshotSpec is the runtime block's snapshot attributes.
func snapshotSpec() hcldec.ObjectSpec {
	return hcldec.ObjectSpec{
		"flatten_depth": &hcldec.AttrSpec{Name: "flatten_depth", Type: cty.Number},
	}
}

// parseSnapshotConfig reads the snapshot attributes of a decoded runtime block.
func parseSnapshotConfig(cfg cty.Value) (snapshotConfig, error) {
	sc := snapshotConfig{flattenDepth: DefaultFlattenDepth}
	if cfg == cty.NilVal || cfg.IsNull() || !cfg.IsKnown() || !cfg.Type().IsObjectType() || !cfg.Type().HasAttribute("flatten_depth") {
		return sc, nil
	}
	v := cfg.GetAttr("flatten_depth")
	if v.IsNull() {
		return sc, nil
	}
	n, err := drivers.Int(v)
	if err != nil {
		return sc, fmt.Errorf("flatten_depth: %w", err)
	}
	if n < 1 || n > maxFlattenDepth {
		return sc, fmt.Errorf("flatten_depth = %d: must be between 1 (flatten every snapshot) and %d (the engine refuses a 126th layer); the default is %d", n, maxFlattenDepth, DefaultFlattenDepth)
	}
	sc.flattenDepth = int(n)
	return sc, nil
}

// snapshotAPI is the part of the engine API snapshots use beyond
// dockerAPI. *client.Client satisfies it; a client that does not (a test
// wrapper) makes snapshot operations fail with a clear error.
type snapshotAPI interface {
	dockerAPI
	ContainerInspectWithRaw(ctx context.Context, container string, getSize bool) (container.InspectResponse, []byte, error)
	ContainerCommit(ctx context.Context, container string, options container.CommitOptions) (container.CommitResponse, error)
	ContainerExport(ctx context.Context, container string) (io.ReadCloser, error)
	ContainerPause(ctx context.Context, container string) error
	ContainerUnpause(ctx context.Context, container string) error
	ImageImport(ctx context.Context, source image.ImportSource, ref string, options image.ImportOptions) (io.ReadCloser, error)
	ImageSave(ctx context.Context, images []string, opts ...client.ImageSaveOption) (io.ReadCloser, error)
	ImageLoad(ctx context.Context, input io.Reader, opts ...client.ImageLoadOption) (image.LoadResponse, error)
}

var (
	_ snapshotAPI              = (*client.Client)(nil)
	_ drivers.WrittenReader    = (*Driver)(nil)
	_ drivers.SnapshotExporter = (*Driver)(nil)
	_ drivers.SnapshotImporter = (*Driver)(nil)
)

// snapshotEngine returns the client as a snapshotAPI and the runtime's
// snapshot settings.
func (d *Driver) snapshotEngine(ctx context.Context) (snapshotAPI, snapshotConfig, error) {
	api, _, err := d.engine(ctx)
	if err != nil {
		return nil, snapshotConfig{}, err
	}
	sapi, ok := api.(snapshotAPI)
	if !ok {
		return nil, snapshotConfig{}, fmt.Errorf("the docker client in use (%T) cannot commit, export, save or load images", api)
	}
	return sapi, d.snapshotConf(), nil
}

// snapshotConf is the configured snapshot settings, with the defaults
// before Configure.
func (d *Driver) snapshotConf() snapshotConfig {
	d.mu.RLock()
	defer d.mu.RUnlock()
	if d.snap.flattenDepth == 0 {
		return snapshotConfig{flattenDepth: DefaultFlattenDepth}
	}
	return d.snap
}

// isSnapshotTag reports whether a repo:tag is a snapshot reference of the
// lineage.
func isSnapshotTag(lineage, tag string) bool {
	repo, _, ok := strings.Cut(tag, ":")
	return ok && strings.HasPrefix(repo, "bf-"+drivers.LineagePrefix(lineage)+"-") && strings.HasSuffix(repo, "-snap")
}

// snapshotAgent is the address of the agent a snapshot object commits.
func snapshotAgent(req drivers.ApplyRequest) (string, error) {
	a, err := drivers.String(req.Object.Attr("agent"))
	if err != nil {
		return "", fmt.Errorf("agent: %w", err)
	}
	if a == "" && req.Agent != nil {
		a = req.Agent.Addr
	}
	if a == "" {
		return "", errors.New("no agent named to commit")
	}
	return a, nil
}

// needsFlatten says whether a commit onto an image of baseLayers layers
// would reach the threshold, and the snapshot must be flattened instead.
func needsFlatten(baseLayers, threshold int) bool {
	return baseLayers+1 >= threshold
}

// imageMaking is held shared while an image of a lineage is being made
// (snapshots, imports, builds: the engine creates an image, then tags it,
// and a snapshot passes through an intermediate), and exclusively by the
// sweeps that remove untagged images of a lineage. So a sweep of this
// process never takes an image that is still being made. No other process
// works on the same lineage at the same time (the state lock), and sweeps
// never look at other lineages.
var imageMaking sync.RWMutex

// createSnapshot makes the snapshot image of the agent's container:
//
//  1. the container's file system changes become an intermediate image
//     (a paused commit, or past flatten_depth layers an export piped into
//     an import, one layer), untagged and labelled only
//     labelSnapshotIntermediate;
//  2. the snapshot's image config is written here: the config of the image
//     the container was created from (its command, env, workdir, user),
//     this lineage's labels, the intermediate's layers, and a history that
//     names no command; nothing of the container's own config, the agent's
//     declared config, or anything sensitive. The agent's declared config
//     is applied again whenever a container is created from the snapshot;
//  3. that config is loaded (docker load of a tar holding just it and a
//     manifest tagging it ref): the engine has every layer already, so no
//     layer data moves, and the image has no parent, so the image the
//     container ran (a built image, an older snapshot) can go before it;
//  4. the intermediate is removed.
//
// An unrecorded image an interrupted apply left at the same reference
// loses the tag to the new one, and goes with the next sweep.
func (d *Driver) createSnapshot(ctx context.Context, req drivers.ApplyRequest) (drivers.ApplyResponse, error) {
	return d.commitSnapshot(ctx, req, "")
}

// commitSnapshot is createSnapshot of the container named name; "" is the
// agent's own container.
func (d *Driver) commitSnapshot(ctx context.Context, req drivers.ApplyRequest, name string) (drivers.ApplyResponse, error) {
	addr := req.Object.Addr
	fail := func(format string, args ...any) (drivers.ApplyResponse, error) {
		return drivers.ApplyResponse{}, fmt.Errorf("taking snapshot %s: %s", addr, fmt.Sprintf(format, args...))
	}
	api, conf, err := d.snapshotEngine(ctx)
	if err != nil {
		return fail("%v", err)
	}
	agentAddr, err := snapshotAgent(req)
	if err != nil {
		return fail("%v", err)
	}
	ref, err := engine.SnapshotRef(req.Lineage, req.NamedAddr(addr), req.NamedAddr(agentAddr))
	if err != nil {
		return fail("%v", err)
	}
	if name == "" {
		if name, err = engine.ObjectName(req.Lineage, req.NamedAddr(agentAddr), kindContainer); err != nil {
			return fail("%v", err)
		}
	}
	imageMaking.RLock()
	defer imageMaking.RUnlock()
	ctr, err := api.ContainerInspect(ctx, name)
	if cerrdefs.IsNotFound(err) {
		return d.carryNewest(ctx, api, req, agentAddr, ref, name, fmt.Errorf("%s has no container %s to commit (apply the agent first)", agentAddr, name))
	}
	if err != nil {
		return fail("inspecting container %s of %s: %v", name, agentAddr, err)
	}
	if ctr.Config == nil || ctr.Config.Labels[drivers.LabelLineage] != req.Lineage {
		return fail("container %s does not belong to this state (lineage %s)", name, req.Lineage)
	}
	if ctr.State != nil && (ctr.State.Dead || ctr.State.Status == "removing") {
		return d.carryNewest(ctx, api, req, agentAddr, ref, ctr.ID, fmt.Errorf("container %s of %s is being removed", shortID(ctr.ID), agentAddr))
	}

	var base *image.InspectResponse // nil: gone (removed by hand)
	if info, err := api.ImageInspect(ctx, ctr.Image); err == nil {
		base = &info
	} else if !cerrdefs.IsNotFound(err) {
		return fail("inspecting the image %s container %s runs: %v", shortID(ctr.Image), name, err)
	}
	flatten := base == nil || needsFlatten(len(base.RootFS.Layers), conf.flattenDepth)
	start := time.Now()
	var interID string
	if flatten {
		interID, err = d.flattenContainer(ctx, api, ctr, req.Lineage, addr)
	} else {
		var resp container.CommitResponse
		resp, err = api.ContainerCommit(ctx, ctr.ID, container.CommitOptions{
			Pause:  true,
			Config: &container.Config{Labels: intermediateLabels(ctr.Config.Labels, req.Lineage, addr), Env: intermediateEnv(ctr.Config.Env)},
		})
		interID = resp.ID
	}
	if removedMeanwhile(err) {
		return d.carryNewest(ctx, api, req, agentAddr, ref, ctr.ID, err)
	}
	if err != nil {
		return fail("%v", err)
	}
	defer d.removeIntermediate(ctx, api, interID)
	inter, err := api.ImageInspect(ctx, interID)
	if err != nil {
		return fail("inspecting the intermediate image %s: %v", shortID(interID), err)
	}
	labels := req.Labels()
	labels[labelSnapshotOf] = agentAddr
	labels[labelSnapshotSource] = ctr.ID
	cfg, err := snapshotImageConfig(base, inter, labels, "layer of the image the agent was created from", "bottlefile snapshot "+addr, time.Now())
	if err != nil {
		return fail("%v", err)
	}
	id, err := loadImageConfig(ctx, api, cfg, ref, len(inter.RootFS.Layers))
	if err != nil {
		return fail("%v", err)
	}
	if base == nil {
		d.log.Warn("the image the container was created from is gone: the snapshot image has an empty config (the agent's declared one still applies to containers created from it)", "addr", addr, "image", shortID(ctr.Image))
	}
	d.log.Info("took snapshot", "addr", addr, "ref", ref, "id", shortID(id), "flattened", flatten, "elapsed", time.Since(start))
	// A snapshot's size is what it adds over the image it was committed
	// from: the layer the commit added, whose base layers the engine
	// shares. A flattened one shares nothing: its size is its whole image.
	var over int64
	if !flatten && base != nil {
		over = base.Size
	}
	return d.snapshotResponse(ctx, api, ref, ctr.ID, over)
}

// labelSnapshotIntermediate marks the image a snapshot passes through (a
// commit holds the container's whole config, env and all). Its value is
// the lineage. From the moment it exists it also carries the lineage and
// the snapshot's address, so that one a killed apply left is an object of
// the lineage like any other: Read reports it as a leftover, the plan
// removes it (and a sweep does). It is removed as soon as the snapshot is
// loaded.
const labelSnapshotIntermediate = drivers.LabelPrefix + "snapshot-intermediate"

// intermediateLabels are the labels given to a commit: a commit adds the
// container's labels to those it is given, so each of bottlefile's other
// ones is overridden with an empty value.
func intermediateLabels(ctrLabels map[string]string, lineage, addr string) map[string]string {
	out := map[string]string{drivers.LabelConfigHash: ""}
	for k := range ctrLabels {
		if strings.HasPrefix(k, drivers.LabelPrefix) {
			out[k] = ""
		}
	}
	out[drivers.LabelLineage] = lineage
	out[drivers.LabelAddress] = addr
	out[labelSnapshotIntermediate] = lineage
	return out
}

// intermediateEnv is the environment given to a commit: a commit adds
// the container's variables to those it is given, and the container's
// hold the agent's secrets, so each is given with an empty value. The
// intermediate image, which a killed apply may leave, holds no value of
// it (the snapshot's own config is its base image's).
func intermediateEnv(ctrEnv []string) []string {
	out := make([]string, 0, len(ctrEnv))
	for _, kv := range ctrEnv {
		k, _, _ := strings.Cut(kv, "=")
		out = append(out, k+"=")
	}
	return out
}

// removeIntermediate removes a snapshot's intermediate image; a failure
// is logged, and a later sweep retries.
func (d *Driver) removeIntermediate(ctx context.Context, api dockerAPI, id string) {
	_, err := api.ImageRemove(context.WithoutCancel(ctx), id, image.RemoveOptions{Force: true})
	if err != nil && !isGone(err) {
		d.log.Warn("could not remove a snapshot's intermediate image; a later sweep will", "id", shortID(id), "error", err)
	}
}

// snapshotResponse inspects a snapshot image for its computed values;
// its size is what it adds over an image of base bytes (0: its whole
// image).
func (d *Driver) snapshotResponse(ctx context.Context, api dockerAPI, ref, source string, base int64) (drivers.ApplyResponse, error) {
	info, err := api.ImageInspect(ctx, ref)
	if err != nil {
		return drivers.ApplyResponse{}, fmt.Errorf("inspecting snapshot image %s: %w", ref, err)
	}
	created, _ := time.Parse(time.RFC3339Nano, info.Created)
	return drivers.ApplyResponse{
		ID:       info.ID,
		Snapshot: &drivers.SnapshotResult{Image: ref, Size: max(info.Size-base, 0), Created: created, Source: source},
		Computed: map[string]string{"depth": strconv.Itoa(len(info.RootFS.Layers))},
	}, nil
}

// flattenContainer streams the container's whole file system (docker
// export) into a new one-layer intermediate image (docker import), with no
// copy on disk in between, and returns its id. The container is paused
// meanwhile, as a commit pauses it.
func (d *Driver) flattenContainer(ctx context.Context, api snapshotAPI, ctr container.InspectResponse, lineage, addr string) (string, error) {
	if ctr.State != nil && ctr.State.Running && !ctr.State.Paused {
		if err := api.ContainerPause(ctx, ctr.ID); err != nil {
			return "", fmt.Errorf("pausing container %s to flatten it: %w", shortID(ctr.ID), err)
		}
		defer func() {
			if err := api.ContainerUnpause(context.WithoutCancel(ctx), ctr.ID); err != nil {
				d.log.Warn("could not unpause the container after flattening it", "id", shortID(ctr.ID), "error", err)
			}
		}()
	}
	rc, err := api.ContainerExport(ctx, ctr.ID)
	if err != nil {
		return "", fmt.Errorf("exporting container %s to flatten it: %w", shortID(ctr.ID), err)
	}
	defer rc.Close()
	out, err := api.ImageImport(ctx, image.ImportSource{Source: rc, SourceName: "-"}, "", image.ImportOptions{
		Changes: []string{fmt.Sprintf("LABEL %s=%s %s=%s %s=%q", labelSnapshotIntermediate, lineage, drivers.LabelLineage, lineage, drivers.LabelAddress, addr)},
	})
	if err != nil {
		return "", fmt.Errorf("importing the export of container %s: %w", shortID(ctr.ID), err)
	}
	res, err := readStream(out)
	out.Close()
	if err != nil {
		return "", fmt.Errorf("importing the export of container %s: %w", shortID(ctr.ID), err)
	}
	// An import reports the new image's id as its last status.
	for i := len(res.tail) - 1; i >= 0; i-- {
		if strings.HasPrefix(res.tail[i], "sha256:") {
			return res.tail[i], nil
		}
	}
	return "", fmt.Errorf("importing the export of container %s: the engine named no image", shortID(ctr.ID))
}

// imageJSON is an image config as docker load reads it.
type imageJSON struct {
	Architecture string          `json:"architecture"`
	Variant      string          `json:"variant,omitempty"`
	OS           string          `json:"os"`
	Created      time.Time       `json:"created"`
	Config       json.RawMessage `json:"config"`
	RootFS       rootFSJSON      `json:"rootfs"`
	History      []historyJSON   `json:"history"`
}

type rootFSJSON struct {
	Type    string   `json:"type"`
	DiffIDs []string `json:"diff_ids"`
}

type historyJSON struct {
	Created   time.Time `json:"created"`
	CreatedBy string    `json:"created_by,omitempty"`
	Comment   string    `json:"comment,omitempty"`
}

// snapshotImageConfig writes the config of a snapshot image: the base
// image's config (nil: an empty one) with bottlefile's labels instead of
// the base's own io.bottlefile.* ones, the intermediate's layers and
// platform, and one history entry per layer saying only where it came
// from (baseNote for the base image's layers, newNote for the others).
// Nothing of the intermediate's config (the container's) is used.
func snapshotImageConfig(base *image.InspectResponse, inter image.InspectResponse, labels map[string]string, baseNote, newNote string, now time.Time) ([]byte, error) {
	now = now.UTC()
	diffIDs := inter.RootFS.Layers
	img := imageJSON{Architecture: inter.Architecture, Variant: inter.Variant, OS: inter.Os, Created: now, RootFS: rootFSJSON{Type: "layers", DiffIDs: diffIDs}}
	cfg := map[string]json.RawMessage{}
	var inherited map[string]string
	baseLayers, baseCreated := 0, now
	if base != nil {
		if base.Architecture != "" {
			img.Architecture, img.Variant = base.Architecture, base.Variant
		}
		if base.Os != "" {
			img.OS = base.Os
		}
		if base.Config != nil {
			data, err := json.Marshal(base.Config)
			if err != nil {
				return nil, err
			}
			if err := json.Unmarshal(data, &cfg); err != nil {
				return nil, err
			}
			inherited = base.Config.Labels
		}
		baseLayers = min(len(base.RootFS.Layers), len(diffIDs))
		if t, err := time.Parse(time.RFC3339Nano, base.Created); err == nil {
			baseCreated = t.UTC()
		}
		if !slices.Equal(base.RootFS.Layers[:baseLayers], diffIDs[:baseLayers]) {
			baseLayers = 0 // flattened: one new layer of everything
		}
	}
	all := map[string]string{}
	for k, v := range inherited {
		if !strings.HasPrefix(k, drivers.LabelPrefix) {
			all[k] = v
		}
	}
	maps.Copy(all, labels)
	data, err := json.Marshal(all)
	if err != nil {
		return nil, err
	}
	cfg["Labels"] = data
	if img.Config, err = json.Marshal(cfg); err != nil {
		return nil, err
	}
	for i := range diffIDs {
		if i < baseLayers {
			img.History = append(img.History, historyJSON{Created: baseCreated, CreatedBy: baseNote})
		} else {
			img.History = append(img.History, historyJSON{Created: now, CreatedBy: newNote})
		}
	}
	return json.Marshal(img)
}

// imageLoader is what loadImageConfig needs of the engine.
type imageLoader interface {
	dockerAPI
	ImageLoad(ctx context.Context, input io.Reader, opts ...client.ImageLoadOption) (image.LoadResponse, error)
}

// loadImageConfig loads an image config as ref through docker load: a tar
// of just the config and a manifest naming it. The engine takes a layer
// it already has from its layer store without reading the tar for it, so
// every layer of the config must be on the engine (which holds as long as
// the caller keeps an image of them). It returns the image id.
func loadImageConfig(ctx context.Context, api imageLoader, cfg []byte, ref string, layers int) (string, error) {
	sum := sha256.Sum256(cfg)
	id := hex.EncodeToString(sum[:])
	manifest := []map[string]any{{"Config": id + ".json", "RepoTags": []string{ref}, "Layers": layerPaths(layers)}}
	mdata, err := json.Marshal(manifest)
	if err != nil {
		return "", err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range []struct {
		name string
		data []byte
	}{{id + ".json", cfg}, {"manifest.json", mdata}} {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.data)), ModTime: time.Unix(0, 0)}); err != nil {
			return "", err
		}
		if _, err := tw.Write(f.data); err != nil {
			return "", err
		}
	}
	if err := tw.Close(); err != nil {
		return "", err
	}
	resp, err := api.ImageLoad(ctx, &buf, client.ImageLoadWithQuiet(true))
	if err == nil {
		_, err = readStream(resp.Body)
		resp.Body.Close()
	}
	if err != nil {
		return "", fmt.Errorf("loading the snapshot image config as %s: %w", ref, err)
	}
	info, err := api.ImageInspect(ctx, ref)
	if err != nil {
		return "", fmt.Errorf("inspecting %s after loading it: %w", ref, err)
	}
	if info.ID != "sha256:"+id {
		return "", fmt.Errorf("%s is image %s after loading, not the config written (%s)", ref, shortID(info.ID), shortID(id))
	}
	return info.ID, nil
}

// layerPaths are the manifest's layer file names: never read (the engine
// has the layers), but one per layer is required.
func layerPaths(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("layer%d/layer.tar", i)
	}
	return out
}

// deleteSnapshot removes a snapshot image by its tags, so that an image a
// container still runs from (or, for snapshots made before they were
// loaded without a parent, that later snapshots were committed on top of)
// is only untagged: the engine keeps it while it is needed, and a sweep
// removes it afterwards. Nothing is pruned here: prunes of a shared parent
// by parallel deletes race in the engine ("unrecognized image ID").
func (d *Driver) deleteSnapshot(ctx context.Context, api dockerAPI, req drivers.ApplyRequest) (drivers.ApplyResponse, error) {
	addr := req.Object.Addr
	defer d.sweepSnapshots(ctx, api, req.Lineage)
	if req.ID == "" {
		return drivers.ApplyResponse{}, nil
	}
	info, err := api.ImageInspect(ctx, req.ID)
	if cerrdefs.IsNotFound(err) {
		d.log.Debug("snapshot image already gone", "addr", addr, "id", shortID(req.ID))
		return drivers.ApplyResponse{}, nil
	}
	if err != nil {
		return drivers.ApplyResponse{}, fmt.Errorf("deleting snapshot %s: inspecting image %s: %w", addr, shortID(req.ID), err)
	}
	if info.Config == nil || info.Config.Labels[drivers.LabelLineage] != req.Lineage {
		return drivers.ApplyResponse{}, fmt.Errorf("deleting snapshot %s: image %s does not belong to this state (lineage %s); leaving it alone", addr, shortID(req.ID), req.Lineage)
	}
	untagged := 0
	for _, tag := range info.RepoTags {
		if !isSnapshotTag(req.Lineage, tag) {
			continue
		}
		if err := removeImage(ctx, api, tag, true); err != nil {
			return drivers.ApplyResponse{}, fmt.Errorf("deleting snapshot %s: removing %s: %w", addr, tag, err)
		}
		untagged++
	}
	if untagged == 0 {
		if err := removeImage(ctx, api, info.ID, false); err != nil {
			return drivers.ApplyResponse{}, fmt.Errorf("deleting snapshot %s: removing image %s: %w", addr, shortID(info.ID), err)
		}
	}
	d.log.Info("deleted snapshot", "addr", addr, "id", shortID(info.ID), "tags", info.RepoTags)
	return drivers.ApplyResponse{}, nil
}

// removeImage removes an image by tag or id, without pruning parents.
// Removing the tag of an image that a container (or a child image) still
// uses only untags it, and the engine keeps it while it is needed; those
// conflicts, and an image already gone, are no error.
func removeImage(ctx context.Context, api dockerAPI, ref string, force bool) error {
	_, err := api.ImageRemove(ctx, ref, image.RemoveOptions{Force: force})
	if err == nil || isGone(err) || cerrdefs.IsConflict(err) {
		return nil
	}
	return err
}

// isGone reports whether an image operation failed because the image is
// gone: not found, or removed by a parallel request halfway, which the
// engine reports as a plain error ("unrecognized image ID").
func isGone(err error) bool {
	if err == nil {
		return false
	}
	return cerrdefs.IsNotFound(err) || strings.Contains(err.Error(), "unrecognized image ID") || strings.Contains(err.Error(), "No such image")
}

// removeUntagged removes one image if nothing uses it any more.
func (d *Driver) removeUntagged(ctx context.Context, api dockerAPI, id string) {
	if err := removeImage(ctx, api, id, false); err != nil {
		d.log.Debug("could not remove an untagged snapshot image", "id", shortID(id), "error", err)
	}
}

// intermediateAge is how old a snapshot's intermediate image must be for
// a sweep to take it as left by a crash. One lives about a second, and a
// sweep never runs while this process makes one (imageMaking); the age
// only guards against what no lock covers.
const intermediateAge = time.Minute

// sweepSnapshots removes what the lineage's image making left that no
// snapshot or built image records any more: untagged images of the
// lineage (snapshots deleted while a container ran from them, a built
// image kept for older snapshots committed on top of it), snapshot
// intermediates a crash left, and what a build cut off mid-way left. It
// runs only while no image is being made in this process; otherwise it is
// left to Close. Errors are only logged: the next sweep retries.
func (d *Driver) sweepSnapshots(ctx context.Context, api dockerAPI, lineage string) {
	if lineage == "" {
		return
	}
	if !imageMaking.TryLock() {
		d.pendingSweeps.Store(lineage, true)
		return
	}
	defer imageMaking.Unlock()
	d.sweepLocked(context.WithoutCancel(ctx), api, lineage)
}

// sweepPending runs the sweeps that were skipped while images were being
// made, waiting for those to be made.
func (d *Driver) sweepPending(ctx context.Context, api dockerAPI) {
	d.pendingSweeps.Range(func(k, _ any) bool {
		d.pendingSweeps.Delete(k)
		imageMaking.Lock()
		d.sweepLocked(ctx, api, k.(string))
		imageMaking.Unlock()
		return true
	})
}

// sweepLocked is the sweep; the caller holds imageMaking exclusively.
func (d *Driver) sweepLocked(ctx context.Context, api dockerAPI, lineage string) {
	list := func(label string) []image.Summary {
		l, err := api.ImageList(ctx, image.ListOptions{Filters: filters.NewArgs(
			filters.Arg("label", label+"="+lineage),
			filters.Arg("dangling", "true"),
		)})
		if err != nil {
			d.log.Debug("listing untagged images", "label", label, "error", err)
		}
		return l
	}
	remove := func(what string, img image.Summary, force, prune bool) bool {
		_, err := api.ImageRemove(ctx, img.ID, image.RemoveOptions{Force: force, PruneChildren: prune})
		switch {
		case err == nil:
			d.log.Debug("removed "+what, "id", shortID(img.ID))
			return true
		case isGone(err) || cerrdefs.IsConflict(err):
		default:
			d.log.Debug("could not remove "+what, "id", shortID(img.ID), "error", err)
		}
		return false
	}
	// Removing an image can leave its parent dangling: a build gives
	// each of its labels a step of its own, so the steps before the last
	// carry the lineage label too. Go again while something goes.
	gone := map[string]bool{}
	for range 8 {
		removed := false
		for _, img := range list(drivers.LabelLineage) {
			if !hasTags(img.RepoTags) && !gone[img.ID] && remove("an untagged image of the lineage", img, false, false) {
				gone[img.ID], removed = true, true
			}
		}
		if !removed {
			break
		}
	}
	for _, img := range list(labelSnapshotIntermediate) {
		// Those of this lineage went with the first list: no image of it
		// is being made. Older ones carry no lineage label; only their age
		// tells they are not being made.
		if !hasTags(img.RepoTags) && img.Labels[drivers.LabelLineage] == "" && time.Since(time.Unix(img.Created, 0)) > intermediateAge {
			remove("a snapshot intermediate left by a crash", img, true, false)
		}
	}
	d.sweepBuildLeftovers(ctx, api, lineage)
	d.sweepCarriers(ctx, api, lineage, "") // workspace.go
}

// hasSnapshotTag reports whether one of an image's tags is a snapshot
// reference of the lineage. A snapshot image without one was deleted while
// children or a container still used it, or is a copy someone tagged by
// hand: it is no snapshot Read reports.
func hasSnapshotTag(lineage string, tags []string) bool {
	for _, t := range tags {
		if isSnapshotTag(lineage, t) {
			return true
		}
	}
	return false
}

// hasTags reports whether an image has a tag ("<none>:<none>" is none).
func hasTags(tags []string) bool {
	for _, t := range tags {
		if t != "" && t != "<none>:<none>" {
			return true
		}
	}
	return false
}

// Written reports how much a container wrote to its own layer (the
// engine's SizeRw, less the CA files bottlefile gave it: seededBytes) and
// when it was created, so a plan can say what a replace or destroy would
// discard. It only reads. On an engine that cannot size a layer cheaply
// (sizes.go) it says so instead, and asks nothing more.
func (d *Driver) Written(ctx context.Context, lineage string, obj drivers.LiveObject) (drivers.Written, error) {
	if obj.Kind != kindContainer {
		return drivers.Written{}, nil
	}
	api, _, err := d.snapshotEngine(ctx)
	if err != nil {
		return drivers.Written{}, err
	}
	if ok, why := d.writesMeasurable(ctx, api); !ok {
		return drivers.Written{Since: obj.Created, Unmeasured: why}, nil
	}
	ref := obj.ID
	if ref == "" {
		if ref, err = engine.ObjectName(lineage, obj.Addr, kindContainer); err != nil {
			return drivers.Written{}, err
		}
	}
	info, _, err := api.ContainerInspectWithRaw(ctx, ref, true)
	if err != nil {
		return drivers.Written{}, fmt.Errorf("reading what %s wrote: %w", obj.Addr, err)
	}
	var w drivers.Written
	if info.SizeRw != nil {
		var labels map[string]string
		if info.Config != nil {
			labels = info.Config.Labels
		}
		w.Bytes = written(ctx, api, info.ID, labels, *info.SizeRw)
	}
	if t, err := time.Parse(time.RFC3339Nano, info.Created); err == nil {
		w.Since = t
	}
	return w, nil
}

// CommitSnapshot takes the snapshot req.Object of the agent req.Agent from
// the container named (or with the id) ctr on this driver's engine, as
// Apply takes one of the agent's own container: no secret of the
// container's config in the image, never removed by a sweep while it is
// being made. The image is tagged SnapshotRef's reference on this engine;
// the response is a snapshot create's.
func (d *Driver) CommitSnapshot(ctx context.Context, req drivers.ApplyRequest, ctr string) (drivers.ApplyResponse, error) {
	if ctr == "" {
		return drivers.ApplyResponse{}, errors.New("no container to commit")
	}
	return d.commitSnapshot(ctx, req, ctr)
}

// SweepSnapshots removes what making snapshots of the lineage left on
// this driver's engine that nothing records (untagged images of the
// lineage, intermediates a crash left), unless an image of the lineage
// is being made in this process: then Close does.
func (d *Driver) SweepSnapshots(ctx context.Context, lineage string) {
	api, _, err := d.engine(ctx)
	if err != nil {
		return
	}
	d.sweepSnapshots(ctx, api, lineage)
}
