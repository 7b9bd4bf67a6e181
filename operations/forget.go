package operations

import (
	"fmt"
	"maps"
	"slices"

	"github.com/hashicorp/hcl/v2"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/planner"
)

// forgetGoneBottles asks the drivers to forget the bottles this plan
// touched of which the state now records nothing but snapshots (a destroy,
// a removed agent): what a driver keeps of them outside the runtime goes
// too. A bottle left half-destroyed is still recorded, so kept. A bottle
// is known by the agent address its names derive from (the one it was
// made at, when it was moved since): what the driver keeps of it is
// filed under that.
func (op *Operation) forgetGoneBottles(lineage string, p *planner.Plan) hcl.Diagnostics {
	touched := map[string]bool{}
	for _, c := range p.Changes {
		if agent, ok := agentOf(c.Addr); ok && c.Kind != drivers.KindSnapshot {
			if c.NameAddr != "" {
				agent = c.NameAddr
			}
			touched[agent] = true
		}
	}
	if len(touched) == 0 {
		return nil
	}
	records, err := op.Store.Records()
	if err != nil {
		return hcl.Diagnostics{{Severity: hcl.DiagWarning, Summary: "Cannot read state", Detail: err.Error()}}
	}
	for _, r := range records {
		if agent, ok := agentOf(r.Addr); ok && r.Kind != drivers.KindSnapshot {
			if n := r.Computed[planner.NameAddrKey]; n != "" {
				agent = n
			}
			delete(touched, agent)
		}
	}
	var diags hcl.Diagnostics
	for _, agent := range slices.Sorted(maps.Keys(touched)) {
		for _, name := range slices.Sorted(maps.Keys(op.Runtimes)) {
			f, ok := drivers.As[drivers.BottleForgetter](op.Runtimes[name].Driver)
			if !ok {
				continue
			}
			if err := f.ForgetBottle(lineage, agent); err != nil {
				diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagWarning, Summary: "Files of a destroyed bottle were kept",
					Detail: fmt.Sprintf("Runtime %q could not remove what it kept of %s: %v. Nothing runs from them; they can be deleted by hand.", name, agent, err)})
			}
		}
	}
	return diags
}
