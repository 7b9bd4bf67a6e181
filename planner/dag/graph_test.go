package dag

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// v is a vertex that is just its name.
type v string

func (s v) Name() string { return string(s) }

// payload is a vertex that carries a value besides its name.
type payload struct{ name, value string }

func (p *payload) Name() string { return p.name }

// build makes a graph from "dependent -> dependency" edges and lone vertices.
func build(edges ...string) *Graph {
	g := &Graph{}
	for _, e := range edges {
		from, to, ok := strings.Cut(e, " -> ")
		if !ok {
			g.Add(v(e))
			continue
		}
		g.Connect(v(from), v(to))
	}
	return g
}

func names(vs []Vertex) []string {
	if vs == nil {
		return nil
	}
	out := make([]string, len(vs))
	for i, x := range vs {
		out[i] = x.Name()
	}
	return out
}

func TestZeroGraph(t *testing.T) {
	var g Graph
	if got := g.Vertices(); got != nil {
		t.Errorf("Vertices() = %v, want nil", got)
	}
	if err := g.Validate(); err != nil {
		t.Errorf("Validate() = %v", err)
	}
	order, err := g.TopologicalOrder()
	if err != nil || len(order) != 0 {
		t.Errorf("TopologicalOrder() = %v, %v", order, err)
	}
	if got := g.String(); got != "" {
		t.Errorf("String() = %q", got)
	}
	if got, want := g.Dot(), "digraph {\n}\n"; got != want {
		t.Errorf("Dot() = %q, want %q", got, want)
	}
	if got := g.Dependencies(v("x")); got != nil {
		t.Errorf("Dependencies of unknown = %v", got)
	}
	if _, ok := g.Lookup("x"); ok {
		t.Error("Lookup found a vertex in an empty graph")
	}
}

func TestAddReplacesAndKeepsEdges(t *testing.T) {
	g := &Graph{}
	first := &payload{"agent.a", "first"}
	g.Connect(first, v("agent.a.network"))
	second := &payload{"agent.a", "second"}
	g.Add(second)
	if g.Len() != 2 {
		t.Fatalf("Len() = %d, want 2", g.Len())
	}
	got, _ := g.Lookup("agent.a")
	if got != second {
		t.Errorf("Lookup after a second Add = %v, want the second vertex", got)
	}
	if diff := cmp.Diff([]string{"agent.a.network"}, names(g.Dependencies(first))); diff != "" {
		t.Errorf("edges lost by Add (-want +got):\n%s", diff)
	}
	// Connect keeps the stored vertex.
	g.Connect(&payload{"agent.a", "third"}, v("runtime.default"))
	if got, _ := g.Lookup("agent.a"); got != second {
		t.Errorf("Connect replaced the stored vertex with %v", got)
	}
}

