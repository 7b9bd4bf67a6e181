package swarm

import (
	"context"
	"fmt"
	"io"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/swarm"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/engine"
)

// exec and logs reach a workload's task container on whichever node runs
// it, through that node's engine (node_hosts, nodes.go), as the docker
// driver reaches a container on its engine.

var (
	_ drivers.Execer    = (*Driver)(nil)
	_ drivers.LogReader = (*Driver)(nil)
)

// taskContainer is the container of a service's current task (the one the
// cluster wants running, else the newest), the driver of its node's
// engine, and the node's hostname. With running, a task that is not
// running is an error that says what the cluster says of it.
func (d *Driver) taskContainer(ctx context.Context, obj drivers.LiveObject, running bool) (engine.Driver, string, nodeAt, error) {
	api, err := d.manager(ctx)
	if err != nil {
		return nil, "", nodeAt{}, err
	}
	tasks, err := api.TaskList(ctx, swarm.TaskListOptions{Filters: filters.NewArgs(filters.Arg("service", obj.ID))})
	if err != nil {
		return nil, "", nodeAt{}, d.eng.Unreachable(fmt.Errorf("listing the tasks of %s (service %s): %w", obj.Addr, shortID(obj.ID), err))
	}
	t, ok := currentTask(tasks)
	switch {
	case !ok:
		return nil, "", nodeAt{}, fmt.Errorf("%s has no task", obj.Addr)
	case running && t.Status.State != swarm.TaskStateRunning:
		why := string(t.Status.State)
		if p := taskProblem(t); p != "" {
			why += ": " + p
		}
		return nil, "", nodeAt{}, fmt.Errorf("%s is not running (its task is %s)", obj.Addr, why)
	case t.Status.ContainerStatus == nil || t.Status.ContainerStatus.ContainerID == "":
		return nil, "", nodeAt{}, fmt.Errorf("%s's task has no container yet (it is %s)", obj.Addr, t.Status.State)
	}
	node := t.NodeID
	if nodes, err := api.NodeList(ctx, swarm.NodeListOptions{Filters: filters.NewArgs(filters.Arg("id", t.NodeID))}); err == nil {
		for _, n := range nodes {
			if n.ID == t.NodeID {
				node = n.Description.Hostname
			}
		}
	}
	eng, host, err := d.nodeEngine(ctx, node)
	if err != nil {
		return nil, "", nodeAt{}, err
	}
	return eng, t.Status.ContainerStatus.ContainerID, nodeAt{node, host}, nil
}

// nodeAt is a node's hostname and its engine's address.
type nodeAt struct{ name, host string }

// Exec runs a command in an agent's or a sidecar's running task container,
// through the engine of the node it runs on, as docker exec does.
func (d *Driver) Exec(ctx context.Context, lineage string, obj drivers.LiveObject, req drivers.ExecRequest) (int, error) {
	if obj.Kind != kindService {
		return 0, fmt.Errorf("%s is a swarm %s; commands run in agents and sidecars", obj.Addr, obj.Kind)
	}
	eng, ctr, node, err := d.taskContainer(ctx, obj, true)
	if err != nil {
		return 0, err
	}
	code, err := eng.Exec(ctx, lineage, drivers.LiveObject{Addr: obj.Addr, Kind: engine.KindContainer, ID: ctr}, req)
	if err != nil {
		return code, nodeFailed(node.name, node.host, err)
	}
	return code, nil
}

// Logs copies the log of an agent's, a sidecar's or a gateway's current
// task container (the one running, else the last), read through the
// engine of its node, as the docker driver reads a container's.
func (d *Driver) Logs(ctx context.Context, lineage string, obj drivers.LiveObject, opts drivers.LogOptions, stdout, stderr io.Writer) error {
	if obj.Kind != kindService && obj.Kind != kindGateway {
		return fmt.Errorf("%s is a swarm %s, which keeps no log; agents, sidecars and gateways do", obj.Addr, obj.Kind)
	}
	eng, ctr, node, err := d.taskContainer(ctx, obj, false)
	if err != nil {
		return err
	}
	if err := eng.Logs(ctx, lineage, drivers.LiveObject{Addr: obj.Addr, Kind: engine.KindContainer, ID: ctr}, opts, stdout, stderr); err != nil {
		return nodeFailed(node.name, node.host, err)
	}
	return nil
}
