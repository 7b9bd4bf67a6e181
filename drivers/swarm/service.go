package swarm

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/swarm"

	"github.com/bottlefile/bottlefile/addrs"
	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/gateway"
)

// Settings every agent and sidecar service runs with.
const (
	// stopGrace is how long a task has to stop before it is killed: with
	// an init process it stops at once, and a drain or removal does not
	// wait the cluster's default ten seconds.
	stopGrace = time.Second
	// placeTimeout is how long apply waits for the cluster to place a
	// task no node fits before it fails the apply, naming the
	// constraints.
	placeTimeout = 5 * time.Second
	// runTimeout bounds how long apply waits for a placed task to run:
	// the node may be pulling its image.
	runTimeout = 3 * time.Minute
)

// serviceSpec is a service object's attributes, decoded.
type serviceSpec struct {
	drivers.Workload
	name      string
	network   string // the bottle network's name
	alias     string // a sidecar's name on it
	sidecars  []string
	placement []string
}

func decodeService(req drivers.ApplyRequest, registry string) (serviceSpec, error) {
	o := req.Object
	var s serviceSpec
	var err error
	if s.name, err = serviceName(req.Lineage, req.NamedAddr(o.Addr)); err != nil {
		return s, err
	}
	if s.Workload, err = drivers.DecodeWorkload(drivers.ObjectAttrs(o)); err != nil {
		return s, err
	}
	buildHash, err := drivers.String(o.Attr("build_hash"))
	if err != nil {
		return s, fmt.Errorf("build_hash: %w", err)
	}
	if buildHash != "" {
		if s.Image, err = builtRef(req.Lineage, req.NamedAddr(o.Addr), buildHash, registry); err != nil {
			return s, err
		}
	}
	if req.BootImage != "" {
		s.Image = req.BootImage
	}
	if s.Image == "" {
		return s, errors.New("no image: set image or a build block")
	}
	if s.Entrypoint != nil && len(s.Entrypoint) == 0 {
		s.Entrypoint = []string{""}
	}
	netAddr, err := drivers.String(o.Attr("network"))
	if err != nil {
		return s, fmt.Errorf("network: %w", err)
	}
	if netAddr == "" {
		netAddr = addrs.NetworkOf(o.Addr)
	}
	if s.network, err = networkName(req.Lineage, req.NamedAddr(netAddr)); err != nil {
		return s, fmt.Errorf("network: %w", err)
	}
	if s.alias, err = drivers.String(o.Attr("alias")); err != nil {
		return s, fmt.Errorf("alias: %w", err)
	}
	if s.sidecars, err = drivers.Strings(o.Attr("sidecars")); err != nil {
		return s, fmt.Errorf("sidecars: %w", err)
	}
	if s.placement, err = drivers.Strings(o.Attr("placement")); err != nil {
		return s, fmt.Errorf("placement: %w", err)
	}
	return s, nil
}