func TestNeighbours(t *testing.T) {
	g := build(
		"agent.b -> runtime.default",
		"agent.a -> runtime.default",
		"agent.a -> agent.a.network",
		"agent.a -> agent.a.network", // twice: one edge
		"agent.a -> agent.a.gateway",
		"agent.c",
	)
	tests := []struct {
		vertex           string
		deps, dependents []string
	}{
		{"agent.a", []string{"agent.a.gateway", "agent.a.network", "runtime.default"}, nil},
		{"runtime.default", nil, []string{"agent.a", "agent.b"}},
		{"agent.a.network", nil, []string{"agent.a"}},
		{"agent.c", nil, nil},
		{"missing", nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.vertex, func(t *testing.T) {
			if diff := cmp.Diff(tt.deps, names(g.Dependencies(v(tt.vertex)))); diff != "" {
				t.Errorf("Dependencies (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.dependents, names(g.Dependents(v(tt.vertex)))); diff != "" {
				t.Errorf("Dependents (-want +got):\n%s", diff)
			}
		})
	}
	want := []string{"agent.a", "agent.a.gateway", "agent.a.network", "agent.b", "agent.c", "runtime.default"}
	if diff := cmp.Diff(want, names(g.Vertices())); diff != "" {
		t.Errorf("Vertices (-want +got):\n%s", diff)
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name  string
		edges []string
		want  string // the error message, "" for none
	}{
		{
			name:  "empty",
			edges: nil,
		},
		{
			name:  "acyclic",
			edges: []string{"a -> b", "b -> c", "a -> c", "d"},
		},
		{
			name:  "self loop",
			edges: []string{"agent.a -> agent.a", "agent.b -> agent.a"},
			want:  "dependency cycle: agent.a -> agent.a",
		},
		{
			name:  "two members",
			edges: []string{"agent.b -> agent.a", "agent.a -> agent.b"},
			want:  "dependency cycle: agent.a -> agent.b -> agent.a",
		},
		{
			name:  "starts at the smallest member",
			edges: []string{"c -> a", "a -> b", "b -> c"},
			want:  "dependency cycle: a -> b -> c -> a",
		},
		{
			name:  "two disjoint cycles",
			edges: []string{"agent.x -> agent.y", "agent.y -> agent.x", "agent.b -> agent.c", "agent.c -> agent.d", "agent.d -> agent.b", "agent.e -> agent.b"},
			want: "dependency cycle: agent.b -> agent.c -> agent.d -> agent.b\n" +
				"dependency cycle: agent.x -> agent.y -> agent.x",
		},
		{
			name:  "figure eight names every member",
			edges: []string{"a -> b", "b -> a", "b -> c", "c -> b"},
			want:  "dependency cycle: a -> b -> a\ndependency cycle: c -> b -> c",
		},
		{
			name:  "shortest cycle through the smallest member first",
			edges: []string{"a -> b", "b -> c", "c -> d", "d -> a", "b -> a"},
			want:  "dependency cycle: a -> b -> a\ndependency cycle: c -> d -> a -> b -> c",
		},
		{
			name:  "self loop inside a larger cycle",
			edges: []string{"a -> a", "a -> b", "b -> a"},
			want:  "dependency cycle: a -> a\ndependency cycle: b -> a -> b",
		},
		{
			name:  "cycle and self loop apart",
			edges: []string{"z -> z", "m -> n", "n -> m", "q -> m"},
			want:  "dependency cycle: m -> n -> m\ndependency cycle: z -> z",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := build(tt.edges...).Validate()
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate() = nil, want %q", tt.want)
			}
			if diff := cmp.Diff(tt.want, err.Error()); diff != "" {
				t.Errorf("Validate() (-want +got):\n%s", diff)
			}
			var ce *CycleError
			if !errors.As(err, &ce) {
				t.Errorf("Validate() returned %T, want *CycleError", err)
			}
		})
	}
}

func TestValidateIsDeterministic(t *testing.T) {
	edges := []string{"agent.x -> agent.y", "agent.y -> agent.x", "agent.b -> agent.c", "agent.c -> agent.b", "agent.c -> agent.c"}
	want := build(edges...).Validate().Error()
	for range 20 {
		shuffled := append([]string(nil), edges...)
		rand.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		if got := build(shuffled...).Validate().Error(); got != want {
			t.Fatalf("insertion order %v changed the report:\n%s\nwant:\n%s", shuffled, got, want)
		}
	}
}

func TestValidateTangled(t *testing.T) {
	// A hub every spoke depends on and that depends on every spoke: one
	// strongly connected set with a cycle per spoke.
	var edges []string
	for i := range 20 {
		spoke := fmt.Sprintf("b.spoke%02d", i)
		edges = append(edges, "a.hub -> "+spoke, spoke+" -> a.hub")
	}
	err := build(edges...).Validate()
	var ce *CycleError
	if !errors.As(err, &ce) {
		t.Fatalf("Validate() = %v, want *CycleError", err)
	}
	if len(ce.Cycles) != maxCyclesPerKnot {
		t.Errorf("listed %d cycles, want %d", len(ce.Cycles), maxCyclesPerKnot)
	}
	if got, want := ce.Cycles[0].String(), "a.hub -> b.spoke00 -> a.hub"; got != want {
		t.Errorf("first cycle %q, want %q", got, want)
	}
	if got, want := ce.Cycles[1].String(), "b.spoke01 -> a.hub -> b.spoke01"; got != want {
		t.Errorf("second cycle %q, want %q", got, want)
	}
	want := []string{"b.spoke16", "b.spoke17", "b.spoke18", "b.spoke19"}
	if diff := cmp.Diff(want, names(ce.Tangled)); diff != "" {
		t.Errorf("Tangled (-want +got):\n%s", diff)
	}
	if !strings.HasSuffix(err.Error(), "\ndependency cycle: also through b.spoke16, b.spoke17, b.spoke18, b.spoke19") {
		t.Errorf("message does not name the tangled vertices:\n%s", err)
	}
}

