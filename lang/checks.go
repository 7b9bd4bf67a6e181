package lang

import (
	"fmt"
	"strings"

	"github.com/hashicorp/hcl/v2"

	"github.com/bottlefile/bottlefile/addrs"
	"github.com/bottlefile/bottlefile/planner/dag"
)

var (
	allKinds     = []string{refVar, refLocal, refAgent, refSnapshot, refRuntime}
	runtimeKinds = []string{refVar, refLocal}
)

// checkReferences reports every reference to something undeclared, or of a
// kind not allowed where it appears.
func (c *Config) checkReferences() hcl.Diagnostics {
	var diags hcl.Diagnostics
	for _, name := range sortedKeys(c.Locals) {
		diags = append(diags, c.checkRefs("in a local value", allKinds, c.Locals[name].Expr)...)
	}
	for _, name := range sortedKeys(c.Runtimes) {
		r := c.Runtimes[name]
		for _, t := range r.variables() {
			ref, moreDiags := parseReference(t)
			diags = append(diags, moreDiags...)
			if ref != nil {
				diags = append(diags, c.checkRef("a runtime can refer only to variables and locals", runtimeKinds, ref)...)
			}
		}
	}
	for _, name := range sortedKeys(c.Agents) {
		diags = append(diags, c.checkAgentRefs(c.Agents[name])...)
	}
	for _, name := range sortedKeys(c.Snapshots) {
		s := c.Snapshots[name]
		if s.AgentName != "" && !agentDeclared(c.Agents, s.AgentName) {
			block, _, _ := addrs.ParseInstanceName(s.AgentName)
			diags = append(diags, c.checkRef("", allKinds, &reference{kind: refAgent, name: block, addr: addrs.Agent(block).String(), rng: s.AgentRange})...)
		} else if a, ok := c.Agents[s.AgentName]; ok && a.Repeats() && s.AgentKey == nil {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Invalid agent reference",
				Detail:   fmt.Sprintf("agent.%s has for_each or count, so it is many agents; a snapshot is of one of them: agent.%s[\"KEY\"] (agent.%s[N] with count), or agent.%s[each.key] in a snapshot block with for_each.", s.AgentName, s.AgentName, s.AgentName, s.AgentName),
				Subject:  s.AgentRange.Ptr(),
			})
		}
		diags = append(diags, c.checkRefs("in a snapshot", allKinds, s.ForEach, s.Count)...)
		diags = append(diags, c.checkRefs("in a snapshot", s.refKinds(), s.Description, s.Triggers, s.AgentKey)...)
		diags = append(diags, c.checkDependsOn(s.DependsOn)...)
	}
	for _, name := range sortedKeys(c.Outputs) {
		diags = append(diags, c.checkRefs("in an output", allKinds, c.Outputs[name].Value)...)
	}
	if c.Backend != nil {
		diags = append(diags, c.checkRefs("in a backend block (it may refer to variables only)", backendKinds, c.Backend.ConnStr)...)
	}
	return diags
}

func (c *Config) checkAgentRefs(a *Agent) hcl.Diagnostics {
	var diags hcl.Diagnostics
	if a.RuntimeName != "" && !c.declared(refRuntime, a.RuntimeName) {
		if a.RuntimeRange == a.DeclRange {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Missing runtime for agent",
				Detail: fmt.Sprintf("The agent %q has no runtime attribute, and there is no runtime named %q to use by default. Set runtime = runtime.NAME to one of: %s.",
					a.Name, DefaultRuntime, strings.Join(c.RuntimeNames(), ", ")),
				Subject: a.DeclRange.Ptr(),
			})
		} else {
			diags = append(diags, c.checkRef("", allKinds, &reference{kind: refRuntime, name: a.RuntimeName, addr: addrs.Runtime(a.RuntimeName).String(), rng: a.RuntimeRange})...)
		}
	}
	diags = append(diags, c.checkRefs("in for_each or count", allKinds, a.ForEach, a.Count)...)
	diags = append(diags, c.checkRefs("in an agent", a.refKinds(), a.exprs()...)...)
	diags = append(diags, c.checkDependsOn(a.DependsOn)...)
	if a.FromSnapshot != "" {
		from, _ := addrs.Parse(a.FromSnapshot) // decodeFromSnapshot checked it
		kind, name := refSnapshot, from.Name()
		if from.IsPolicySnapshot() {
			kind = refAgent
		}
		if !c.declared(kind, name) {
			diags = append(diags, c.checkRef("", allKinds, &reference{kind: kind, name: name, addr: kind + "." + name, rng: a.FromSnapshotRange})...)
		}
	}
	return diags
}

