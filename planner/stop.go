package planner

import (
	"fmt"
	"slices"

	"github.com/hashicorp/hcl/v2"

	"github.com/bottlefile/bottlefile/addrs"
	"github.com/bottlefile/bottlefile/drivers"
)

// A workload stopped with bottlefile stop is recorded as stopped on
// purpose (StoppedKey): the plan leaves it stopped, where a workload found
// stopped otherwise is started again (diffObject). bottlefile start clears
// the mark. A configuration change is planned as usual: a replacement runs
// the new workload (what was stopped is gone), a change in place leaves it
// stopped.

// planStopStart plans what Options.Stop or Options.Start asks for: each
// named agent's workloads (the agent's, its sidecars', its gateway's)
// stopped, or started again. Every other change is dropped, as a -target
// would drop it.
func (p *Planner) planStopStart(changes map[string]*Change, agents map[string]*agentPlan) hcl.Diagnostics {
	var diags hcl.Diagnostics
	if p.Options.Destroy || p.Options.RefreshOnly || len(p.Options.Take) > 0 {
		return append(diags, errorDiag("Cannot stop or start in this plan", "bottlefile stop and start make a plan of their own, not with -destroy, -refresh-only or a snapshot take.", nil))
	}
	stop := len(p.Options.Stop) > 0
	ap := agents
	names, verb := p.Options.Start, "start"
	if stop {
		names, verb = p.Options.Stop, "stop"
	}
	keep := map[string]bool{}
	bs := bottles(changes)
	for _, agent := range names {
		if b := bs[agent]; b != nil && b.archived() {
			// Archived (archive.go): stop has nothing to do, start resumes it.
			if !stop {
				diags = append(diags, p.startArchived(changes, b, ap[agent], keep)...)
			}
			continue
		}
		found := false
		for _, addr := range sortedKeys(changes) {
			c := changes[addr]
			if !covers([]string{agent}, c.Addr) || c.Prior == nil || !c.Prior.Workload || c.Stray || c.Twin {
				continue
			}
			found = true
			if c.Live == nil {
				diags = append(diags, errorDiag(fmt.Sprintf("Cannot %s %s", verb, c.Addr),
					fmt.Sprintf("%s is recorded but gone from the runtime; run bottlefile apply to create it again.", c.Addr), nil))
				continue
			}
			if stop {
				if _, ok := drivers.As[drivers.Stopper](p.driverOf(c)); !ok {
					diags = append(diags, errorDiag(fmt.Sprintf("Cannot stop %s", c.Addr),
						fmt.Sprintf("The %s driver of runtime %q cannot stop workloads; bottlefile destroy -target=%s removes it instead.", c.Driver, c.Runtime, agent), nil))
					continue
				}
				if !c.Live.Running && c.Prior.Computed[StoppedKey] != "" {
					continue // stopped already
				}
				c.Action, c.StateOnly, c.Changed, c.Forcing = Stop, false, nil, nil
				keep[addr] = true
				continue
			}
			if c.Live.Running && c.Prior.Computed[StoppedKey] == "" {
				continue // running already
			}
			switch c.Action {
			case NoOp, Start:
			default:
				diags = append(diags, errorDiag(fmt.Sprintf("Cannot start %s", c.Addr),
					fmt.Sprintf("%s has a change to apply (%s): its configuration differs from what was applied. Run bottlefile apply; a workload it replaces runs again, one it updates in place stays stopped until bottlefile start.", c.Addr, c.Action), nil))
				continue
			}
			c.Action = Start
			keep[addr] = true
		}
		if !found {
			d := errorDiag("No such agent", fmt.Sprintf("%s names no agent with a workload recorded in the state, so there is nothing to %s.", agent, verb), nil)
			d.Extra = UnknownAddress{Given: agent, Known: agentAddrs(changes)}
			diags = append(diags, d)
		}
	}
	for addr, c := range changes {
		if !keep[addr] {
			delete(changes, addr)
			continue
		}
		if c.Prior == nil {
			continue
		}
		// No policy is planned here: the workload keeps recording the one
		// it was applied with, or the next plan would record it again.
		c.Policy = c.Prior.Computed[PolicyKey]
	}
	return diags
}

// driverOf is the driver of the runtime the change's object is recorded on.
func (p *Planner) driverOf(c *Change) drivers.Driver {
	if rt, ok := p.Runtimes[c.DeleteRuntime()]; ok {
		return rt.Driver
	}
	return nil
}

// agentAddrs are the agent addresses among the changes, for a "Did you
// mean".
func agentAddrs(changes map[string]*Change) []string {
	var out []string
	for addr := range changes {
		if a, ok := addrs.AgentOf(addr); ok && !slices.Contains(out, a.String()) {
			out = append(out, a.String())
		}
	}
	return out
}

// startArchived plans bottlefile start of an archived agent: resumed from
// its archive snapshot (archive.go). One whose configuration changed while
// archived is refused, as a stopped one is: apply resumes it.
func (p *Planner) startArchived(changes map[string]*Change, b *bottle, ap *agentPlan, keep map[string]bool) hcl.Diagnostics {
	for _, c := range b.members {
		if c.Action != NoOp && (c.Live == nil || !IsArchived(c.Prior)) {
			return hcl.Diagnostics{errorDiag(fmt.Sprintf("Cannot start %s", b.agent),
				fmt.Sprintf("%s is archived, and %s has a change to apply (%s): its configuration differs from what was applied. Run bottlefile apply, which resumes it with the change.", b.agent, c.Addr, c.Action), nil)}
		}
	}
	if ap == nil || b.workload == nil {
		return hcl.Diagnostics{errorDiag(fmt.Sprintf("Cannot start %s", b.agent),
			fmt.Sprintf("%s is archived, but it is not in the configuration or has no workload recorded, so it cannot be resumed.", b.agent), nil)}
	}
	unarchive(b, "start")
	resumeArchived(changes, b.workload, ap)
	for _, c := range b.members {
		keep[c.Addr] = true
	}
	return nil
}
