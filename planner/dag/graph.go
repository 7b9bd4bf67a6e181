package dag

import (
	"slices"
	"strings"
)

// Vertex is anything with a stable, unique name: an address ("agent.coder"),
// or an operation on one ("create agent.coder").
type Vertex interface {
	Name() string
}

// Graph is a directed graph of vertices whose edges point from a dependent to
// its dependency. The zero value is an empty graph ready to use. A Graph must
// not be copied after first use.
//
// Internally each vertex gets a dense index when it is first added; the
// adjacency lists and the edge set work on those indexes, and names are only
// compared when an ordered result is built.
type Graph struct {
	index map[string]int // vertex name to its index
	verts []Vertex       // index to the vertex most recently added under that name
	names []string       // index to name, read once when the vertex was first added
	deps  [][]int        // index to the indexes it depends on, in the order connected
	rdeps [][]int        // index to the indexes that depend on it, in the order connected
	edges map[edge]struct{}
}

// edge is a dependent and a dependency, as indexes.
type edge struct{ from, to int }

// Add adds v. Adding a vertex whose name is already in the graph replaces the
// stored vertex with v and keeps every edge of that name: the latest value
// wins, so a graph can be wired with placeholders and filled in afterwards.
// v must not be nil.
func (g *Graph) Add(v Vertex) {
	i := g.add(v)
	g.verts[i] = v
}

// Connect records that dependent depends on dependency, adding either vertex
// if no vertex of its name is in the graph yet (an existing vertex is kept, not
// replaced). Connecting the same pair twice records one edge. A vertex may be
// connected to itself; Validate reports that as a cycle.
func (g *Graph) Connect(dependent, dependency Vertex) {
	from, to := g.add(dependent), g.add(dependency)
	e := edge{from, to}
	if _, ok := g.edges[e]; ok {
		return
	}
	g.edges[e] = struct{}{}
	g.deps[from] = append(g.deps[from], to)
	g.rdeps[to] = append(g.rdeps[to], from)
}

// add returns the index of v's name, adding v when the name is new.
func (g *Graph) add(v Vertex) int {
	name := v.Name()
	if i, ok := g.index[name]; ok {
		return i
	}
	if g.index == nil {
		g.index = make(map[string]int)
		g.edges = make(map[edge]struct{})
	}
	i := len(g.verts)
	g.index[name] = i
	g.verts = append(g.verts, v)
	g.names = append(g.names, name)
	g.deps = append(g.deps, nil)
	g.rdeps = append(g.rdeps, nil)
	return i
}

// Len is the number of vertices.
func (g *Graph) Len() int { return len(g.verts) }

// Lookup returns the vertex stored under name.
func (g *Graph) Lookup(name string) (Vertex, bool) {
	i, ok := g.index[name]
	if !ok {
		return nil, false
	}
	return g.verts[i], true
}

// Vertices returns every vertex, sorted by name.
func (g *Graph) Vertices() []Vertex {
	return g.vertexList(g.byName())
}

// Dependencies returns the vertices v depends on, sorted by name. It returns
// nil when no vertex of v's name is in the graph.
func (g *Graph) Dependencies(v Vertex) []Vertex {
	i, ok := g.index[v.Name()]
	if !ok {
		return nil
	}
	return g.vertexList(g.sortByName(slices.Clone(g.deps[i])))
}

// Dependents returns the vertices that depend on v, sorted by name. It
// returns nil when no vertex of v's name is in the graph.
func (g *Graph) Dependents(v Vertex) []Vertex {
	i, ok := g.index[v.Name()]
	if !ok {
		return nil
	}
	return g.vertexList(g.sortByName(slices.Clone(g.rdeps[i])))
}

