package dag

import (
	"slices"
	"strings"
)

// maxCyclesPerKnot bounds how many cycles Validate lists for one strongly
// connected set of vertices. Listing every elementary cycle of a tangle can
// take exponential time and its output can grow with the square of its size;
// past this bound the remaining members are named without a path.
const maxCyclesPerKnot = 16

// Cycle is one dependency cycle: each vertex depends on the next one, and the
// last depends on the first. A vertex that depends on itself is a Cycle of one.
type Cycle []Vertex

// String renders the cycle closed, starting and ending on its first vertex:
// "agent.a -> agent.b -> agent.a".
func (c Cycle) String() string {
	if len(c) == 0 {
		return ""
	}
	var b strings.Builder
	for _, v := range c {
		b.WriteString(v.Name())
		b.WriteString(" -> ")
	}
	b.WriteString(c[0].Name())
	return b.String()
}

// CycleError is the error Validate returns. Its message has one line per
// cycle, "dependency cycle: agent.a -> agent.b -> agent.a".
type CycleError struct {
	// Cycles lists the cycles found. Every vertex that sits on a cycle is in
	// at least one of them, unless it is in Tangled. Cycles are grouped by
	// strongly connected set, sets in the order of their smallest member's
	// name; each cycle starts at its smallest member not already listed.
	Cycles []Cycle
	// Tangled names, sorted, the vertices that sit on cycles but were not
	// listed in Cycles because their strongly connected set holds more than
	// maxCyclesPerKnot cycles. It is empty for any graph a person wrote.
	Tangled []Vertex
}

func (e *CycleError) Error() string {
	var b strings.Builder
	for k, c := range e.Cycles {
		if k > 0 {
			b.WriteByte('\n')
		}
		b.WriteString("dependency cycle: ")
		b.WriteString(c.String())
	}
	if len(e.Tangled) > 0 {
		if len(e.Cycles) > 0 {
			b.WriteByte('\n')
		}
		b.WriteString("dependency cycle: also through ")
		for k, v := range e.Tangled {
			if k > 0 {
				b.WriteString(", ")
			}
			b.WriteString(v.Name())
		}
	}
	return b.String()
}

// Knot is a set of vertices that depend on each other, directly or through
// one another: a strongly connected set of more than one vertex, or a single
// vertex that depends on itself.
type Knot struct {
	// Members are the knot's vertices, sorted by name.
	Members []Vertex
	// Cycles lists shortest cycles until every member is named: the first
	// runs through the smallest member, each next one through the smallest
	// member not named yet, and each starts at that member. A knot lists at
	// most maxCyclesPerKnot cycles.
	Cycles []Cycle
	// Tangled names, sorted, the members left out of Cycles because the knot
	// holds more than maxCyclesPerKnot cycles. It is empty for any graph a
	// person wrote.
	Tangled []Vertex
}

// Knots returns every knot of the graph in the order of their smallest
// member's name, or nil when the graph has no cycle. It is the one cycle
// finder of bottlefile: Validate reports from it, and lang reports reference
// cycles from it. Knots never modifies g.
func (g *Graph) Knots() []Knot {
	knots := g.knots()
	if len(knots) == 0 {
		return nil
	}
	n := len(g.verts)
	_, rank := g.ranks()
	// knot[i] is the knot i belongs to, or -1.
	knot := make([]int, n)
	for i := range knot {
		knot[i] = -1
	}
	for _, members := range knots {
		slices.SortFunc(members, func(a, b int) int { return rank[a] - rank[b] })
	}
	slices.SortFunc(knots, func(a, b []int) int { return rank[a[0]] - rank[b[0]] })
	for k, members := range knots {
		for _, i := range members {
			knot[i] = k
		}
	}

	// next[i] holds i's dependencies inside its own knot, sorted by name, so
	// that breadth-first searches find the same shortest cycle every time.
	next := make(map[int][]int)
	for _, members := range knots {
		for _, i := range members {
			var in []int
			for _, d := range g.deps[i] {
				if knot[d] == knot[i] {
					in = append(in, d)
				}
			}
			slices.SortFunc(in, func(a, b int) int { return rank[a] - rank[b] })
			next[i] = in
		}
	}

	s := cycleSearch{
		next:   next,
		seen:   make([]int, n),
		parent: make([]int, n),
	}
	covered := make([]bool, n)
	out := make([]Knot, 0, len(knots))
	for _, members := range knots {
		k := Knot{Members: g.vertexList(members)}
		var tangled []int
		for _, u := range members {
			if covered[u] {
				continue
			}
			if len(k.Cycles) == maxCyclesPerKnot {
				tangled = append(tangled, u)
				continue
			}
			path := s.shortest(u)
			c := make(Cycle, len(path))
			for j, i := range path {
				c[j] = g.verts[i]
				covered[i] = true
			}
			k.Cycles = append(k.Cycles, c)
		}
		k.Tangled = g.vertexList(tangled)
		out = append(out, k)
	}
	return out
}

