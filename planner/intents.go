package planner

import (
	"github.com/bottlefile/bottlefile/state"
)

// resolveIntents says, on each change an intent left by an interrupted
// apply concerns, how refresh resolved it. What the engine made of the
// create is live and unrecorded, so the change already adopts it (it is
// complete and matches), replaces it or removes it, with its reason.
// Where nothing is live the create was never made, or is still landing:
// the create of the address takes over what lands (the driver adopts or
// replaces the lineage's own object of its name), and the plan says so.
func resolveIntents(changes map[string]*Change, intents []state.Intent) {
	for _, in := range intents {
		c, ok := changes[in.Addr]
		if !ok || c.Live != nil || c.Action != Create {
			continue
		}
		what := in.Kind
		if in.Name != "" {
			what += " " + in.Name
		}
		c.Reasons = append(c.Reasons, because(ReasonIntent, "at", in.At.UTC().Format("15:04:05"), "what", what))
	}
}