// TestValidateRandom checks Validate against a naive oracle on random graphs:
// a vertex is on a cycle when it reaches itself. Every reported cycle must be
// made of real edges, and every vertex on a cycle must be named.
func TestValidateRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for round := range 300 {
		n := 1 + r.IntN(12)
		g := &Graph{}
		adj := make([][]bool, n)
		for i := range n {
			adj[i] = make([]bool, n)
			g.Add(v(fmt.Sprint(i)))
		}
		for range r.IntN(2 * n) {
			a, b := r.IntN(n), r.IntN(n)
			adj[a][b] = true
			g.Connect(v(fmt.Sprint(a)), v(fmt.Sprint(b)))
		}
		// reach[i][j]: a path of one or more edges from i to j.
		reach := make([][]bool, n)
		for i := range n {
			reach[i] = append([]bool(nil), adj[i]...)
		}
		for k := range n {
			for i := range n {
				for j := range n {
					reach[i][j] = reach[i][j] || reach[i][k] && reach[k][j]
				}
			}
		}
		onCycle := map[string]bool{}
		for i := range n {
			if reach[i][i] {
				onCycle[fmt.Sprint(i)] = true
			}
		}
		err := g.Validate()
		order, orderErr := g.TopologicalOrder()
		if len(onCycle) == 0 {
			if err != nil || orderErr != nil {
				t.Fatalf("round %d: acyclic graph gave %v / %v", round, err, orderErr)
			}
			checkOrder(t, g, order)
			continue
		}
		if orderErr == nil || err == nil || orderErr.Error() != err.Error() {
			t.Fatalf("round %d: cyclic graph gave %v / %v", round, err, orderErr)
		}
		ce := err.(*CycleError)
		named := map[string]bool{}
		for _, c := range ce.Cycles {
			for k, x := range c {
				y := c[(k+1)%len(c)]
				a, b := mustAtoi(x.Name()), mustAtoi(y.Name())
				if !adj[a][b] {
					t.Fatalf("round %d: reported cycle %s uses a missing edge %s -> %s", round, c, x.Name(), y.Name())
				}
				named[x.Name()] = true
			}
		}
		if diff := cmp.Diff(onCycle, named); diff != "" {
			t.Fatalf("round %d: vertices on cycles (-want +got):\n%s\n%s", round, diff, g)
		}
	}
}

func mustAtoi(s string) int {
	var i int
	if _, err := fmt.Sscan(s, &i); err != nil {
		panic(err)
	}
	return i
}

// checkOrder fails unless order holds every vertex once, each after all its
// dependencies.
func checkOrder(t *testing.T, g *Graph, order []Vertex) {
	t.Helper()
	pos := map[string]int{}
	for i, x := range order {
		if _, dup := pos[x.Name()]; dup {
			t.Fatalf("%s twice in the order", x.Name())
		}
		pos[x.Name()] = i
	}
	if len(pos) != g.Len() {
		t.Fatalf("order has %d vertices, graph %d", len(pos), g.Len())
	}
	for _, x := range order {
		for _, d := range g.Dependencies(x) {
			if pos[d.Name()] > pos[x.Name()] {
				t.Fatalf("%s placed before its dependency %s", x.Name(), d.Name())
			}
		}
	}
}

