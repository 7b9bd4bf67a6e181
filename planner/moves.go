package planner

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/hashicorp/hcl/v2"

	"github.com/bottlefile/bottlefile/addrs"
	"github.com/bottlefile/bottlefile/state"
)

// NameAddrKey is the computed value, on the records of a bottle whose
// engine names derive from another agent address than its own (it was
// moved, or took a fresh name), naming that address
// (drivers.ApplyRequest.NameAddr).
const NameAddrKey = "name_addr"

// recordMove is how one record changes in this plan without anything on
// a runtime changing: its address (a moved block), its runtime (another
// runtime block on the same engine), or both.
type recordMove struct {
	from        string // the address it is recorded at; "" when it stays
	fromRuntime string // the runtime it is recorded on; "" when it stays
}

// moveRecords applies the configuration's moved blocks to the records:
// every record below a moved agent's address is taken, in memory, to the
// same place below the address the moves (chained) lead to, and keeps the
// engine names it was made with (NameAddrKey). A move whose destination
// the state already records is an error at the block's to; a move whose
// source the state does not record is done already, or was never needed:
// it is a no-op.
func (p *Planner) moveRecords(records []state.Record) ([]state.Record, map[string]*recordMove, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	moves := map[string]*recordMove{}
	if p.Config == nil || len(p.Config.Moved) == 0 {
		return records, moves, nil
	}
	recordedAgents := map[addrs.Addr]bool{}
	for _, r := range records {
		if a, ok := addrs.AgentOf(r.Addr); ok {
			recordedAgents[a] = true
		}
	}
	target := map[addrs.Addr]addrs.Addr{}
	refused := map[addrs.Addr]bool{}
	for a := range recordedAgents {
		to, m := p.Config.MoveTarget(a)
		if m == nil || to == a {
			continue
		}
		if recordedAgents[to] {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Moved object already exists",
				Detail: fmt.Sprintf("This moved block moves %s to %s, but the state already records %s. Remove the moved block, or forget one of them first (`bottlefile state rm`), or move it elsewhere with `bottlefile state mv`.",
					a, to, to),
				Subject: m.ToRange.Ptr(),
			})
			refused[a] = true
			continue
		}
		target[a] = to
	}
	if len(target) == 0 {
		return records, moves, diags
	}
	out := make([]state.Record, 0, len(records))
	for _, r := range records {
		a, ok := addrs.AgentOf(r.Addr)
		to, moved := target[a]
		if !ok || !moved || refused[a] {
			out = append(out, r)
			continue
		}
		from := r.Addr
		r = movedRecord(r, a.String(), to.String())
		moves[r.Addr] = &recordMove{from: from}
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b state.Record) int { return strings.Compare(a.Addr, b.Addr) })
	return out, moves, diags
}

// movedRecord is a copy of r moved from below the agent address from to
// below to: its address, its dependencies, and the address its engine
// names derive from, which stays what it was (the engine objects keep
// their names: docker cannot rename a network, and the agent's proxy
// setting names its gateway).
func movedRecord(r state.Record, from, to string) state.Record {
	r.Addr = renameAddr(r.Addr, from, to)
	r = renameAttrs(r, from, to)
	r.Computed = maps.Clone(r.Computed)
	if r.Computed == nil {
		r.Computed = map[string]string{}
	}
	if r.Computed[NameAddrKey] == "" {
		r.Computed[NameAddrKey] = from
	}
	if r.Computed[NameAddrKey] == to {
		delete(r.Computed, NameAddrKey) // moved back where it was made
	}
	return r
}

// renameAttrs is r with the dependencies and attributes that name the
// address from, or one below it (a container's network, a gateway's agent
// or egress network), naming the same below to, with their hashes: the
// record then stands for the object as if declared there.
func renameAttrs(r state.Record, from, to string) state.Record {
	r.DependsOn = slices.Clone(r.DependsOn)
	for i, d := range r.DependsOn {
		r.DependsOn[i] = renameAddr(d, from, to)
	}
	var attrs map[string]json.RawMessage
	var hashes map[string]string
	for name, raw := range r.Attrs {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			continue
		}
		moved := renameAddr(s, from, to)
		if moved == s {
			continue
		}
		data, err := json.Marshal(moved)
		if err != nil {
			continue
		}
		if attrs == nil {
			attrs, hashes = maps.Clone(r.Attrs), maps.Clone(r.AttrHashes)
		}
		attrs[name] = data
		if _, ok := hashes[name]; ok {
			hashes[name] = attrHash(name, data)
		}
	}
	if attrs != nil {
		r.Attrs, r.AttrHashes = attrs, hashes
		if r.Hash != "" && len(hashes) > 0 {
			r.Hash = wholeHash(r.Kind, hashes)
		}
	}
	return r
}

