package docker

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"

	"github.com/bottlefile/bottlefile/addrs"
	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/engine"
	"github.com/bottlefile/bottlefile/drivers/gateway"
)

// containerSpec is a container object's attributes, decoded.
type containerSpec struct {
	drivers.Workload        // Image: the reference, or the tag of the built image
	built            bool   // Image is built or a snapshot: never pulled
	nanoCPUs         int64  // CPUs, as the engine takes them
	network          string // engine name of the agent's network
}

// decodeContainer reads a container object's attributes. Values that are
// still unknown, or of the wrong type, are errors naming the attribute;
// sensitive values are unmarked here and never logged.
func decodeContainer(req drivers.ApplyRequest) (containerSpec, error) {
	o := req.Object
	var s containerSpec
	var err error
	wrap := func(name string, e error) error { return fmt.Errorf("%s: %w", name, e) }

	if s.Workload, err = drivers.DecodeWorkload(drivers.ObjectAttrs(o)); err != nil {
		return s, err
	}
	buildHash, err := drivers.String(o.Attr("build_hash"))
	if err != nil {
		return s, wrap("build_hash", err)
	}
	if buildHash != "" {
		if s.Image, err = engine.ImageTag(req.Lineage, req.NamedAddr(o.Addr), buildHash); err != nil {
			return s, err
		}
		s.built = true
	}
	if req.BootImage != "" {
		// Resume or migration: boot from the snapshot image, which is on
		// the engine (never pulled), with the agent's config as declared.
		s.Image, s.built = req.BootImage, true
	}
	if s.Image == "" {
		return s, errors.New("no image: set image or a build block")
	}
	if s.Entrypoint != nil && len(s.Entrypoint) == 0 {
		// An empty list clears the image's entrypoint, as --entrypoint "" does.
		s.Entrypoint = []string{""}
	}
	if s.nanoCPUs, s.Memory, err = decodeLimits(o); err != nil {
		return s, err
	}
	netAddr, err := drivers.String(o.Attr("network"))
	if err != nil {
		return s, wrap("network", err)
	}
	if netAddr == "" {
		netAddr = addrs.NetworkOf(o.Addr)
	}
	if s.network, err = engine.ObjectName(req.Lineage, req.NamedAddr(netAddr), kindNetwork); err != nil {
		return s, wrap("network", err)
	}
	return s, nil
}

// decodeLimits reads cpus (as nano-CPUs) and memory (bytes); 0 is no limit.
func decodeLimits(o drivers.Object) (nanoCPUs, memory int64, err error) {
	cpus, err := drivers.Float(o.Attr("cpus"))
	if err != nil {
		return 0, 0, fmt.Errorf("cpus: %w", err)
	}
	if cpus < 0 || math.IsNaN(cpus) || cpus > 1<<20 {
		return 0, 0, fmt.Errorf("cpus: %g is out of range", cpus)
	}
	memory, err = drivers.Int(o.Attr("memory"))
	if err != nil {
		return 0, 0, fmt.Errorf("memory: %w", err)
	}
	if memory < 0 {
		return 0, 0, fmt.Errorf("memory: %d is negative", memory)
	}
	return int64(math.Round(cpus * 1e9)), memory, nil
}

