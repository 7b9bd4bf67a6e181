package operations

import (
	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/state"
)

// Registry maps a runtime block's driver name to its factory. main builds
// it from the concrete drivers and hands it on through the commands, which
// import neither drivers nor state: they name it here.
type Registry = drivers.Registry

// KindSnapshot is the kind of the objects the core plans for snapshots,
// for views that mark them ("@", "will be taken", "snapshots taken").
const KindSnapshot = drivers.KindSnapshot

// Record is what the state records of one object, as show, state show and
// state pull print it; its JSON is the state pull format.
type Record = state.Record

// AgentOf gives the agent an address belongs to: agent.NAME for agent.NAME
// and every address below it.
func AgentOf(addr string) (string, bool) { return agentOf(addr) }