// MoveRecord is movedRecord for state mv: the record at r.Addr, below the
// agent address from, moved below to.
func MoveRecord(r state.Record, from, to string) state.Record { return movedRecord(r, from, to) }

// renameAddr is addr with the agent address from at its start replaced by
// to; addr itself when it is not below from.
func renameAddr(addr, from, to string) string {
	if addr == from {
		return to
	}
	if rest, ok := strings.CutPrefix(addr, from+"."); ok {
		return to + "." + rest
	}
	return addr
}

// sameEngine reports whether two runtimes reach one engine, as far as
// the plan knows: both have an identity, and it is the same.
func (p *Planner) sameEngine(a, b string) bool {
	ea, eb := p.engines[a], p.engines[b]
	return ea != "" && ea == eb
}

// moveRuntimes takes, in memory, the records of an agent recorded on one
// runtime and declared on another of the same engine to the declared
// one, with what refresh found of them: the same objects on the same
// engine, now under another runtime block's name. A runtime no longer
// declared whose engine a declared runtime reaches was renamed: its own
// objects (its egress network) become that runtime's, keeping their
// engine names, when that runtime has none of its own yet; what is left
// of it otherwise goes to the first such runtime, to be removed there.
func (p *Planner) moveRuntimes(records []state.Record, moves map[string]*recordMove, live liveSet) []state.Record {
	renamed := p.renamedRuntimes(records)
	out := make([]state.Record, 0, len(records))
	for _, r := range records {
		to, from := "", r.Addr
		if a, ok := addrs.AgentOf(r.Addr); ok && p.Config != nil {
			if decl, ok := p.Config.Agents[a.Name()]; ok {
				if _, ok := p.Runtimes[decl.RuntimeName]; ok && decl.RuntimeName != r.Runtime && p.sameEngine(r.Runtime, decl.RuntimeName) {
					to = decl.RuntimeName
				}
			}
		}
		if t, ok := renamed[r.Runtime]; ok {
			if to == "" {
				to = t
			}
			// What names the renamed runtime's objects names its new
			// name's: a gateway's egress network.
			oldRT, newRT := addrs.Runtime(r.Runtime).String(), addrs.Runtime(t).String()
			r = renameAttrs(r, oldRT, newRT)
			if below := renameAddr(r.Addr, oldRT, newRT); below != r.Addr {
				r.Addr = below
				r.Computed = maps.Clone(r.Computed)
				if r.Computed == nil {
					r.Computed = map[string]string{}
				}
				if r.Computed[NameAddrKey] == "" {
					r.Computed[NameAddrKey] = oldRT
				}
			}
		}
		if _, declared := p.Runtimes[r.Runtime]; to == "" && !declared {
			for _, name := range sortedKeys(p.Runtimes) {
				if p.sameEngine(r.Runtime, name) {
					to = name
					break
				}
			}
		}
		if to == "" {
			out = append(out, r)
			continue
		}
		if e, ok := live[r.Runtime][from]; ok {
			delete(live[r.Runtime], from)
			if live[to] == nil {
				live[to] = map[string]liveEntry{}
			}
			e.runtime = to
			e.obj.Addr = r.Addr
			live[to][r.Addr] = e
		}
		m := moves[from]
		delete(moves, from)
		if m == nil {
			m = &recordMove{}
		}
		if from != r.Addr && m.from == "" {
			m.from = from
		}
		moves[r.Addr] = m
		m.fromRuntime = r.Runtime
		r.Runtime = to
		out = append(out, r)
	}
	return out
}

