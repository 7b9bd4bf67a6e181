package drivers

import "context"

// Stopper is implemented by drivers that can stop a workload without
// removing it, keeping what it wrote, so that Apply's OpStart runs it
// again (bottlefile stop, start, restart): docker stops the container,
// swarm scales the service to no replicas, smolvm stops the machine.
// Stopping one that is not running is no error. A driver without it
// cannot stop workloads: the planner refuses a stop on its runtimes.
type Stopper interface {
	StopWorkload(ctx context.Context, req StopRequest) error
}

// StopRequest asks to stop one workload.
type StopRequest struct {
	Lineage string
	// Object is the workload's desired object (Addr and Kind at least).
	Object Object
	// ID is the runtime's id of the workload.
	ID string
	// NameAddr is ApplyRequest.NameAddr: the agent address the engine
	// names of the workload's bottle derive from, when not its own.
	NameAddr string
}
