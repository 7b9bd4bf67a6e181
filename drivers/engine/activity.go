package engine

import (
	"time"

	"github.com/bottlefile/bottlefile/drivers"
)

// Activity on one engine (issue 31). The engine driver reads, of each
// container it is given, what drivers.Activity is made of (a gateway's
// activity stamp, a workload's open exec sessions and CPU since the last
// look); a driver running bottles on several engines (swarm) asks each
// node's engine about the task containers it runs, and merges the uses
// of an agent's containers, wherever they run, with Merge, as the engine
// driver merges those it lists itself.

// Watched is one running container an activity look reads: an agent's or
// a sidecar's workload, or with Gateway the agent's gateway.
type Watched struct {
	Agent   string // the agent it belongs to, "agent.NAME"
	ID      string // the container's id on the engine
	Gateway bool
	// IdleSince is its agent's drivers.ActivityRequest.IdleSince (zero:
	// read in full). Only the uses of the containers given together are
	// weighed before the CPU is skipped: an agent's gateway on another
	// engine does not spare its workload's CPU.
	IdleSince time.Time
}

// Use is what a look saw of one container.
type Use struct {
	Agent   string
	Gateway bool
	// Last is when it was last seen in use: a gateway's last request, a
	// workload's start, an open session, CPU at or above the threshold,
	// a bottlefile exec session's end; zero when none is known.
	Last time.Time
	Busy bool // an exec session is open in it, or its CPU is above the threshold
	// Unknown: the look could not tell (a gateway without a stamp, an
	// engine that failed to answer): its agent's LastActive is zero.
	Unknown bool
}

// Merge is, per agent, the Activity of its containers' uses: the latest
// Last, busy when one is. An agent one of whose containers could not be
// told about has a zero LastActive (never idle); one with a gateway and
// no workload (its workloads are gone) is left out: nothing to be idle.
func Merge(uses []Use) map[string]drivers.Activity {
	out := map[string]drivers.Activity{}
	workloads := map[string]bool{}
	unknown := map[string]bool{}
	for _, u := range uses {
		if !u.Gateway {
			workloads[u.Agent] = true
		}
		a := out[u.Agent]
		if u.Last.After(a.LastActive) {
			a.LastActive = u.Last
		}
		a.Busy = a.Busy || u.Busy
		unknown[u.Agent] = unknown[u.Agent] || u.Unknown
		out[u.Agent] = a
	}
	for agent, a := range out {
		switch {
		case !workloads[agent]:
			delete(out, agent)
		case unknown[agent]:
			a.LastActive = time.Time{}
			out[agent] = a
		}
	}
	return out
}