// createService makes an agent's or a sidecar's service and waits until
// its task runs. A task the cluster cannot place or start fails the
// create, and the service goes.
func (d *Driver) createService(ctx context.Context, api swarmAPI, req drivers.ApplyRequest) (drivers.ApplyResponse, error) {
	addr := req.Object.Addr
	_, registry, _, _ := d.settings()
	s, err := decodeService(req, registry)
	if err != nil {
		return drivers.ApplyResponse{}, fmt.Errorf("creating service for %s: %w", addr, err)
	}
	fail := func(format string, args ...any) (drivers.ApplyResponse, error) {
		return drivers.ApplyResponse{}, fmt.Errorf("creating service %s for %s: %s", s.name, addr, fmt.Sprintf(format, args...))
	}
	var notes []string
	if req.Carry != nil {
		// Composed before removeStale removes the service it may be
		// carried from (workspace.go).
		base := s.Image
		if s.Image, err = d.carryImage(ctx, api, req, base); err != nil {
			return fail("carrying the workspace over: %v", err)
		}
		from := "snapshot " + req.Carry.Image
		if req.Carry.Workload != "" {
			from = "the replaced service " + shortID(req.Carry.Workload)
		}
		notes = append(notes, fmt.Sprintf("carried %s over from %s into %s", strings.Join(req.Carry.Paths, ", "), from, s.Image))
	}
	if err := d.removeStale(ctx, api, req.Lineage, addr, s.name); err != nil {
		return fail("%v", err)
	}
	gw, err := serviceName(req.Lineage, req.NamedAddr(gateway.Addr(addr)))
	if err != nil {
		return fail("%v", err)
	}
	labels := map[string]string{}
	for k, v := range s.Labels {
		labels[k] = v
	}
	for k, v := range req.Labels() {
		labels[k] = v
	}
	env := proxyEnv(s.Env, gw, s.sidecars)
	nanoCPUs := int64(math.Round(s.CPUs * 1e9))
	spec := serviceBase(s.name, labels, s.placement)
	cs := spec.TaskTemplate.ContainerSpec
	cs.Image = s.Image
	cs.Command = s.Entrypoint
	cs.Args = s.Command
	cs.Env = env
	cs.Dir = s.Workdir
	cs.User = s.User
	cs.CapabilityDrop = []string{"CAP_NET_RAW"}
	cs.DNSConfig = &swarm.DNSConfig{Options: gateway.DNSOptions}
	if nanoCPUs > 0 || s.Memory > 0 || s.Pids > 0 {
		spec.TaskTemplate.Resources = &swarm.ResourceRequirements{Limits: &swarm.Limit{NanoCPUs: nanoCPUs, MemoryBytes: s.Memory, Pids: s.Pids}}
	}
	att := swarm.NetworkAttachmentConfig{Target: s.network}
	if s.alias != "" {
		att.Aliases = []string{s.alias}
	}
	spec.TaskTemplate.Networks = []swarm.NetworkAttachmentConfig{att}
	cs.Image = tagged(cs.Image)
	fingerprint(&spec)

	created, err := api.ServiceCreate(ctx, spec, swarm.ServiceCreateOptions{})
	if err != nil {
		return fail("%v", err)
	}
	for _, w := range created.Warnings {
		d.log.Debug("engine warning", "addr", addr, "warning", w)
	}
	t, err := d.waitRunning(ctx, api, created.ID, s.placement, s.Image, nil, nil)
	if err != nil {
		if rmErr := api.ServiceRemove(context.WithoutCancel(ctx), created.ID); rmErr != nil && !cerrdefs.IsNotFound(rmErr) {
			d.log.Warn("could not remove the service whose task did not run", "addr", addr, "id", shortID(created.ID), "error", rmErr)
		}
		return fail("%v", err)
	}
	d.log.Info("created service", "addr", addr, "name", s.name, "id", shortID(created.ID), "node", t.NodeID)
	resp, err := d.serviceResponse(ctx, api, created.ID, s.name, t)
	resp.Notes = append(resp.Notes, notes...)
	return resp, err
}

// fingerprint labels the service (not its task's container) with the
// fingerprint of its spec, for Read to tell drift.
func fingerprint(spec *swarm.ServiceSpec) {
	labels := make(map[string]string, len(spec.Labels)+1)
	for k, v := range spec.Labels {
		labels[k] = v
	}
	delete(labels, labelSpec)
	spec.Labels = labels
	spec.Labels[labelSpec] = specFingerprint(*spec)
}

// serviceBase is what every service of a bottle is: one replica, names
// resolved round robin (no virtual IP), an init process, a short stop,
// restarted on failure (and moved when its node goes), the labels on the
// service and on its task's container.
func serviceBase(name string, labels map[string]string, placement []string) swarm.ServiceSpec {
	one := uint64(1)
	init := true
	grace := stopGrace
	delay := time.Second
	return swarm.ServiceSpec{
		Annotations: swarm.Annotations{Name: name, Labels: labels},
		Mode:        swarm.ServiceMode{Replicated: &swarm.ReplicatedService{Replicas: &one}},
		TaskTemplate: swarm.TaskSpec{
			ContainerSpec: &swarm.ContainerSpec{
				Labels:          labels,
				Init:            &init,
				StopGracePeriod: &grace,
			},
			RestartPolicy: &swarm.RestartPolicy{Condition: swarm.RestartPolicyConditionOnFailure, Delay: &delay},
			Placement:     &swarm.Placement{Constraints: placement},
		},
		EndpointSpec: &swarm.EndpointSpec{Mode: swarm.ResolutionModeDNSRR},
	}
}

