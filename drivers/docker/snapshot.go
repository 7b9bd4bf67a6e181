package docker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/strslice"
	"github.com/docker/docker/client"
	"github.com/hashicorp/hcl/v2/hcldec"
	"github.com/zclconf/go-cty/cty"

	"github.com/bottlefile/bottlefile/drivers"
)

// Snapshots (drivers.KindSnapshot) are images: a commit of the agent's
// container, tagged bf-<lineage[:8]>-<agent>-snap:<N> for the policy
// snapshot agent.<agent>.snapshot.N and :<NAME> for the block
// snapshot.NAME. Besides the lineage, address and config-hash labels they
// carry labelSnapshotOf (the agent's address), which is how Read tells them
// from built images, and labelSnapshotSource (the container committed).
//
// These are not io.bottlefile.kind: a container created from a snapshot
// inherits the image's labels, and io.bottlefile.kind on a container means
// what Read reports it as.
const (
	labelSnapshotOf     = "io.bottlefile.snapshot-of"
	labelSnapshotSource = "io.bottlefile.snapshot-source"
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
func (d *Driver) snapshotEngine() (snapshotAPI, snapshotConfig, error) {
	api, _, err := d.engine()
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

// validTag is what the engine accepts as an image tag.
var validTag = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`)

var allDigits = regexp.MustCompile(`^[0-9]+$`)

// snapshotRepo is the repository snapshots of an agent are tagged into.
func snapshotRepo(lineage, agentAddr string) (string, error) {
	repo, err := imageRepo(lineage, agentAddr)
	if err != nil {
		return "", err
	}
	return repo + "-snap", nil
}

// snapshotTag is the tag of one snapshot: N for agent.X.snapshot.N, NAME
// for snapshot.NAME, else (or when NAME is no valid tag, or all digits and
// so could be taken for a policy snapshot) a short hash of the address.
func snapshotTag(addr, agentAddr string) string {
	if n, ok := strings.CutPrefix(addr, agentAddr+".snapshot."); ok && allDigits.MatchString(n) && len(n) <= 20 {
		return n
	}
	if name, ok := strings.CutPrefix(addr, "snapshot."); ok && validTag.MatchString(name) && !allDigits.MatchString(name) {
		return name
	}
	sum := sha256.Sum256([]byte(addr))
	return "s-" + hex.EncodeToString(sum[:6])
}

// snapshotRef is the reference of a snapshot image:
// bf-<lineage[:8]>-<agent>-snap:<tag>.
func snapshotRef(lineage, addr, agentAddr string) (string, error) {
	repo, err := snapshotRepo(lineage, agentAddr)
	if err != nil {
		return "", err
	}
	return repo + ":" + snapshotTag(addr, agentAddr), nil
}

// isSnapshotTag reports whether a repo:tag is a snapshot reference of the
// lineage.
func isSnapshotTag(lineage, tag string) bool {
	repo, _, ok := strings.Cut(tag, ":")
	return ok && strings.HasPrefix(repo, "bf-"+drivers.LineagePrefix(lineage)+"-") && strings.HasSuffix(repo, "-snap")
}

// snapshotAgent is the address of the agent a snapshot object commits.
func snapshotAgent(req drivers.ApplyRequest) (string, error) {
	a, err := drivers.String(attr(req.Object, "agent"))
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

// createSnapshot commits the agent's container (paused while it runs), so
// that the image boots as the agent is declared; past flatten_depth layers
// it exports the container into a one-layer image instead. An unrecorded
// image an interrupted apply left at the same reference loses the tag to
// the new one, and goes with the next sweep (sweepSnapshots).
func (d *Driver) createSnapshot(ctx context.Context, req drivers.ApplyRequest) (drivers.ApplyResponse, error) {
	addr := req.Object.Addr
	fail := func(format string, args ...any) (drivers.ApplyResponse, error) {
		return drivers.ApplyResponse{}, fmt.Errorf("taking snapshot %s: %s", addr, fmt.Sprintf(format, args...))
	}
	api, conf, err := d.snapshotEngine()
	if err != nil {
		return fail("%v", err)
	}
	agentAddr, err := snapshotAgent(req)
	if err != nil {
		return fail("%v", err)
	}
	ref, err := snapshotRef(req.Lineage, addr, agentAddr)
	if err != nil {
		return fail("%v", err)
	}
	name, err := objectName(req.Lineage, agentAddr, kindContainer)
	if err != nil {
		return fail("%v", err)
	}
	ctr, err := api.ContainerInspect(ctx, name)
	if cerrdefs.IsNotFound(err) {
		return fail("%s has no container %s to commit (apply the agent first)", agentAddr, name)
	}
	if err != nil {
		return fail("inspecting container %s of %s: %v", name, agentAddr, err)
	}
	if ctr.Config == nil || ctr.Config.Labels[drivers.LabelLineage] != req.Lineage {
		return fail("container %s does not belong to this state (lineage %s)", name, req.Lineage)
	}
	depth := 0 // unknown: flattened, which needs no base image
	if base, err := api.ImageInspect(ctx, ctr.Image); err == nil {
		depth = len(base.RootFS.Layers)
	} else if !cerrdefs.IsNotFound(err) {
		return fail("inspecting the image %s container %s runs: %v", shortID(ctr.Image), name, err)
	}
	labels := ownLabels(req)
	labels[labelSnapshotOf] = agentAddr
	labels[labelSnapshotSource] = ctr.ID
	cfg, skipped, err := snapshotImageConfig(req.Agent, ctr.Config, labels)
	if err != nil {
		return fail("%v", err)
	}
	var id string
	flatten := depth == 0 || needsFlatten(depth, conf.flattenDepth)
	start := time.Now()
	if flatten {
		changes, more := cfg.changes()
		skipped = append(skipped, more...)
		id, err = d.flattenContainer(ctx, api, ctr, ref, changes)
	} else {
		var resp container.CommitResponse
		resp, err = api.ContainerCommit(ctx, ctr.ID, container.CommitOptions{
			Reference: ref,
			Comment:   "bottlefile snapshot " + addr,
			Pause:     true,
			Config:    cfg.container(),
		})
		id = resp.ID
	}
	if err != nil {
		return fail("%v", err)
	}
	for _, s := range skipped {
		d.log.Warn("left out of the snapshot image's config", "addr", addr, "what", s)
	}
	d.log.Info("took snapshot", "addr", addr, "ref", ref, "id", shortID(id), "flattened", flatten, "elapsed", time.Since(start))
	return d.snapshotResponse(ctx, api, ref, ctr.ID)
}

// snapshotResponse inspects a snapshot image for its computed values.
func (d *Driver) snapshotResponse(ctx context.Context, api dockerAPI, ref, source string) (drivers.ApplyResponse, error) {
	info, err := api.ImageInspect(ctx, ref)
	if err != nil {
		return drivers.ApplyResponse{}, fmt.Errorf("inspecting snapshot image %s: %w", ref, err)
	}
	created := info.Created
	if t, err := time.Parse(time.RFC3339Nano, created); err == nil {
		created = t.UTC().Format(time.RFC3339Nano)
	}
	return drivers.ApplyResponse{ID: info.ID, Computed: map[string]string{
		"image":   ref,
		"size":    strconv.FormatInt(info.Size, 10),
		"created": created,
		"source":  source,
		"depth":   strconv.Itoa(len(info.RootFS.Layers)),
	}}, nil
}

// flattenContainer streams the container's whole file system (docker
// export) into a new one-layer image (docker import), with no copy on disk
// in between, and re-applies the image config through changes. The
// container is paused meanwhile, as a commit pauses it.
func (d *Driver) flattenContainer(ctx context.Context, api snapshotAPI, ctr container.InspectResponse, ref string, changes []string) (string, error) {
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
	out, err := api.ImageImport(ctx, image.ImportSource{Source: rc, SourceName: "-"}, ref, image.ImportOptions{
		Message: "bottlefile snapshot (flattened)",
		Changes: changes,
	})
	if err != nil {
		return "", fmt.Errorf("importing the export of container %s as %s: %w", shortID(ctr.ID), ref, err)
	}
	_, err = readStream(out)
	out.Close()
	if err != nil {
		return "", fmt.Errorf("importing the export of container %s as %s: %w", shortID(ctr.ID), ref, err)
	}
	info, err := api.ImageInspect(ctx, ref)
	if err != nil {
		return "", fmt.Errorf("inspecting the flattened image %s: %w", ref, err)
	}
	return info.ID, nil
}

// deleteSnapshot removes a snapshot image by its tags, so that an image
// later snapshots were committed on top of, or a container runs from, is
// only untagged: its layers stay until those go, and nothing blocks a
// prune. Images this lineage left untagged and unused go too.
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

// removeImage removes an image by tag or id, pruning untagged parents.
// Removing the tag of an image that child images or a container still use
// only untags it (the engine keeps it while they need it); those
// conflicts, and an image already gone, are no error.
func removeImage(ctx context.Context, api dockerAPI, ref string, force bool) error {
	_, err := api.ImageRemove(ctx, ref, image.RemoveOptions{Force: force, PruneChildren: true})
	if err == nil || cerrdefs.IsNotFound(err) || cerrdefs.IsConflict(err) {
		return nil
	}
	return err
}

// removeUntagged removes one image if nothing uses it any more.
func (d *Driver) removeUntagged(ctx context.Context, api dockerAPI, id string) {
	if err := removeImage(ctx, api, id, false); err != nil {
		d.log.Debug("could not remove an untagged snapshot image", "id", shortID(id), "error", err)
	}
}

// sweepSnapshots removes the snapshot images of the lineage that are
// untagged (deleted while in use) and no longer used by any image or
// container. One list call; errors are only logged: the next sweep retries.
func (d *Driver) sweepSnapshots(ctx context.Context, api dockerAPI, lineage string) {
	if lineage == "" {
		return
	}
	ctx = context.WithoutCancel(ctx)
	list, err := api.ImageList(ctx, image.ListOptions{Filters: filters.NewArgs(
		filters.Arg("label", drivers.LabelLineage+"="+lineage),
		filters.Arg("label", labelSnapshotOf),
		filters.Arg("dangling", "true"),
	)})
	if err != nil {
		d.log.Debug("listing untagged snapshot images", "error", err)
		return
	}
	for _, img := range list {
		if hasTags(img.RepoTags) {
			continue
		}
		_, err := api.ImageRemove(ctx, img.ID, image.RemoveOptions{PruneChildren: true})
		switch {
		case err == nil:
			d.log.Debug("removed an untagged snapshot image", "id", shortID(img.ID))
		case cerrdefs.IsNotFound(err) || cerrdefs.IsConflict(err):
		default:
			d.log.Debug("could not remove an untagged snapshot image", "id", shortID(img.ID), "error", err)
		}
	}
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

// Written reports how much a container wrote to its own layer (the engine's
// SizeRw) and when it was created, so a plan can say what a replace or
// destroy would discard. It only reads.
func (d *Driver) Written(ctx context.Context, lineage string, obj drivers.LiveObject) (drivers.Written, error) {
	if obj.Kind != kindContainer {
		return drivers.Written{}, nil
	}
	api, _, err := d.snapshotEngine()
	if err != nil {
		return drivers.Written{}, err
	}
	ref := obj.ID
	if ref == "" {
		if ref, err = objectName(lineage, obj.Addr, kindContainer); err != nil {
			return drivers.Written{}, err
		}
	}
	info, _, err := api.ContainerInspectWithRaw(ctx, ref, true)
	if err != nil {
		return drivers.Written{}, fmt.Errorf("reading what %s wrote: %w", obj.Addr, err)
	}
	var w drivers.Written
	if info.SizeRw != nil {
		w.Bytes = *info.SizeRw
	}
	if t, err := time.Parse(time.RFC3339Nano, info.Created); err == nil {
		w.Since = t
	}
	return w, nil
}

// imageConfig is the config a snapshot image gets: the agent as declared,
// over what the container runs with.
type imageConfig struct {
	entrypoint    []string
	entrypointSet bool // false: inherit the container's
	cmd           []string
	env           []string // KEY=VALUE
	workdir       string
	user          string
	labels        map[string]string
}

// snapshotImageConfig makes the config of a snapshot image: the command,
// entrypoint, env and workdir the agent declares (those it leaves unset
// come from the container), the container's other env and its user, and
// the given labels over the container's own. Sensitive env values are not
// written into the image: the key is kept with an empty value (a container
// created from the snapshot gets the value from the configuration). The
// second result names what was left out.
func snapshotImageConfig(agent *drivers.AgentSpec, ctr *container.Config, labels map[string]string) (imageConfig, []string, error) {
	if ctr == nil {
		ctr = &container.Config{}
	}
	c := imageConfig{
		entrypoint: ctr.Entrypoint, entrypointSet: len(ctr.Entrypoint) > 0,
		cmd: ctr.Cmd, workdir: ctr.WorkingDir, user: ctr.User,
		labels: map[string]string{},
	}
	for k, v := range ctr.Labels {
		if !strings.HasPrefix(k, "io.bottlefile.") {
			c.labels[k] = v
		}
	}
	for k, v := range labels {
		c.labels[k] = v
	}
	declared := map[string]string{}
	var secret []string
	if agent != nil {
		var err error
		if !isNull(agent.Command) {
			if c.cmd, err = drivers.Strings(agent.Command); err != nil {
				return c, nil, fmt.Errorf("command: %w", err)
			}
		}
		if !isNull(agent.Entrypoint) {
			if c.entrypoint, err = drivers.Strings(agent.Entrypoint); err != nil {
				return c, nil, fmt.Errorf("entrypoint: %w", err)
			}
			c.entrypointSet = true
			if c.entrypoint == nil {
				c.entrypoint = []string{} // declared empty: cleared
			}
		}
		if !isNull(agent.Workdir) {
			if c.workdir, err = drivers.String(agent.Workdir); err != nil {
				return c, nil, fmt.Errorf("workdir: %w", err)
			}
		}
		if !isNull(agent.User) {
			if c.user, err = drivers.String(agent.User); err != nil {
				return c, nil, fmt.Errorf("user: %w", err)
			}
		}
		if !isNull(agent.Env) {
			if declared, err = drivers.StringMap(agent.Env); err != nil {
				return c, nil, fmt.Errorf("env: %w", err)
			}
			secret = sensitiveKeys(agent.Env)
		}
	}
	for _, k := range secret {
		declared[k] = ""
	}
	seen := map[string]bool{}
	for _, kv := range ctr.Env {
		k, _, _ := strings.Cut(kv, "=")
		if v, ok := declared[k]; ok {
			kv = k + "=" + v
		}
		if !seen[k] {
			seen[k] = true
			c.env = append(c.env, kv)
		}
	}
	for _, k := range sortedKeys(declared) {
		if !seen[k] {
			c.env = append(c.env, k+"="+declared[k])
		}
	}
	var left []string
	for _, k := range secret {
		left = append(left, fmt.Sprintf("the value of env %s (sensitive)", k))
	}
	return c, left, nil
}

// sensitiveKeys names the entries of a map value that are marked (as a
// whole map or one by one).
func sensitiveKeys(v cty.Value) []string {
	if v == cty.NilVal || v.IsNull() {
		return nil
	}
	whole := v.IsMarked()
	inner, _ := v.Unmark()
	if !inner.IsKnown() || inner.IsNull() || !inner.CanIterateElements() {
		return nil
	}
	var out []string
	for it := inner.ElementIterator(); it.Next(); {
		k, e := it.Element()
		if whole || e.ContainsMarked() {
			out = append(out, k.AsString())
		}
	}
	return out
}

func isNull(v cty.Value) bool {
	if v == cty.NilVal {
		return true
	}
	u, _ := v.UnmarkDeep()
	return u.IsNull()
}

// container is the config given to a commit. The engine fills in what it
// leaves unset from the container.
func (c imageConfig) container() *container.Config {
	cfg := &container.Config{
		Cmd:        strslice.StrSlice(c.cmd),
		Env:        c.env,
		WorkingDir: c.workdir,
		User:       c.user,
		Labels:     c.labels,
	}
	if c.entrypointSet {
		cfg.Entrypoint = strslice.StrSlice(c.entrypoint)
		if cfg.Entrypoint == nil {
			cfg.Entrypoint = strslice.StrSlice{}
		}
	}
	return cfg
}

// changes renders the config as the Dockerfile instructions an import
// takes (which starts from an empty config). Values are quoted for the
// Dockerfile word rules; a value with a line break cannot be written in
// one and is left out (named in the second result).
func (c imageConfig) changes() ([]string, []string) {
	var out, left []string
	if c.entrypointSet {
		out = append(out, "ENTRYPOINT "+jsonList(c.entrypoint))
	}
	if c.cmd != nil {
		out = append(out, "CMD "+jsonList(c.cmd))
	}
	for _, kv := range c.env {
		k, v, _ := strings.Cut(kv, "=")
		if !changeSafe(k) || !changeSafe(v) || k == "" {
			left = append(left, fmt.Sprintf("env %s (a line break cannot be written into an imported image's config)", k))
			continue
		}
		out = append(out, "ENV "+quoteWord(k)+"="+quoteWord(v))
	}
	if c.workdir != "" {
		if changeSafe(c.workdir) {
			out = append(out, "WORKDIR "+quoteWord(c.workdir))
		} else {
			left = append(left, "workdir (it has a line break)")
		}
	}
	if c.user != "" {
		if changeSafe(c.user) {
			out = append(out, "USER "+quoteWord(c.user))
		} else {
			left = append(left, "user (it has a line break)")
		}
	}
	for _, k := range sortedKeys(c.labels) {
		v := c.labels[k]
		if !changeSafe(k) || !changeSafe(v) {
			left = append(left, fmt.Sprintf("label %s (it has a line break)", k))
			continue
		}
		out = append(out, "LABEL "+quoteWord(k)+"="+quoteWord(v))
	}
	return out, left
}

// jsonList is the exec form of CMD and ENTRYPOINT: a JSON array, which
// the Dockerfile parser reads with a JSON decoder and never expands.
func jsonList(s []string) string {
	if s == nil {
		s = []string{}
	}
	data, _ := json.Marshal(s)
	return string(data)
}

// quoteWord double-quotes a word so that the Dockerfile word rules (quote
// removal, $-expansion, backslash escapes) give it back unchanged.
func quoteWord(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"', '$', '\\':
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	b.WriteByte('"')
	return b.String()
}

// changeSafe reports whether a value fits on one instruction line.
func changeSafe(s string) bool { return !strings.ContainsAny(s, "\n\r") }