// TopologicalOrder returns every vertex with each one after all it depends
// on. Among vertices whose dependencies are all placed, the one with the
// smallest name comes first, so the order is the same from run to run. A graph
// with cycles gives no order and the error Validate returns.
func (g *Graph) TopologicalOrder() ([]Vertex, error) {
	n := len(g.verts)
	order, rank := g.ranks()
	// Kahn's algorithm with a heap of ranks: pending[i] counts the
	// dependencies of i not yet placed.
	pending := make([]int, n)
	var ready rankHeap
	for i := range n {
		pending[i] = len(g.deps[i])
		if pending[i] == 0 {
			ready.push(rank[i])
		}
	}
	out := make([]Vertex, 0, n)
	for len(ready) > 0 {
		i := order[ready.pop()]
		out = append(out, g.verts[i])
		for _, d := range g.rdeps[i] {
			pending[d]--
			if pending[d] == 0 {
				ready.push(rank[d])
			}
		}
	}
	if len(out) < n {
		return nil, g.Validate()
	}
	return out, nil
}

// String lists the graph one line per vertex, sorted by name: the vertex's
// name, then " -> " and its dependencies sorted by name when it has any.
//
//	agent.coder -> agent.coder.network
//	agent.coder.network
func (g *Graph) String() string {
	var b strings.Builder
	for _, i := range g.byName() {
		b.WriteString(g.names[i])
		for k, d := range g.sortByName(slices.Clone(g.deps[i])) {
			if k == 0 {
				b.WriteString(" -> ")
			} else {
				b.WriteString(", ")
			}
			b.WriteString(g.names[d])
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// Dot renders the graph in Graphviz DOT: every vertex as a quoted node, then
// every edge from dependent to dependency, both sorted by name.
func (g *Graph) Dot() string {
	var b strings.Builder
	b.WriteString("digraph {\n")
	byName := g.byName()
	for _, i := range byName {
		b.WriteString("\t")
		b.WriteString(dotQuote(g.names[i]))
		b.WriteString("\n")
	}
	for _, i := range byName {
		from := dotQuote(g.names[i])
		for _, d := range g.sortByName(slices.Clone(g.deps[i])) {
			b.WriteString("\t")
			b.WriteString(from)
			b.WriteString(" -> ")
			b.WriteString(dotQuote(g.names[d]))
			b.WriteString("\n")
		}
	}
	b.WriteString("}\n")
	return b.String()
}

// dotQuote quotes s as a DOT string. Inside quotes DOT unescapes only \", so
// backslashes are doubled to keep a name from escaping its closing quote.
func dotQuote(s string) string {
	if !strings.ContainsAny(s, "\"\\\n") {
		return `"` + s + `"`
	}
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
	return `"` + r.Replace(s) + `"`
}

// byName returns every index, sorted by name.
func (g *Graph) byName() []int {
	idx := make([]int, len(g.verts))
	for i := range idx {
		idx[i] = i
	}
	return g.sortByName(idx)
}

// ranks returns the indexes sorted by name, and for each index its position
// in that order, so that later comparisons are between ints.
func (g *Graph) ranks() (order, rank []int) {
	order = g.byName()
	rank = make([]int, len(order))
	for r, i := range order {
		rank[i] = r
	}
	return order, rank
}

// sortByName sorts idx in place by the names of the vertices and returns it.
func (g *Graph) sortByName(idx []int) []int {
	slices.SortFunc(idx, func(a, b int) int { return strings.Compare(g.names[a], g.names[b]) })
	return idx
}

// vertexList maps indexes to vertices.
func (g *Graph) vertexList(idx []int) []Vertex {
	if len(idx) == 0 {
		return nil
	}
	out := make([]Vertex, len(idx))
	for k, i := range idx {
		out[k] = g.verts[i]
	}
	return out
}

// rankHeap is a binary min-heap of ranks.
type rankHeap []int

func (h *rankHeap) push(r int) {
	*h = append(*h, r)
	s := *h
	for c := len(s) - 1; c > 0; {
		p := (c - 1) / 2
		if s[p] <= s[c] {
			break
		}
		s[p], s[c] = s[c], s[p]
		c = p
	}
}

func (h *rankHeap) pop() int {
	s := *h
	top := s[0]
	last := len(s) - 1
	s[0] = s[last]
	s = s[:last]
	for p := 0; ; {
		c := 2*p + 1
		if c >= len(s) {
			break
		}
		if c+1 < len(s) && s[c+1] < s[c] {
			c++
		}
		if s[p] <= s[c] {
			break
		}
		s[p], s[c] = s[c], s[p]
		p = c
	}
	*h = s
	return top
}