// FromSnapshotAgent is the name of the agent whose snapshot a's
// from_snapshot names, or "" when it has none or names an undeclared
// snapshot block.
func (c *Config) FromSnapshotAgent(a *Agent) string {
	from, _ := addrs.Parse(a.FromSnapshot)
	if from.IsSnapshotBlock() {
		if s, ok := c.Snapshots[from.Name()]; ok {
			return s.AgentName
		}
		return ""
	}
	return from.Agent()
}

// ForkDependency is the snapshot a fork must wait for: the from_snapshot
// of an agent booting from a snapshot of another agent; "" otherwise. A
// snapshot of the agent itself is taken of it, so it cannot come first.
func (c *Config) ForkDependency(a *Agent) string {
	if from := c.FromSnapshotAgent(a); from != "" && from != a.Name {
		return a.FromSnapshot
	}
	return ""
}

func (c *Config) checkDependsOn(deps []hcl.Traversal) hcl.Diagnostics {
	var diags hcl.Diagnostics
	for _, t := range deps {
		if ref, _ := parseReference(t); ref != nil {
			diags = append(diags, c.checkRef("", allKinds, ref)...)
		}
	}
	return diags
}

// dependencies is the reference graph between the blocks that can take
// part in a cycle: locals, runtimes, agents and snapshots. Keys and values
// are addresses.
func (c *Config) dependencies() map[string][]string {
	g := map[string][]string{}
	for _, l := range c.Locals {
		g[l.Addr()] = l.References()
	}
	for _, r := range c.Runtimes {
		g[r.Addr()] = r.References()
	}
	for _, a := range c.Agents {
		g[a.Addr()] = a.References()
		if dep, _ := addrs.Parse(c.ForkDependency(a)); dep.IsSnapshotBlock() {
			g[a.Addr()] = append(g[a.Addr()], dep.String())
		}
	}
	for _, s := range c.Snapshots {
		g[s.Addr()] = s.References()
	}
	return g
}

// CheckCycles reports every reference cycle among locals, runtimes, agents
// and snapshots: one error per set of blocks that refer to each other
// (planner/dag finds them), naming the shortest cycle through its first
// member and every member, pointing at the first member's declaration.
func (c *Config) CheckCycles() hcl.Diagnostics {
	var diags hcl.Diagnostics
	deps := c.dependencies()
	var g dag.Graph
	for _, from := range sortedKeys(deps) {
		g.Add(blockVertex(from))
		for _, to := range deps[from] {
			if _, ok := deps[to]; ok {
				g.Connect(blockVertex(from), blockVertex(to))
			}
		}
	}
	for _, k := range g.Knots() {
		members := vertexNames(k.Members)
		path := append(vertexNames(k.Cycles[0]), members[0])
		detail := fmt.Sprintf("These refer to each other, so none of them can be evaluated or created first: %s.", strings.Join(path, " → "))
		if len(members) == 1 {
			detail = fmt.Sprintf("%s refers to itself.", members[0])
		}
		diags = append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Reference cycle",
			Detail:   detail + " Members: " + strings.Join(members, ", ") + ".",
			Subject:  c.declRange(members[0]).Ptr(),
		})
	}
	return diags
}

// blockVertex is a block's address as a vertex of the reference graph.
type blockVertex string

func (v blockVertex) Name() string { return string(v) }

func vertexNames[S ~[]dag.Vertex](vs S) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = v.Name()
	}
	return out
}

// declRange is the declaration of the block at addr.
func (c *Config) declRange(addr string) hcl.Range {
	kind, name, _ := strings.Cut(addr, ".")
	switch kind {
	case refLocal:
		if l, ok := c.Locals[name]; ok {
			return l.NameRange
		}
	case refRuntime:
		if r, ok := c.Runtimes[name]; ok {
			return r.DeclRange
		}
	case refAgent:
		if a, ok := c.Agents[name]; ok {
			return a.DeclRange
		}
	case refSnapshot:
		if s, ok := c.Snapshots[name]; ok {
			return s.DeclRange
		}
	case refVar:
		if v, ok := c.Variables[name]; ok {
			return v.DeclRange
		}
	case "output":
		if o, ok := c.Outputs[name]; ok {
			return o.DeclRange
		}
	}
	return hcl.Range{}
}