// renamedRuntimes are the runtimes no longer declared whose engine a
// declared runtime reaches and whose own objects (runtime.NAME.*) that
// runtime can take, having none of its own: by the name it was renamed
// to. Of several declared runtimes of the engine, the one most of its
// agents are now declared on, else the first by name.
func (p *Planner) renamedRuntimes(records []state.Record) map[string]string {
	owned := map[string]bool{} // runtimes with objects of their own
	gone := map[string]bool{}
	for _, r := range records {
		if a, err := addrs.Parse(r.Addr); err == nil && a.Kind() == addrs.EgressNetworkKind {
			owned[r.Runtime] = true
		}
		if _, declared := p.Runtimes[r.Runtime]; !declared {
			gone[r.Runtime] = true
		}
	}
	out := map[string]string{}
	taken := map[string]bool{}
	for _, old := range sortedKeys(gone) {
		votes := map[string]int{}
		for _, r := range records {
			a, ok := addrs.AgentOf(r.Addr)
			if !ok || r.Runtime != old || p.Config == nil {
				continue
			}
			if decl, ok := p.Config.Agents[a.Name()]; ok && p.sameEngine(old, decl.RuntimeName) {
				votes[decl.RuntimeName]++
			}
		}
		best := ""
		for _, name := range sortedKeys(p.Runtimes) {
			if !p.sameEngine(old, name) || owned[name] || taken[name] {
				continue
			}
			if best == "" || votes[name] > votes[best] {
				best = name
			}
		}
		if best != "" {
			out[old] = best
			taken[best] = true
		}
	}
	return out
}

// runtimeNameAddrs is, for each runtime whose own objects keep the names
// of another runtime's (it was renamed), that runtime's address.
func runtimeNameAddrs(records []state.Record) map[string]string {
	out := map[string]string{}
	for _, r := range records {
		if a, err := addrs.Parse(r.Addr); err == nil && a.Kind() == addrs.EgressNetworkKind {
			if n := r.Computed[NameAddrKey]; n != "" {
				out[r.Runtime] = n
			}
		}
	}
	return out
}

// nameAddrs decides, for each declared agent, the agent address its
// engine names derive from when that is not its own: the one its records
// carry (it was moved), or, for an agent with no records whose own names
// another bottle's objects still carry (it was moved away from this
// address), a fresh one no agent or record uses.
func (p *Planner) nameAddrs(records []state.Record) map[string]string {
	out := map[string]string{}
	taken := map[string]bool{}
	recorded := map[string]bool{}
	for _, r := range records {
		a, ok := addrs.AgentOf(r.Addr)
		if !ok {
			continue
		}
		recorded[a.String()] = true
		if n := r.Computed[NameAddrKey]; n != "" {
			out[a.String()] = n
			taken[n] = true
		}
	}
	if p.Config == nil {
		return out
	}
	for _, name := range p.Config.AgentNames() {
		addr := addrs.Agent(name).String()
		if recorded[addr] || !taken[addr] {
			continue
		}
		for i := 2; ; i++ {
			fresh := addr + "-" + strconv.Itoa(i)
			n := strings.TrimPrefix(fresh, "agent.")
			if _, declared := p.Config.Agents[n]; !declared && !recorded[fresh] && !taken[fresh] {
				out[addr] = fresh
				taken[fresh] = true
				break
			}
		}
	}
	return out
}

// describeMove is the plan's line for a move: "agent.old has moved to
// agent.new", "agent.x has moved from runtime "default" to runtime
// "local" (the same engine)".
func describeMove(addr string, m *recordMove, runtime string) Reason {
	r := because(ReasonMoved, "addr", addr, "from", m.from)
	if m.fromRuntime != "" {
		r.set("from_runtime", m.fromRuntime)
		r.set("runtime", runtime)
	}
	return r
}

// markMoves marks the changes of moved records: a change that would do
// nothing now rewrites only the record (and has no step: the apply moves
// records before its walk); one that does more says it moved as well.
func markMoves(changes map[string]*Change, moves map[string]*recordMove) {
	for addr, m := range moves {
		c, ok := changes[addr]
		if !ok {
			continue
		}
		c.MovedFrom, c.FromRuntime = m.from, m.fromRuntime
		if c.Action == NoOp {
			c.Action, c.StateOnly = Update, true
			continue
		}
		c.Reasons = append([]Reason{describeMove(addr, m, c.Runtime)}, c.Reasons...)
	}
}

// MoveLine is the plan's line for a change that moves a record:
// "agent.old has moved to agent.new"; "" for one that moves nothing.
func (c *Change) MoveLine() string {
	if !c.Moved() {
		return ""
	}
	return describeMove(c.Addr, &recordMove{from: c.MovedFrom, fromRuntime: c.FromRuntime}, c.Runtime).Text()
}