func (d *Driver) createContainer(ctx context.Context, api dockerAPI, req drivers.ApplyRequest) (drivers.ApplyResponse, error) {
	addr := req.Object.Addr
	name, err := engine.ObjectName(req.Lineage, req.NamedAddr(addr), kindContainer)
	if err != nil {
		return drivers.ApplyResponse{}, fmt.Errorf("creating container for %s: %w", addr, err)
	}
	fail := func(format string, args ...any) (drivers.ApplyResponse, error) {
		return drivers.ApplyResponse{}, fmt.Errorf("creating container %s for %s: %s", name, addr, fmt.Sprintf(format, args...))
	}
	spec, err := decodeContainer(req)
	if err != nil {
		return fail("%v", err)
	}
	// Carrying the workspace out of the container being replaced: it is
	// stopped and set aside, so that this one takes its name (workspace.go).
	carryFrom := ""
	if req.Carry != nil && req.Carry.Workload != "" {
		if carryFrom, err = d.setAside(ctx, api, req, name); err != nil {
			return fail("%v", err)
		}
		defer func() {
			if carryFrom != "" {
				d.putBack(ctx, api, carryFrom, name)
			}
		}()
	}

	labels := map[string]string{}
	for k, v := range spec.Labels {
		labels[k] = v
	}
	for k, v := range req.Labels() {
		labels[k] = v
	}
	var env []string
	for _, k := range sortedKeys(spec.Env) {
		env = append(env, k+"="+spec.Env[k])
	}
	useInit := true
	cfg := &container.Config{
		Image:      spec.Image,
		Cmd:        spec.Command,
		Entrypoint: spec.Entrypoint,
		Env:        env,
		WorkingDir: spec.Workdir,
		User:       spec.User,
		Labels:     labels,
	}
	hostCfg := &container.HostConfig{
		Init:        &useInit,
		NetworkMode: container.NetworkMode(spec.network),
		DNSOptions:  gateway.DNSOptions,
		Resources:   container.Resources{NanoCPUs: spec.nanoCPUs},
	}
	if hc := spec.Healthcheck; hc != nil {
		// Exec form: the command runs without a shell, as the
		// workload's own command does.
		cfg.Healthcheck = &container.HealthConfig{
			Test:        append([]string{"CMD"}, hc.Command...),
			Interval:    hc.Interval,
			Timeout:     hc.Timeout,
			StartPeriod: hc.StartPeriod,
			Retries:     hc.Retries,
		}
	}
	if spec.Memory > 0 {
		// No swap beyond the limit: memory means what it says.
		hostCfg.Memory, hostCfg.MemorySwap = spec.Memory, spec.Memory
	}
	if spec.Pids > 0 {
		hostCfg.PidsLimit = &spec.Pids
	}
	netCfg := &network.NetworkingConfig{
		EndpointsConfig: map[string]*network.EndpointSettings{spec.network: {}},
	}
	if err := wireContainer(req, spec.network, cfg, hostCfg, netCfg); err != nil {
		return fail("%v", err)
	}
	withCreds, err := wireCredentials(req, cfg)
	if err != nil {
		return fail("%v", err)
	}

	// Created straight away, as docker run does: no look for the image
	// or the name first (two engine calls per workload, issue 28). A
	// container of this name left by a crash between create and record is
	// our own, and createNamed removes it and creates again; anyone else's
	// is theirs. An image the engine lacks is pulled, and the create made
	// again, once.
	ensured := false
	created, err := d.createNamed(ctx, api, req.Lineage, addr, name, func() (container.CreateResponse, error) {
		created, err := api.ContainerCreate(ctx, cfg, hostCfg, netCfg, nil, name)
		if !cerrdefs.IsNotFound(err) || ensured {
			return created, err
		}
		ensured = true
		if _, ierr := d.ensureImage(ctx, api, addr, spec.Image, spec.built); ierr != nil {
			return created, ierr
		}
		return api.ContainerCreate(ctx, cfg, hostCfg, netCfg, nil, name)
	})
	if err != nil {
		return fail("%v", err)
	}
	for _, w := range created.Warnings {
		d.log.Warn("engine warning", "addr", addr, "warning", w)
	}
	if withCreds {
		if err := d.copyCA(ctx, api, created.ID, req); err != nil {
			if rmErr := api.ContainerRemove(context.WithoutCancel(ctx), created.ID, container.RemoveOptions{Force: true}); rmErr != nil {
				d.log.Warn("could not remove the container the CA could not be copied into", "addr", addr, "id", shortID(created.ID), "error", rmErr)
			}
			return fail("%v", err)
		}
	}
	var notes []string
	if req.Carry != nil {
		if err := d.carryWorkspace(ctx, api, req, carryFrom, created.ID); err != nil {
			if rmErr := api.ContainerRemove(context.WithoutCancel(ctx), created.ID, container.RemoveOptions{Force: true}); rmErr != nil {
				d.log.Warn("could not remove the container the workspace could not be carried into", "addr", addr, "id", shortID(created.ID), "error", rmErr)
			}
			return fail("carrying the workspace over: %v", err)
		}
		from := "snapshot image " + req.Carry.Image
		if carryFrom != "" {
			from = "the replaced container " + shortID(carryFrom)
		}
		notes = append(notes, fmt.Sprintf("carried %s over from %s", strings.Join(req.Carry.Paths, ", "), from))
	}
	startCall := time.Now()
	if err := api.ContainerStart(ctx, created.ID, container.StartOptions{}); err != nil {
		// Leave nothing unrecorded behind when the start fails.
		if rmErr := api.ContainerRemove(context.WithoutCancel(ctx), created.ID, container.RemoveOptions{Force: true}); rmErr != nil {
			d.log.Warn("could not remove the container that failed to start", "addr", addr, "id", shortID(created.ID), "error", rmErr)
		}
		return drivers.ApplyResponse{}, fmt.Errorf("starting container %s for %s: %w", name, addr, err)
	}
	d.markStarted(created.ID, startCall)
	carryFrom = "" // set aside for good: the delete that follows removes it
	d.log.Info("created container", "addr", addr, "name", name, "id", shortID(created.ID), "image", spec.Image)
	resp, err := d.containerResponse(ctx, api, addr, created.ID, spec.network)
	resp.Notes = append(resp.Notes, notes...)
	return resp, err
}

