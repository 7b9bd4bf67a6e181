package drivers

import (
	"context"
	"fmt"
	"time"
)

// ActivityReader reports how recently each agent of a lineage was used.
type ActivityReader interface {
	Activity(ctx context.Context, req ActivityRequest) (map[string]Activity, error) // keyed by agent address "agent.NAME" (instance addresses included)
}

// ActivityRequest asks about the agents of one lineage. An agent the
// runtime runs nothing of (never applied, removed, archived) is left out
// of the answer.
type ActivityRequest struct {
	Lineage string
	Agents  []string
	// IdleSince, per agent, is how far back its use matters to the
	// caller: it acts only on an agent unused since then (its idle
	// policy's now less stop_after). A reader may then skip what is
	// costly to read (CPU, which can only make an agent busier) of an
	// agent whose other signals show a use after it, and report it from
	// those alone; and it judges CPU read over a longer span as if all
	// of it fell after IdleSince. An agent without one is read in full.
	IdleSince map[string]time.Time
}

// Activity is how recently one agent (with its sidecars and gateway) was
// used. Idle policies (`idle { stop_after }`) count from LastActive, and
// never stop an agent that is Busy.
type Activity struct {
	LastActive time.Time // the latest of: a request through its gateway, an exec session, CPU above the threshold; zero: unknown (never idle)
	Busy       bool      // an exec session is open or CPU is above the threshold right now
	Wrote      *bool     // whether the agent wrote to its filesystem since the given snapshot; nil when the engine cannot tell cheaply
}

// CheckIdle refuses an agent's idle block on a driver that cannot say
// when an agent was last used (Capabilities.Activity false): nothing
// could ever find it idle, so the policy would never act.
func (c Capabilities) CheckIdle(driver string) *Refusal {
	if c.Activity {
		return nil
	}
	return &Refusal{Block: "idle",
		Message: fmt.Sprintf("the %s driver cannot tell when an agent was last used (requests through its gateway, exec sessions, CPU), so an idle policy would never find it idle; remove the idle block or run this agent on a runtime whose driver can (docker)", driver)}
}
