package lang

import (
	"fmt"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
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
		for _, t := range bodyVariables(r.Config) {
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
		if s.AgentName != "" && !c.declared(refAgent, s.AgentName) {
			diags = append(diags, c.checkRef("", allKinds, &reference{kind: refAgent, name: s.AgentName, addr: "agent." + s.AgentName, rng: s.AgentRange})...)
		}
		diags = append(diags, c.checkRefs("in a snapshot", allKinds, s.Description, s.Triggers)...)
		diags = append(diags, c.checkDependsOn(s.DependsOn)...)
	}
	for _, name := range sortedKeys(c.Outputs) {
		diags = append(diags, c.checkRefs("in an output", allKinds, c.Outputs[name].Value)...)
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
			diags = append(diags, c.checkRef("", allKinds, &reference{kind: refRuntime, name: a.RuntimeName, addr: "runtime." + a.RuntimeName, rng: a.RuntimeRange})...)
		}
	}
	diags = append(diags, c.checkRefs("in an agent", allKinds, a.exprs()...)...)
	diags = append(diags, c.checkDependsOn(a.DependsOn)...)
	if a.FromSnapshot != "" {
		kind, name, _ := strings.Cut(a.FromSnapshot, ".")
		name, _, _ = strings.Cut(name, ".")
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
	kind, rest, _ := strings.Cut(a.FromSnapshot, ".")
	name, _, _ := strings.Cut(rest, ".")
	switch kind {
	case refAgent:
		return name
	case refSnapshot:
		if s, ok := c.Snapshots[name]; ok {
			return s.AgentName
		}
	}
	return ""
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
		if dep := c.ForkDependency(a); strings.HasPrefix(dep, refSnapshot+".") {
			g[a.Addr()] = append(g[a.Addr()], dep)
		}
	}
	for _, s := range c.Snapshots {
		g[s.Addr()] = s.References()
	}
	return g
}

// CheckCycles reports every reference cycle among locals, runtimes, agents
// and snapshots: one error per cycle, naming every member, pointing at the
// first member's declaration.
func (c *Config) CheckCycles() hcl.Diagnostics {
	var diags hcl.Diagnostics
	g := c.dependencies()
	for _, scc := range stronglyConnected(g) {
		if len(scc) == 1 && !contains(g[scc[0]], scc[0]) {
			continue
		}
		path := cyclePath(g, scc)
		detail := fmt.Sprintf("These refer to each other, so none of them can be evaluated or created first: %s.", strings.Join(path, " → "))
		if len(scc) == 1 {
			detail = fmt.Sprintf("%s refers to itself.", scc[0])
		}
		diags = append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Reference cycle",
			Detail:   detail + " Members: " + strings.Join(scc, ", ") + ".",
			Subject:  c.declRange(scc[0]).Ptr(),
		})
	}
	return diags
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

// stronglyConnected returns the strongly connected components of g (Tarjan),
// each sorted, in order of their smallest member.
func stronglyConnected(g map[string][]string) [][]string {
	index := map[string]int{}
	low := map[string]int{}
	onStack := map[string]bool{}
	var stack []string
	var out [][]string
	next := 0
	var visit func(v string)
	visit = func(v string) {
		index[v], low[v] = next, next
		next++
		stack = append(stack, v)
		onStack[v] = true
		for _, w := range g[v] {
			if _, ok := g[w]; !ok {
				continue
			}
			if _, seen := index[w]; !seen {
				visit(w)
				low[v] = min(low[v], low[w])
			} else if onStack[w] {
				low[v] = min(low[v], index[w])
			}
		}
		if low[v] == index[v] {
			var scc []string
			for {
				w := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				onStack[w] = false
				scc = append(scc, w)
				if w == v {
					break
				}
			}
			sort.Strings(scc)
			out = append(out, scc)
		}
	}
	for _, v := range sortedKeys(g) {
		if _, seen := index[v]; !seen {
			visit(v)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i][0] < out[j][0] })
	return out
}

// cyclePath is one cycle through the component's smallest member, as a
// path that ends where it starts: a → b → a.
func cyclePath(g map[string][]string, scc []string) []string {
	in := map[string]bool{}
	for _, v := range scc {
		in[v] = true
	}
	start := scc[0]
	// Breadth-first from start's successors back to start: the shortest cycle.
	prev := map[string]string{}
	queue := []string{start}
	seen := map[string]bool{}
	for len(queue) > 0 {
		v := queue[0]
		queue = queue[1:]
		for _, w := range g[v] {
			if !in[w] {
				continue
			}
			if w == start {
				path := []string{start}
				for x := v; x != start; x = prev[x] {
					path = append(path, x)
				}
				path = append(path, start)
				// path is start, ..., reversed; put it in reference order.
				for i, j := 1, len(path)-2; i < j; i, j = i+1, j-1 {
					path[i], path[j] = path[j], path[i]
				}
				return path
			}
			if !seen[w] {
				seen[w] = true
				prev[w] = v
				queue = append(queue, w)
			}
		}
	}
	return append(scc, start)
}