// containerResponse inspects a container for its computed values.
func (d *Driver) containerResponse(ctx context.Context, api dockerAPI, addr, id, netName string) (drivers.ApplyResponse, error) {
	info, err := api.ContainerInspect(ctx, id)
	if err != nil {
		return drivers.ApplyResponse{}, fmt.Errorf("inspecting container %s of %s: %w", shortID(id), addr, err)
	}
	d.markLooked(info)
	name := trimSlash(info.Name)
	ip := ""
	if info.NetworkSettings != nil {
		if netName == "" && info.HostConfig != nil {
			netName = string(info.HostConfig.NetworkMode)
		}
		if ep := info.NetworkSettings.Networks[netName]; ep != nil {
			ip = ep.IPAddress
		}
	}
	return drivers.ApplyResponse{ID: info.ID, Computed: map[string]string{"name": name, "ip": ip}}, nil
}

func (d *Driver) startContainer(ctx context.Context, api dockerAPI, req drivers.ApplyRequest) (drivers.ApplyResponse, error) {
	addr := req.Object.Addr
	id, err := containerRef(req)
	if err != nil {
		return drivers.ApplyResponse{}, fmt.Errorf("starting container of %s: %w", addr, err)
	}
	startCall := time.Now()
	if err := api.ContainerStart(ctx, id, container.StartOptions{}); err != nil {
		if staleTask(err) && len(req.Object.Attrs) > 0 {
			return d.replaceUnstartable(ctx, api, req, id, err)
		}
		return drivers.ApplyResponse{}, fmt.Errorf("starting container %s of %s: %w", shortID(id), addr, err)
	}
	d.markStarted(id, startCall)
	d.log.Info("started container", "addr", addr, "id", shortID(id))
	return d.containerResponse(ctx, api, addr, id, "")
}

// updateContainer changes cpus and memory in place. The engine cannot
// remove a limit, so a limit removed from the config is raised to the
// engine's whole capacity instead.
func (d *Driver) updateContainer(ctx context.Context, api dockerAPI, req drivers.ApplyRequest) (drivers.ApplyResponse, error) {
	addr := req.Object.Addr
	id, err := containerRef(req)
	if err != nil {
		return drivers.ApplyResponse{}, fmt.Errorf("updating container of %s: %w", addr, err)
	}
	fail := func(format string, args ...any) (drivers.ApplyResponse, error) {
		return drivers.ApplyResponse{}, fmt.Errorf("updating container %s of %s: %s", shortID(id), addr, fmt.Sprintf(format, args...))
	}
	nanoCPUs, memory, err := decodeLimits(req.Object)
	if err != nil {
		return fail("%v", err)
	}
	cur, err := api.ContainerInspect(ctx, id)
	if err != nil {
		return fail("inspecting: %v", err)
	}
	pids, err := drivers.Int(req.Object.Attr("pids"))
	if err != nil {
		return fail("pids: %v", err)
	}
	var curCPUs, curMem, curPids int64
	if cur.HostConfig != nil {
		curCPUs, curMem = cur.HostConfig.NanoCPUs, cur.HostConfig.Memory
		if cur.HostConfig.PidsLimit != nil {
			curPids = *cur.HostConfig.PidsLimit
		}
	}
	if (nanoCPUs == 0 && curCPUs != 0) || (memory == 0 && curMem != 0) {
		info, err := api.Info(ctx)
		if err != nil {
			return fail("reading the engine's capacity to lift a limit: %v", err)
		}
		if nanoCPUs == 0 && curCPUs != 0 {
			nanoCPUs = int64(info.NCPU) * 1e9
		}
		if memory == 0 && curMem != 0 {
			memory = info.MemTotal
		}
	}
	res := container.Resources{NanoCPUs: nanoCPUs}
	if memory > 0 {
		res.Memory, res.MemorySwap = memory, memory
	}
	switch {
	case pids > 0:
		res.PidsLimit = &pids
	case curPids > 0:
		// -1 lifts the limit; nil (0 before API 1.41) leaves it as it is.
		unlimited := int64(-1)
		res.PidsLimit = &unlimited
	}
	upd, err := api.ContainerUpdate(ctx, id, container.UpdateConfig{Resources: res})
	if err != nil {
		return fail("%v", err)
	}
	for _, w := range upd.Warnings {
		d.log.Warn("engine warning", "addr", addr, "warning", w)
	}
	d.log.Info("updated container", "addr", addr, "id", shortID(id), "nano_cpus", nanoCPUs, "memory", memory, "pids", pids)
	return d.containerResponse(ctx, api, addr, id, "")
}

