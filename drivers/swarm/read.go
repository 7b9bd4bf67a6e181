package swarm

import (
	"context"
	"fmt"
	"strings"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/swarm"

	"github.com/bottlefile/bottlefile/drivers"
)

func (d *Driver) read(ctx context.Context, req drivers.ReadRequest) (drivers.ReadResponse, error) {
	var resp drivers.ReadResponse
	if req.Lineage == "" {
		return resp, nil
	}
	api, err := d.manager(ctx)
	if err != nil {
		return resp, err
	}
	f := byLineage(req.Lineage)

	services, err := api.ServiceList(ctx, swarm.ServiceListOptions{Filters: f})
	if err != nil {
		return resp, fmt.Errorf("listing services of lineage %s: %w", req.Lineage, err)
	}
	tasks := map[string][]swarm.Task{}
	if len(services) > 0 {
		tf := filters.NewArgs()
		for _, s := range services {
			tf.Add("service", s.ID)
		}
		list, err := api.TaskList(ctx, swarm.TaskListOptions{Filters: tf})
		if err != nil {
			return resp, fmt.Errorf("listing the tasks of lineage %s: %w", req.Lineage, err)
		}
		for _, t := range list {
			tasks[t.ServiceID] = append(tasks[t.ServiceID], t)
		}
	}
	nodes := map[string]string{}
	var nodeList []swarm.Node
	if len(services) > 0 {
		list, err := api.NodeList(ctx, swarm.NodeListOptions{})
		if err != nil {
			return resp, fmt.Errorf("listing nodes: %w", err)
		}
		nodeList = list
		for _, n := range list {
			nodes[n.ID] = n.Description.Hostname
		}
	}
	for _, s := range services {
		kind := kindService
		if s.Spec.Labels[labelKind] == kindGateway {
			kind = kindGateway
		}
		o, ok := d.live(s.Spec.Labels, kind, s.ID, s.Spec.Name)
		if !ok {
			continue
		}
		serviceFacts(&o, s, tasks[s.ID], nodes)
		if cs := s.Spec.TaskTemplate.ContainerSpec; cs != nil {
			// The image its tasks run (ref@digest): retention and
			// snapshot rm read which snapshot a service runs from it.
			o.ImageID = cs.Image
		}
		o.Drift = drift(s.Spec)
		if kind == kindService {
			restartFacts(&o, tasks[s.ID], nodeList) // restart.go
		}
		resp.Objects = append(resp.Objects, o)
	}

	networks, err := api.NetworkList(ctx, network.ListOptions{Filters: f})
	if err != nil {
		return resp, fmt.Errorf("listing networks of lineage %s: %w", req.Lineage, err)
	}
	for _, n := range networks {
		if n.Scope != "swarm" {
			continue // a node's copy of an overlay is listed as the overlay
		}
		if o, ok := d.live(n.Labels, kindNetwork, n.ID, n.Name); ok {
			resp.Objects = append(resp.Objects, o)
		}
	}

	images, err := api.ImageList(ctx, image.ListOptions{Filters: f})
	if err != nil {
		return resp, fmt.Errorf("listing images of lineage %s: %w", req.Lineage, err)
	}
	_, registry, _, _ := d.settings()
	for _, img := range images {
		if len(img.RepoTags) == 0 {
			continue
		}
		if o, ok := d.live(img.Labels, kindImage, img.ID, img.RepoTags[0]); ok {
			// A build whose push failed (or was cut off) is on the
			// manager only, where no other node's task can pull it: it
			// is not done, and is made again rather than adopted.
			o.Unfinished = registry != "" && !pushed(img.RepoDigests, registry)
			resp.Objects = append(resp.Objects, o)
		}
	}
	snaps, err := d.readSnapshots(ctx, api, req.Lineage)
	if err != nil {
		return resp, err
	}
	resp.Objects = append(resp.Objects, snaps...)
	copies, err := d.readCopies(ctx, api, req.Lineage) // nodecopy.go
	if err != nil {
		return resp, fmt.Errorf("listing what nodes kept of lineage %s: %w", req.Lineage, err)
	}
	resp.Objects = append(resp.Objects, copies...)
	drivers.SortLive(resp.Objects)
	return resp, nil
}

