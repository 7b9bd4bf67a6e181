package swarm

import (
	"fmt"

	"github.com/docker/docker/api/types/swarm"

	"github.com/bottlefile/bottlefile/drivers"
)

// The cluster starts a new task of a service by itself when the node of
// its task goes down or is drained, or when the task fails: the new task
// runs from the service's image, without what the old one wrote. Read
// reports the running task as the workload's instance
// (drivers.LiveObject.Instance), and a service create or start records the
// task it started (drivers.ComputedInstance), so the planner tells a task
// the cluster started from one bottlefile did, and says why the cluster
// did (restartFacts).

// restartFacts fills in a service's running task as its instance and, when
// an earlier task of it is listed, why the cluster replaced that one.
func restartFacts(o *drivers.LiveObject, tasks []swarm.Task, nodes []swarm.Node) {
	t, ok := currentTask(tasks)
	// A task the cluster wants running is the instance even while it is
	// being started: the one it replaced is gone with what it wrote,
	// whether or not its node came back (the engine of a node that comes
	// back does not start the old task's container again).
	if !ok || !wanted(t) {
		return
	}
	o.Instance = t.ID
	var prev *swarm.Task
	for i := range tasks {
		p := &tasks[i]
		if p.ID == t.ID || p.Slot != t.Slot || !p.Meta.CreatedAt.Before(t.Meta.CreatedAt) {
			continue
		}
		if prev == nil || p.Meta.CreatedAt.After(prev.Meta.CreatedAt) {
			prev = p
		}
	}
	if prev != nil {
		o.Restarted = replacedWhy(*prev, nodes)
	}
}

// replacedWhy says why the cluster replaced a task: its node is down or
// drained, or it failed.
func replacedWhy(prev swarm.Task, nodes []swarm.Node) string {
	name := prev.NodeID
	for _, n := range nodes {
		if n.ID != prev.NodeID {
			continue
		}
		name = n.Description.Hostname
		switch {
		case n.Status.State == swarm.NodeStateDown || n.Status.State == swarm.NodeStateDisconnected:
			return fmt.Sprintf("node %s is %s", name, n.Status.State)
		case n.Spec.Availability == swarm.NodeAvailabilityDrain:
			return fmt.Sprintf("node %s was drained", name)
		}
	}
	if name == "" {
		return ""
	}
	if _, gone := nodeOf(prev.NodeID, nodes); !gone && prev.NodeID != "" {
		return fmt.Sprintf("node %s left the cluster", name)
	}
	switch prev.Status.State {
	case swarm.TaskStateFailed, swarm.TaskStateRejected:
		why := fmt.Sprintf("its task on node %s failed", name)
		if p := taskProblem(prev); p != "" {
			why += ": " + p
		}
		return why
	}
	return fmt.Sprintf("its task on node %s ended (%s)", name, prev.Status.State)
}

func nodeOf(id string, nodes []swarm.Node) (swarm.Node, bool) {
	for _, n := range nodes {
		if n.ID == id {
			return n, true
		}
	}
	return swarm.Node{}, false
}