func (d *Driver) deleteContainer(ctx context.Context, api dockerAPI, req drivers.ApplyRequest) (drivers.ApplyResponse, error) {
	addr := req.Object.Addr
	id := req.ID
	if id == "" {
		// Nothing recorded: find ours by name, and touch it only if the
		// lineage label says it is ours.
		name, err := engine.ObjectName(req.Lineage, req.NamedAddr(addr), kindContainer)
		if err != nil {
			return drivers.ApplyResponse{}, fmt.Errorf("deleting container of %s: %w", addr, err)
		}
		info, err := api.ContainerInspect(ctx, name)
		if cerrdefs.IsNotFound(err) {
			return drivers.ApplyResponse{}, nil
		}
		if err != nil {
			return drivers.ApplyResponse{}, fmt.Errorf("deleting container %s of %s: %w", name, addr, err)
		}
		if info.Config == nil || info.Config.Labels[drivers.LabelLineage] != req.Lineage {
			return drivers.ApplyResponse{}, fmt.Errorf("deleting container %s of %s: it does not belong to this state (lineage %s)", name, addr, req.Lineage)
		}
		id = info.ID
	}
	// A removal asked for by a process that was killed goes on inside the
	// engine: removeContainer waits for it rather than fail.
	if err := d.removeContainer(ctx, api, id); err != nil {
		return drivers.ApplyResponse{}, fmt.Errorf("deleting container %s of %s: %w", shortID(id), addr, err)
	}
	d.log.Info("deleted container", "addr", addr, "id", shortID(id))
	return drivers.ApplyResponse{}, nil
}

// containerRef is the container to operate on: the recorded id, else the
// name this lineage gives the address.
func containerRef(req drivers.ApplyRequest) (string, error) {
	if req.ID != "" {
		return req.ID, nil
	}
	return engine.ObjectName(req.Lineage, req.NamedAddr(req.Object.Addr), kindContainer)
}

// waitGone polls until a container being removed is gone (returning the
// engine's not-found error), for at most a minute.
func waitGone(ctx context.Context, api dockerAPI, id string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		_, err := api.ContainerInspect(ctx, id)
		if err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for the removal already in progress: %w", ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// staleTask reports a start the engine refuses because containerd still
// holds a task for the container: an engine killed while the start was in
// flight leaves one, and every later start of that container fails the
// same way ("task ... already exists", "id already in use", or, when the
// task's bundle directory outlived it, "failed to start shim: mkdir
// .../io.containerd.runtime.v2.task/moby/<id>: file exists").
func staleTask(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "id already in use") || strings.Contains(msg, "task") && strings.Contains(msg, "already exists") ||
		// The containerd bundle directory of the task survived the crash.
		strings.Contains(msg, "failed to start shim") && strings.Contains(msg, "file exists")
}

// replaceUnstartable replaces a container that can never be started (see
// staleTask) by a new one made from the same object: create removes the
// old one of the name first. The apply says so.
func (d *Driver) replaceUnstartable(ctx context.Context, api dockerAPI, req drivers.ApplyRequest, id string, startErr error) (drivers.ApplyResponse, error) {
	addr := req.Object.Addr
	d.log.Warn("the container cannot be started (a task of it survived an engine crash); replacing it", "addr", addr, "id", shortID(id), "error", startErr)
	var resp drivers.ApplyResponse
	var err error
	if req.Object.Kind == gateway.Kind {
		_, pool, perr := d.engine(ctx)
		if perr != nil {
			return resp, perr
		}
		resp, err = d.createGateway(ctx, api, pool, req)
	} else {
		resp, err = d.createContainer(ctx, api, req)
	}
	if err != nil {
		return resp, fmt.Errorf("starting container %s of %s: %v; replacing it: %w", shortID(id), addr, startErr, err)
	}
	resp.Notes = append(resp.Notes, fmt.Sprintf("container %s could not be started (a task of it survived an engine crash): replaced by %s", shortID(id), shortID(resp.ID)))
	return resp, nil
}