func TestTopologicalOrder(t *testing.T) {
	tests := []struct {
		name  string
		edges []string
		want  []string
	}{
		{"lone vertices by name", []string{"c", "a", "b"}, []string{"a", "b", "c"}},
		{"chain", []string{"a -> b", "b -> c"}, []string{"c", "b", "a"}},
		{
			"agents and what they own",
			[]string{
				"agent.b -> agent.b.network", "agent.b -> runtime.default",
				"agent.a -> agent.a.network", "agent.a -> runtime.default",
				"agent.a.network -> runtime.default", "agent.b.network -> runtime.default",
			},
			[]string{"runtime.default", "agent.a.network", "agent.a", "agent.b.network", "agent.b"},
		},
		{"ties broken by name once ready", []string{"z -> a", "b"}, []string{"a", "b", "z"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := build(tt.edges...)
			got, err := g.TopologicalOrder()
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, names(got)); diff != "" {
				t.Errorf("TopologicalOrder (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTopologicalOrderCycle(t *testing.T) {
	g := build("agent.a -> agent.b", "agent.b -> agent.a", "agent.c")
	got, err := g.TopologicalOrder()
	if got != nil {
		t.Errorf("TopologicalOrder gave an order %v for a cyclic graph", names(got))
	}
	if err == nil || err.Error() != "dependency cycle: agent.a -> agent.b -> agent.a" {
		t.Errorf("TopologicalOrder error = %v", err)
	}
}

func TestString(t *testing.T) {
	g := build("agent.b -> runtime.default", "agent.a -> runtime.default", "agent.a -> agent.a.network", "lone")
	want := `agent.a -> agent.a.network, runtime.default
agent.a.network
agent.b -> runtime.default
lone
runtime.default
`
	if diff := cmp.Diff(want, g.String()); diff != "" {
		t.Errorf("String (-want +got):\n%s", diff)
	}
}

func TestDot(t *testing.T) {
	g := build("agent.b -> runtime.default", "agent.a -> runtime.default", "agent.a -> agent.a.network")
	g.Add(v(`odd "name" \`))
	want := `digraph {
	"agent.a"
	"agent.a.network"
	"agent.b"
	"odd \"name\" \\"
	"runtime.default"
	"agent.a" -> "agent.a.network"
	"agent.a" -> "runtime.default"
	"agent.b" -> "runtime.default"
}
`
	if diff := cmp.Diff(want, g.Dot()); diff != "" {
		t.Errorf("Dot (-want +got):\n%s", diff)
	}
}

// agents builds the graph of a plan of n agents: a runtime, and per agent a
// network and a container on it; every tenth agent also depends on the agent
// before it.
func agents(n int) *Graph {
	g := &Graph{}
	rt := v("runtime.default")
	g.Add(rt)
	for i := range n {
		a := v(fmt.Sprintf("agent.a%05d", i))
		net := v(fmt.Sprintf("agent.a%05d.network", i))
		g.Connect(net, rt)
		g.Connect(a, net)
		g.Connect(a, rt)
		if i%10 == 9 {
			g.Connect(a, v(fmt.Sprintf("agent.a%05d", i-1)))
		}
	}
	return g
}

func TestLargeGraph(t *testing.T) {
	g := agents(10_000)
	if g.Len() != 20_001 {
		t.Fatalf("Len() = %d", g.Len())
	}
	if err := g.Validate(); err != nil {
		t.Fatal(err)
	}
	order, err := g.TopologicalOrder()
	if err != nil {
		t.Fatal(err)
	}
	checkOrder(t, g, order)
	if got := len(g.Dependents(v("runtime.default"))); got != 20_000 {
		t.Errorf("runtime has %d dependents, want 20000", got)
	}

	// A ring through every agent is one cycle that names all of them.
	ring := agents(10_000)
	for i := range 10_000 {
		ring.Connect(v(fmt.Sprintf("agent.a%05d", i)), v(fmt.Sprintf("agent.a%05d", (i+1)%10_000)))
	}
	var ce *CycleError
	if !errors.As(ring.Validate(), &ce) {
		t.Fatal("ring not reported")
	}
	total := 0
	for _, c := range ce.Cycles {
		total += len(c)
	}
	if total < 10_000 || len(ce.Tangled) != 0 && total+len(ce.Tangled) < 10_000 {
		t.Errorf("ring of 10000 reported with %d listed members and %d tangled", total, len(ce.Tangled))
	}
}

func BenchmarkBuild(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		agents(10_000)
	}
}

func BenchmarkValidate(b *testing.B) {
	g := agents(10_000)
	b.ReportAllocs()
	for b.Loop() {
		if err := g.Validate(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkTopologicalOrder(b *testing.B) {
	g := agents(10_000)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := g.TopologicalOrder(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkString(b *testing.B) {
	g := agents(10_000)
	b.ReportAllocs()
	for b.Loop() {
		_ = g.String()
	}
}

func BenchmarkValidateRing(b *testing.B) {
	g := agents(10_000)
	for i := range 10_000 {
		g.Connect(v(fmt.Sprintf("agent.a%05d", i)), v(fmt.Sprintf("agent.a%05d", (i+1)%10_000)))
	}
	b.ReportAllocs()
	for b.Loop() {
		if g.Validate() == nil {
			b.Fatal("no cycle")
		}
	}
}

// TestKnots is the table of the shared cycle finder: which vertices form
// each knot, and the cycles it names, in the order lang and Validate report
// them.
func TestKnots(t *testing.T) {
	type knot struct {
		Members []string
		Cycles  []string
		Tangled []string
	}
	tests := []struct {
		name  string
		edges []string
		want  []knot
	}{
		{name: "empty"},
		{name: "acyclic", edges: []string{"a -> b", "b -> c", "a -> c", "d"}},
		{
			name:  "self loop",
			edges: []string{"agent.d -> agent.d", "agent.e -> agent.d"},
			want:  []knot{{Members: []string{"agent.d"}, Cycles: []string{"agent.d -> agent.d"}}},
		},
		{
			name:  "ring through a local",
			edges: []string{"agent.a -> agent.b", "agent.b -> local.x", "local.x -> agent.c", "agent.c -> agent.a", "agent.z -> agent.a"},
			want: []knot{{
				Members: []string{"agent.a", "agent.b", "agent.c", "local.x"},
				Cycles:  []string{"agent.a -> agent.b -> local.x -> agent.c -> agent.a"},
			}},
		},
		{
			name:  "figure eight",
			edges: []string{"a -> b", "b -> a", "b -> c", "c -> b"},
			want: []knot{{
				Members: []string{"a", "b", "c"},
				Cycles:  []string{"a -> b -> a", "c -> b -> c"},
			}},
		},
		{
			name:  "two knots in order of their smallest member",
			edges: []string{"z -> z", "m -> n", "n -> m", "q -> m"},
			want: []knot{
				{Members: []string{"m", "n"}, Cycles: []string{"m -> n -> m"}},
				{Members: []string{"z"}, Cycles: []string{"z -> z"}},
			},
		},
		{
			name:  "shortest cycle first",
			edges: []string{"a -> b", "b -> c", "c -> d", "d -> a", "b -> a"},
			want: []knot{{
				Members: []string{"a", "b", "c", "d"},
				Cycles:  []string{"a -> b -> a", "c -> d -> a -> b -> c"},
			}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []knot
			for _, k := range build(tt.edges...).Knots() {
				g := knot{Members: names(k.Members), Tangled: names(k.Tangled)}
				for _, c := range k.Cycles {
					g.Cycles = append(g.Cycles, c.String())
				}
				got = append(got, g)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Knots() (-want +got):\n%s", diff)
			}
		})
	}
}

// TestKnotsTangled: a knot with more cycles than it lists names the rest in
// Tangled, and Validate reports the same sets.
func TestKnotsTangled(t *testing.T) {
	var edges []string
	for i := range 20 {
		spoke := fmt.Sprintf("b.spoke%02d", i)
		edges = append(edges, "a.hub -> "+spoke, spoke+" -> a.hub")
	}
	knots := build(edges...).Knots()
	if len(knots) != 1 {
		t.Fatalf("Knots() = %d knots, want 1", len(knots))
	}
	k := knots[0]
	if len(k.Members) != 21 || len(k.Cycles) != maxCyclesPerKnot {
		t.Errorf("members %d cycles %d, want 21 and %d", len(k.Members), len(k.Cycles), maxCyclesPerKnot)
	}
	want := []string{"b.spoke16", "b.spoke17", "b.spoke18", "b.spoke19"}
	if diff := cmp.Diff(want, names(k.Tangled)); diff != "" {
		t.Errorf("Tangled (-want +got):\n%s", diff)
	}
}