// Validate returns nil when the graph has no cycle, and a *CycleError naming
// every cycle otherwise: the cycles of every knot (see Knots), so every
// strongly connected set of vertices, and every vertex connected to itself,
// is reported. Validate never modifies g.
func (g *Graph) Validate() error {
	knots := g.Knots()
	if len(knots) == 0 {
		return nil
	}
	err := &CycleError{}
	for _, k := range knots {
		err.Cycles = append(err.Cycles, k.Cycles...)
		err.Tangled = append(err.Tangled, k.Tangled...)
	}
	slices.SortFunc(err.Tangled, func(a, b Vertex) int { return strings.Compare(a.Name(), b.Name()) })
	return err
}

// cycleSearch finds shortest cycles with breadth-first searches that share
// their scratch space: seen[i] is the number of the search that last reached
// i, so no search has to clear what the previous one marked.
type cycleSearch struct {
	next   map[int][]int
	seen   []int
	parent []int
	search int
	queue  []int
}

// shortest returns a shortest cycle through u as the path u, ..., x where x
// depends on u. u must be on a cycle.
func (s *cycleSearch) shortest(u int) []int {
	s.search++
	s.seen[u] = s.search
	s.queue = append(s.queue[:0], u)
	for q := 0; q < len(s.queue); q++ {
		x := s.queue[q]
		for _, y := range s.next[x] {
			if y == u {
				var path []int
				for v := x; v != u; v = s.parent[v] {
					path = append(path, v)
				}
				path = append(path, u)
				slices.Reverse(path)
				return path
			}
			if s.seen[y] != s.search {
				s.seen[y] = s.search
				s.parent[y] = x
				s.queue = append(s.queue, y)
			}
		}
	}
	panic("dag: vertex is not on a cycle") // unreachable: u is in a knot
}

// knots returns the strongly connected components that contain a cycle:
// those of more than one vertex, and single vertices that depend on
// themselves. It is Tarjan's algorithm, iterative so that a long chain cannot
// exhaust the stack.
func (g *Graph) knots() [][]int {
	n := len(g.verts)
	index := make([]int, n) // order of discovery, from 1; 0 is unvisited
	low := make([]int, n)
	onStack := make([]bool, n)
	var stack []int
	type frame struct{ v, next int }
	var calls []frame
	counter := 0
	var out [][]int

	visit := func(v int) {
		counter++
		index[v], low[v] = counter, counter
		stack = append(stack, v)
		onStack[v] = true
		calls = append(calls, frame{v: v})
	}
	for root := range n {
		if index[root] != 0 {
			continue
		}
		visit(root)
		for len(calls) > 0 {
			f := &calls[len(calls)-1]
			v := f.v
			if f.next < len(g.deps[v]) {
				w := g.deps[v][f.next]
				f.next++
				if index[w] == 0 {
					visit(w)
				} else if onStack[w] {
					low[v] = min(low[v], index[w])
				}
				continue
			}
			calls = calls[:len(calls)-1]
			if len(calls) > 0 {
				p := calls[len(calls)-1].v
				low[p] = min(low[p], low[v])
			}
			if low[v] != index[v] {
				continue
			}
			top := len(stack) - 1
			for stack[top] != v {
				top--
			}
			members := stack[top:]
			stack = stack[:top]
			for _, w := range members {
				onStack[w] = false
			}
			if _, self := g.edges[edge{v, v}]; len(members) > 1 || self {
				out = append(out, slices.Clone(members))
			}
		}
	}
	return out
}