// proxyEnv is a workload's environment with its bottle's proxy settings,
// as the docker driver sets them: a variable the configuration sets
// itself is left as configured.
func proxyEnv(env map[string]string, gw string, sidecars []string) []string {
	var out []string
	for _, k := range sortedKeys(env) {
		out = append(out, k+"="+env[k])
	}
	proxy := fmt.Sprintf("http://%s:%d", gw, gateway.Port)
	noProxy := strings.Join(append([]string{"localhost", "127.0.0.1"}, sidecars...), ",")
	for _, k := range gateway.ProxyVars {
		if _, ok := env[k]; !ok {
			out = append(out, k+"="+proxy)
		}
	}
	for _, k := range gateway.NoProxyVars {
		if _, ok := env[k]; !ok {
			out = append(out, k+"="+noProxy)
		}
	}
	return out
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// waitRunning waits until a task of the service runs, and returns it. A
// task rejected or failed (its image missing on its node, its command not
// found) is an error quoting the cluster; so is one that stays pending for
// placeTimeout because no node fits, naming the constraints. Tasks in
// before (those listed before an update or a start) are not looked at,
// nor, when is is not nil, tasks it refuses.
func (d *Driver) waitRunning(ctx context.Context, api swarmAPI, id string, placement []string, image string, before map[string]bool, is func(swarm.Task) bool) (swarm.Task, error) {
	f := filters.NewArgs(filters.Arg("service", id))
	start := time.Now()
	var pendingSince time.Time
	last := ""
	for {
		tasks, err := api.TaskList(ctx, swarm.TaskListOptions{Filters: f})
		if err != nil {
			return swarm.Task{}, fmt.Errorf("listing its tasks: %w", err)
		}
		tasks = slices.DeleteFunc(tasks, func(t swarm.Task) bool { return before[t.ID] || (is != nil && !is(t)) })
		var failed *swarm.Task
		for i, t := range tasks {
			switch t.Status.State {
			case swarm.TaskStateRunning:
				if t.DesiredState == swarm.TaskStateRunning {
					return t, nil
				}
			case swarm.TaskStateRejected, swarm.TaskStateFailed, swarm.TaskStateComplete:
				if failed == nil || t.Meta.CreatedAt.After(failed.Meta.CreatedAt) {
					failed = &tasks[i]
				}
			}
		}
		if failed != nil {
			if failed.Status.State == swarm.TaskStateComplete {
				return *failed, errors.New("its task ran and ended at once: a workload must keep running")
			}
			code := ""
			if cs := failed.Status.ContainerStatus; cs != nil && cs.ExitCode != 0 {
				code = fmt.Sprintf(" (exit code %d)", cs.ExitCode)
			}
			return *failed, fmt.Errorf("its task could not run: %s%s%s", taskProblem(*failed), code, imageHint(taskProblem(*failed), image))
		}
		t, ok := currentTask(tasks)
		if ok {
			last = fmt.Sprintf("%s: %s", t.Status.State, taskProblem(t))
			if t.Status.State == swarm.TaskStatePending {
				if pendingSince.IsZero() {
					pendingSince = time.Now()
				}
				if time.Since(pendingSince) > placeTimeout {
					return t, fmt.Errorf("no node can run its task: %s%s", taskProblem(t), placementHint(placement))
				}
			} else {
				pendingSince = time.Time{}
			}
		}
		if time.Since(start) > runTimeout {
			return t, fmt.Errorf("its task did not run within %v (last: %s)", runTimeout, last)
		}
		select {
		case <-ctx.Done():
			return t, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// taskIDs are the service's tasks now, for waitRunning to pass over after
// an update.
func taskIDs(ctx context.Context, api swarmAPI, id string) (map[string]bool, error) {
	tasks, err := api.TaskList(ctx, swarm.TaskListOptions{Filters: filters.NewArgs(filters.Arg("service", id))})
	if err != nil {
		return nil, fmt.Errorf("listing its tasks: %w", err)
	}
	out := make(map[string]bool, len(tasks))
	for _, t := range tasks {
		out[t.ID] = true
	}
	return out, nil
}

func placementHint(placement []string) string {
	if len(placement) == 0 {
		return ""
	}
	return fmt.Sprintf("; its placement is %s, which no node that is ready and active matches (docker node ls and docker node inspect show the nodes' labels)", strings.Join(quoteAll(placement), ", "))
}

func imageHint(problem, image string) string {
	if strings.Contains(strings.ToLower(problem), "no such image") || strings.Contains(problem, "pull") {
		return fmt.Sprintf(" (the node the task was placed on has no image %s and could not pull it: push it to a registry every node pulls from, as bottlefile does with what it builds when the runtime sets registry, or load it on every node)", image)
	}
	return ""
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = fmt.Sprintf("%q", s)
	}
	return out
}

// serviceResponse reports a service's computed values: its name and the
// node its task runs on.
func (d *Driver) serviceResponse(ctx context.Context, api swarmAPI, id, name string, t swarm.Task) (drivers.ApplyResponse, error) {
	node := t.NodeID
	if nodes, err := api.NodeList(ctx, swarm.NodeListOptions{Filters: filters.NewArgs(filters.Arg("id", t.NodeID))}); err == nil {
		for _, n := range nodes {
			if n.ID == t.NodeID {
				node = n.Description.Hostname
			}
		}
	}
	return drivers.ApplyResponse{ID: id, Computed: map[string]string{"name": name, drivers.ComputedNode: node, drivers.ComputedInstance: t.ID}}, nil
}

// removeStale removes a service of this lineage made for addr under name
// by an apply that crashed before recording it. One of that name that is
// anyone else's, or another object's, is refused.
func (d *Driver) removeStale(ctx context.Context, api swarmAPI, lineage, addr, name string) error {
	old, _, err := api.ServiceInspectWithRaw(ctx, name, swarm.ServiceInspectOptions{})
	if cerrdefs.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("checking for an existing service: %w", err)
	}
	if old.Spec.Labels[drivers.LabelLineage] != lineage || old.Spec.Labels[drivers.LabelAddress] != addr {
		return fmt.Errorf("a service named %s already exists and is not this state's %s (lineage %s); remove or rename it", name, addr, lineage)
	}
	d.log.Info("removing the service of this lineage by this name before creating it again (one replaced, or left by an earlier run)", "addr", addr, "name", name, "id", shortID(old.ID))
	copies := copiesOf(ctx, api, old.ID)
	if err := api.ServiceRemove(ctx, old.ID); err != nil && !cerrdefs.IsNotFound(err) {
		return fmt.Errorf("removing the unrecorded service %s left by an earlier run: %w", shortID(old.ID), err)
	}
	if err := waitTasksGone(ctx, api, old.ID); err != nil {
		d.log.Warn("the tasks of a removed service linger", "addr", addr, "id", shortID(old.ID), "error", err)
	}
	// Its containers gone from their nodes too (bounded), so that the
	// delete of the image it ran, which follows a replace, finds none
	// using it. The image stays: the new service may run the same.
	for _, node := range copies.nodes {
		if d.reaches(ctx, node) {
			if err := d.removeCopyOn(ctx, lineage, nodeCopy{Node: node, Service: old.ID}, false); err != nil {
				d.log.Info("the containers of a removed service linger on a node", "node", node, "error", err)
			}
		}
	}
	d.deleteCarried(ctx, lineage, old) // workspace.go
	return nil
}

// startService brings back a service that is not running: one scaled to
// no replicas outside bottlefile gets its replica back; one whose task
// ended gets a new task (a forced update). Its ID stays.
func (d *Driver) startService(ctx context.Context, api swarmAPI, req drivers.ApplyRequest) (drivers.ApplyResponse, error) {
	addr := req.Object.Addr
	ref := req.ID
	if ref == "" {
		name, err := serviceName(req.Lineage, req.NamedAddr(addr))
		if err != nil {
			return drivers.ApplyResponse{}, fmt.Errorf("starting service of %s: %w", addr, err)
		}
		ref = name
	}
	fail := func(format string, args ...any) (drivers.ApplyResponse, error) {
		return drivers.ApplyResponse{}, fmt.Errorf("starting service %s of %s: %s", shortID(ref), addr, fmt.Sprintf(format, args...))
	}
	// The tasks before the update are read first: those the update
	// starts are the new ones.
	pre, _, err := api.ServiceInspectWithRaw(ctx, ref, swarm.ServiceInspectOptions{})
	if err != nil {
		return fail("%v", err)
	}
	before, err := taskIDs(ctx, api, pre.ID)
	if err != nil {
		return fail("%v", err)
	}
	one := uint64(1)
	svc, err := updateService(ctx, api, pre.ID, func(spec *swarm.ServiceSpec) {
		if r := spec.Mode.Replicated; r != nil && (r.Replicas == nil || *r.Replicas != 1) {
			r.Replicas = &one
		} else {
			spec.TaskTemplate.ForceUpdate++
		}
	})
	if err != nil {
		return fail("%v", err)
	}
	spec := svc.Spec
	var placement []string
	if spec.TaskTemplate.Placement != nil {
		placement = spec.TaskTemplate.Placement.Constraints
	}
	t, err := d.waitRunning(ctx, api, svc.ID, placement, spec.TaskTemplate.ContainerSpec.Image, before, nil)
	if err != nil {
		return fail("%v", err)
	}
	d.log.Info("started service", "addr", addr, "id", shortID(svc.ID))
	return d.serviceResponse(ctx, api, svc.ID, svc.Spec.Name, t)
}

// deleteService removes a service and waits until its task's container is
// gone from its node, so that what the bottle's network and images are
// deleted after finds nothing of it.
func (d *Driver) deleteService(ctx context.Context, api swarmAPI, req drivers.ApplyRequest) (drivers.ApplyResponse, error) {
	addr := req.Object.Addr
	id := req.ID
	if id == "" {
		name, err := serviceName(req.Lineage, req.NamedAddr(addr))
		if err != nil {
			return drivers.ApplyResponse{}, fmt.Errorf("deleting service of %s: %w", addr, err)
		}
		svc, _, err := api.ServiceInspectWithRaw(ctx, name, swarm.ServiceInspectOptions{})
		if cerrdefs.IsNotFound(err) {
			return drivers.ApplyResponse{}, nil
		}
		if err != nil {
			return drivers.ApplyResponse{}, fmt.Errorf("deleting service %s of %s: %w", name, addr, err)
		}
		if svc.Spec.Labels[drivers.LabelLineage] != req.Lineage {
			return drivers.ApplyResponse{}, fmt.Errorf("deleting service %s of %s: it does not belong to this state (lineage %s)", name, addr, req.Lineage)
		}
		id = svc.ID
	}
	copies := copiesOf(ctx, api, id)
	d.recordCopies(ctx, api, req.Lineage, addr, copies) // nodecopy.go
	svc, _, inspectErr := api.ServiceInspectWithRaw(ctx, id, swarm.ServiceInspectOptions{})
	if err := api.ServiceRemove(ctx, id); err != nil {
		if cerrdefs.IsNotFound(err) {
			return drivers.ApplyResponse{}, nil
		}
		return drivers.ApplyResponse{}, fmt.Errorf("deleting service %s of %s: %w", shortID(id), addr, err)
	}
	if err := waitTasksGone(ctx, api, id); err != nil {
		d.log.Warn("the tasks of a removed service linger", "addr", addr, "id", shortID(id), "error", err)
	}
	d.removeCopiesOf(ctx, api, req.Lineage, copies) // nodes.go
	if inspectErr == nil {
		d.deleteCarried(ctx, req.Lineage, svc) // workspace.go
	}
	d.log.Info("deleted service", "addr", addr, "id", shortID(id))
	return drivers.ApplyResponse{}, nil
}

// tasksGone bounds how long a delete waits for a removed service's tasks.
const tasksGone = 30 * time.Second

// waitTasksGone waits until the cluster lists no task of a removed
// service: its containers have been removed from their nodes.
func waitTasksGone(ctx context.Context, api swarmAPI, id string) error {
	deadline := time.Now().Add(tasksGone)
	f := filters.NewArgs(filters.Arg("service", id))
	for {
		tasks, err := api.TaskList(ctx, swarm.TaskListOptions{Filters: f})
		if err != nil || len(tasks) == 0 {
			return nil // the service is gone, and its tasks with it
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d tasks still listed after %v", len(tasks), tasksGone)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