// pushed reports whether an image's repository digests name one in the
// registry: the engine records one when a push of it completes.
func pushed(repoDigests []string, registry string) bool {
	for _, rd := range repoDigests {
		if strings.HasPrefix(rd, registry+"/") && strings.Contains(rd, "@sha256:") {
			return true
		}
	}
	return false
}

func (d *Driver) live(labels map[string]string, kind, id, name string) (drivers.LiveObject, bool) {
	return drivers.Labelled(d.log, labels, kind, id, name)
}

// serviceFacts fills a service's state from its tasks: the task the
// cluster wants running (else the newest), as the docker driver reports a
// container: "running"; "created" while it is being placed or started;
// "exited" with its code once it ended. A service scaled to no replicas
// outside bottlefile reads as stopped.
func serviceFacts(o *drivers.LiveObject, s swarm.Service, tasks []swarm.Task, nodes map[string]string) {
	o.Created = s.CreatedAt.UTC()
	if s.Spec.Mode.Replicated != nil && s.Spec.Mode.Replicated.Replicas != nil && *s.Spec.Mode.Replicated.Replicas == 0 {
		o.State = drivers.StateExited
		o.Exit = &drivers.Exit{Stopped: true}
		return
	}
	t, ok := currentTask(tasks)
	if !ok {
		o.State = drivers.StateCreated
		return
	}
	o.Node = nodes[t.NodeID]
	switch t.Status.State {
	case swarm.TaskStateRunning:
		o.Running = true
		o.State = drivers.StateRunning
		o.Started = t.Status.Timestamp.UTC()
	case swarm.TaskStateComplete, swarm.TaskStateFailed, swarm.TaskStateShutdown, swarm.TaskStateRejected, swarm.TaskStateOrphaned, swarm.TaskStateRemove:
		o.State = drivers.StateExited
		o.Finished = t.Status.Timestamp.UTC()
		if cs := t.Status.ContainerStatus; cs != nil {
			o.ExitCode = cs.ExitCode
		}
		// Never "stopped by someone": a one-replica service's task is
		// stopped by scaling it to none (above); any other end is the
		// task's own or the cluster's (its node went down or came back).
		o.Exit = &drivers.Exit{Code: o.ExitCode, At: o.Finished, Error: taskProblem(t)}
	default:
		o.State = drivers.StateCreated
	}
}

// currentTask is the task the cluster wants running (a running one
// first, when it was scaled to several), else the newest one.
func currentTask(tasks []swarm.Task) (swarm.Task, bool) {
	rank := func(t swarm.Task) int {
		switch {
		case t.DesiredState == swarm.TaskStateRunning && t.Status.State == swarm.TaskStateRunning:
			return 2
		case wanted(t):
			return 1
		}
		return 0
	}
	var best swarm.Task
	found := false
	for _, t := range tasks {
		switch {
		case !found:
			best, found = t, true
		case rank(t) != rank(best):
			if rank(t) > rank(best) {
				best = t
			}
		case t.Meta.CreatedAt.After(best.Meta.CreatedAt):
			best = t
		}
	}
	return best, found
}

// wanted reports whether the cluster wants a task running: now, or once
// its restart delay is over (a task replacing a failed one is made
// wanting "ready", and wants "running" after the delay).
func wanted(t swarm.Task) bool {
	return t.DesiredState == swarm.TaskStateRunning || t.DesiredState == swarm.TaskStateReady
}

// taskProblem says why a task is not running, from what the cluster says
// of it ("no suitable node (scheduling constraints not satisfied on 3
// nodes)", "No such image: ..."); "" when it says nothing.
func taskProblem(t swarm.Task) string {
	msg := strings.TrimSpace(t.Status.Err)
	if msg == "" {
		msg = strings.TrimSpace(t.Status.Message)
	}
	return msg
}
