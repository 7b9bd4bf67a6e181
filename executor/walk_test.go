package executor

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/hcl/v2"

	"github.com/bottlefile/bottlefile/planner/dag"
)

// node is a vertex that is just its name.
type node string

func (n node) Name() string { return string(n) }

// graph makes a graph from "dependent -> dependency" edges and lone vertices.
func graph(edges ...string) *dag.Graph {
	g := &dag.Graph{}
	for _, e := range edges {
		from, to, ok := strings.Cut(e, " -> ")
		if !ok {
			g.Add(node(e))
			continue
		}
		g.Connect(node(from), node(to))
	}
	return g
}

func errorDiag(summary string) hcl.Diagnostics {
	return hcl.Diagnostics{{Severity: hcl.DiagError, Summary: summary}}
}

func warningDiag(summary string) hcl.Diagnostics {
	return hcl.Diagnostics{{Severity: hcl.DiagWarning, Summary: summary}}
}

// recorder keeps what a walk did, for the assertions.
type recorder struct {
	mu      sync.Mutex // guards every field below
	events  []string   // "start x" and "end x", in the order they happened
	skipped map[string]string
}

func (r *recorder) event(e string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

func (r *recorder) onSkip(v, cause dag.Vertex) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.skipped == nil {
		r.skipped = map[string]string{}
	}
	c := "<stopped>"
	if cause != nil {
		c = cause.Name()
	}
	if _, dup := r.skipped[v.Name()]; dup {
		panic("OnSkip called twice for " + v.Name())
	}
	r.skipped[v.Name()] = c
}

// ran lists the vertices whose fn started, sorted.
func (r *recorder) ran() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, e := range r.events {
		if name, ok := strings.CutPrefix(e, "start "); ok {
			out = append(out, name)
		}
	}
	if out == nil {
		return nil
	}
	slices.Sort(out)
	return out
}

func TestWalkOrder(t *testing.T) {
	edges := []string{
		"d -> b", "d -> c", "b -> a", "c -> a", // a diamond
		"f -> e", "g -> d", "g -> f", "h",
	}
	for round := range 20 {
		g := graph(edges...)
		var rec recorder
		w := &Walker{Parallelism: 3, OnSkip: rec.onSkip}
		diags := w.Walk(t.Context(), g, func(ctx context.Context, v dag.Vertex) hcl.Diagnostics {
			rec.event("start " + v.Name())
			rec.event("end " + v.Name())
			return nil
		})
		if len(diags) != 0 {
			t.Fatalf("round %d: diagnostics %v", round, diags)
		}
		if len(rec.skipped) != 0 {
			t.Fatalf("round %d: skipped %v", round, rec.skipped)
		}
		pos := map[string]int{}
		for i, e := range rec.events {
			if _, dup := pos[e]; dup {
				t.Fatalf("round %d: %q twice", round, e)
			}
			pos[e] = i
		}
		for _, v := range g.Vertices() {
			start, ok := pos["start "+v.Name()]
			if !ok {
				t.Fatalf("round %d: %s never ran", round, v.Name())
			}
			for _, d := range g.Dependencies(v) {
				if end := pos["end "+d.Name()]; end > start {
					t.Fatalf("round %d: %s started before its dependency %s ended: %v", round, v.Name(), d.Name(), rec.events)
				}
			}
		}
	}
}

// checkParallelism runs n independent vertices that each block until the
// test releases them, and reports the most that ran at once.
func checkParallelism(t *testing.T, parallelism, want, n int) {
	t.Helper()
	g := &dag.Graph{}
	for i := range n {
		g.Add(node(fmt.Sprintf("v%03d", i)))
	}
	var running, most atomic.Int64
	started := make(chan string, n)
	release := make(chan struct{})
	w := &Walker{Parallelism: parallelism}
	done := make(chan hcl.Diagnostics)
	go func() {
		done <- w.Walk(t.Context(), g, func(ctx context.Context, v dag.Vertex) hcl.Diagnostics {
			now := running.Add(1)
			for {
				m := most.Load()
				if now <= m || most.CompareAndSwap(m, now) {
					break
				}
			}
			started <- v.Name()
			<-release
			running.Add(-1)
			return nil
		})
	}()
	// Fill every slot, then free one slot at a time: each release lets
	// exactly one more vertex start.
	for range want {
		<-started
	}
	for range n - want {
		release <- struct{}{}
		<-started
	}
	for range want {
		release <- struct{}{}
	}
	if diags := <-done; len(diags) != 0 {
		t.Fatal(diags)
	}
	if got := most.Load(); got != int64(want) {
		t.Errorf("at most %d ran at once, want %d", got, want)
	}
}

func TestWalkParallelism(t *testing.T) {
	t.Run("three", func(t *testing.T) { checkParallelism(t, 3, 3, 40) })
	t.Run("one", func(t *testing.T) { checkParallelism(t, 1, 1, 10) })
	t.Run("default", func(t *testing.T) { checkParallelism(t, 0, DefaultParallelism, 40) })
}

// TestWalkParallelismLarge walks a wide graph with dependencies and checks the
// cap holds over twenty thousand vertices.
func TestWalkParallelismLarge(t *testing.T) {
	g := &dag.Graph{}
	rt := node("runtime.default")
	g.Add(rt)
	for i := range 10_000 {
		net := node(fmt.Sprintf("agent.a%05d.network", i))
		a := node(fmt.Sprintf("agent.a%05d", i))
		g.Connect(net, rt)
		g.Connect(a, net)
	}
	var running, most, calls atomic.Int64
	w := &Walker{Parallelism: 7}
	diags := w.Walk(t.Context(), g, func(ctx context.Context, v dag.Vertex) hcl.Diagnostics {
		now := running.Add(1)
		for {
			m := most.Load()
			if now <= m || most.CompareAndSwap(m, now) {
				break
			}
		}
		calls.Add(1)
		running.Add(-1)
		return nil
	})
	if len(diags) != 0 {
		t.Fatal(diags)
	}
	if got := calls.Load(); got != 20_001 {
		t.Errorf("fn called %d times, want 20001", got)
	}
	if got := most.Load(); got > 7 {
		t.Errorf("%d ran at once, limit 7", got)
	}
}

func TestWalkFailureSkipsOnlyDependents(t *testing.T) {
	g := graph(
		"b -> a", "c -> b", // a chain on a
		"e -> a", "e -> d", // e needs a and d
		"w -> v", // v only warns: w still runs
		"f",
	)
	var rec recorder
	w := &Walker{OnSkip: rec.onSkip}
	diags := w.Walk(t.Context(), g, func(ctx context.Context, v dag.Vertex) hcl.Diagnostics {
		rec.event("start " + v.Name())
		switch v.Name() {
		case "a":
			return errorDiag("a failed")
		case "d":
			return warningDiag("d warns")
		case "v":
			return warningDiag("v warns")
		}
		return nil
	})
	if diff := cmp.Diff([]string{"a", "d", "f", "v", "w"}, rec.ran()); diff != "" {
		t.Errorf("ran (-want +got):\n%s", diff)
	}
	wantSkipped := map[string]string{"b": "a", "c": "b", "e": "a"}
	if diff := cmp.Diff(wantSkipped, rec.skipped); diff != "" {
		t.Errorf("skipped (-want +got):\n%s", diff)
	}
	want := hcl.Diagnostics{}
	want = append(want, errorDiag("a failed")...)
	want = append(want, warningDiag("d warns")...)
	want = append(want, warningDiag("v warns")...)
	if diff := cmp.Diff(want, diags); diff != "" {
		t.Errorf("diagnostics (-want +got):\n%s", diff)
	}
}

func TestWalkFailureCauseIsDeterministic(t *testing.T) {
	// z depends on two failing vertices; the cause is the first by name,
	// whichever failed first.
	for range 20 {
		var rec recorder
		w := &Walker{OnSkip: rec.onSkip}
		w.Walk(t.Context(), graph("z -> m", "z -> b", "z -> q"), func(ctx context.Context, v dag.Vertex) hcl.Diagnostics {
			if v.Name() == "q" {
				return nil
			}
			return errorDiag(v.Name())
		})
		if diff := cmp.Diff(map[string]string{"z": "b"}, rec.skipped); diff != "" {
			t.Fatalf("skipped (-want +got):\n%s", diff)
		}
	}
}

func TestWalkDiagnosticsByName(t *testing.T) {
	g := &dag.Graph{}
	var want hcl.Diagnostics
	for i := range 50 {
		name := fmt.Sprintf("v%02d", i)
		g.Add(node(name))
		want = append(want, warningDiag(name+" first")...)
		want = append(want, warningDiag(name+" second")...)
	}
	w := &Walker{Parallelism: 8}
	got := w.Walk(t.Context(), g, func(ctx context.Context, v dag.Vertex) hcl.Diagnostics {
		return append(warningDiag(v.Name()+" first"), warningDiag(v.Name()+" second")...)
	})
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("diagnostics (-want +got):\n%s", diff)
	}
}

type ctxKey struct{}

func TestWalkStopLetsRunningFinish(t *testing.T) {
	ctx, cancel := context.WithCancel(context.WithValue(t.Context(), ctxKey{}, "value"))
	defer cancel()
	g := graph("b -> a", "c -> b")
	started := make(chan struct{})
	proceed := make(chan struct{})
	var fnErr, fnValue any
	var rec recorder
	w := &Walker{OnSkip: rec.onSkip}
	done := make(chan hcl.Diagnostics)
	go func() {
		done <- w.Walk(ctx, g, func(ctx context.Context, v dag.Vertex) hcl.Diagnostics {
			rec.event("start " + v.Name())
			close(started) // only a may start: a second call would panic
			<-proceed
			fnErr, fnValue = ctx.Err(), ctx.Value(ctxKey{})
			rec.event("end " + v.Name())
			return nil
		})
	}()
	<-started
	cancel()
	close(proceed)
	if diags := <-done; len(diags) != 0 {
		t.Fatal(diags)
	}
	if fnErr != nil {
		t.Errorf("the running vertex's context was cancelled by the walk's: %v", fnErr)
	}
	if fnValue != "value" {
		t.Errorf("the running vertex's context lost the walk context's values: %v", fnValue)
	}
	if diff := cmp.Diff([]string{"start a", "end a"}, rec.events); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{"b": "<stopped>", "c": "<stopped>"}, rec.skipped); diff != "" {
		t.Errorf("skipped (-want +got):\n%s", diff)
	}
}

func TestWalkStopWhileWaitingForASlot(t *testing.T) {
	// With one slot, one of x and y runs and the other waits for the slot
	// when the walk stops: it must give up, not start.
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	started := make(chan string, 2)
	proceed := make(chan struct{})
	var rec recorder
	w := &Walker{Parallelism: 1, OnSkip: rec.onSkip}
	done := make(chan hcl.Diagnostics)
	go func() {
		done <- w.Walk(ctx, graph("x", "y", "z -> x", "z -> y"), func(ctx context.Context, v dag.Vertex) hcl.Diagnostics {
			rec.event("start " + v.Name())
			started <- v.Name()
			<-proceed
			return nil
		})
	}()
	first := <-started
	cancel()
	close(proceed)
	<-done
	if diff := cmp.Diff([]string{first}, rec.ran()); diff != "" {
		t.Errorf("ran (-want +got):\n%s", diff)
	}
	other := map[string]string{"x": "y", "y": "x"}[first]
	want := map[string]string{other: "<stopped>", "z": "<stopped>"}
	if diff := cmp.Diff(want, rec.skipped); diff != "" {
		t.Errorf("skipped (-want +got):\n%s", diff)
	}
}

func TestWalkStoppedBeforeStart(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	var rec recorder
	w := &Walker{OnSkip: rec.onSkip}
	diags := w.Walk(ctx, graph("b -> a", "c"), func(ctx context.Context, v dag.Vertex) hcl.Diagnostics {
		rec.event("start " + v.Name())
		return nil
	})
	if len(diags) != 0 {
		t.Error(diags)
	}
	if got := rec.ran(); got != nil {
		t.Errorf("ran %v after the walk was stopped", got)
	}
	want := map[string]string{"a": "<stopped>", "b": "<stopped>", "c": "<stopped>"}
	if diff := cmp.Diff(want, rec.skipped); diff != "" {
		t.Errorf("skipped (-want +got):\n%s", diff)
	}
}

func TestWalkFailureWinsOverStop(t *testing.T) {
	// c depends on a, which fails, and on b, which is skipped because s
	// stops the walk after a failed: the failure is the cause worth reporting.
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	aFailed := make(chan struct{})
	var rec recorder
	w := &Walker{Parallelism: 2, OnSkip: rec.onSkip}
	w.Walk(ctx, graph("b -> s", "c -> a", "c -> b"), func(ctx context.Context, v dag.Vertex) hcl.Diagnostics {
		rec.event("start " + v.Name())
		switch v.Name() {
		case "a":
			close(aFailed)
			return errorDiag("a failed")
		case "s":
			<-aFailed
			cancel()
		}
		return nil
	})
	if diff := cmp.Diff([]string{"a", "s"}, rec.ran()); diff != "" {
		t.Errorf("ran (-want +got):\n%s", diff)
	}
	want := map[string]string{"b": "<stopped>", "c": "a"}
	if diff := cmp.Diff(want, rec.skipped); diff != "" {
		t.Errorf("skipped (-want +got):\n%s", diff)
	}
}

func TestWalkAbandon(t *testing.T) {
	abandon, abandonNow := context.WithCancel(context.Background())
	defer abandonNow()
	started := make(chan struct{})
	var fnErr error
	var rec recorder
	w := &Walker{Abandon: abandon, OnSkip: rec.onSkip}
	done := make(chan hcl.Diagnostics)
	go func() {
		done <- w.Walk(t.Context(), graph("b -> a"), func(ctx context.Context, v dag.Vertex) hcl.Diagnostics {
			rec.event("start " + v.Name())
			close(started) // only a may start
			<-ctx.Done()
			fnErr = ctx.Err()
			return errorDiag("a abandoned")
		})
	}()
	<-started
	abandonNow()
	diags := <-done
	if !errors.Is(fnErr, context.Canceled) {
		t.Errorf("running vertex's context error = %v, want context.Canceled", fnErr)
	}
	if diff := cmp.Diff(errorDiag("a abandoned"), diags); diff != "" {
		t.Errorf("diagnostics (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{"b": "a"}, rec.skipped); diff != "" {
		t.Errorf("skipped (-want +got):\n%s", diff)
	}
}

func TestWalkAbandonedBeforeStart(t *testing.T) {
	abandon, abandonNow := context.WithCancel(context.Background())
	abandonNow()
	var rec recorder
	w := &Walker{Abandon: abandon, OnSkip: rec.onSkip}
	w.Walk(t.Context(), graph("b -> a", "c"), func(ctx context.Context, v dag.Vertex) hcl.Diagnostics {
		rec.event("start " + v.Name())
		return nil
	})
	if got := rec.ran(); got != nil {
		t.Errorf("ran %v after the walk was abandoned", got)
	}
	want := map[string]string{"a": "<stopped>", "b": "<stopped>", "c": "<stopped>"}
	if diff := cmp.Diff(want, rec.skipped); diff != "" {
		t.Errorf("skipped (-want +got):\n%s", diff)
	}
}

func TestWalkCycle(t *testing.T) {
	var called atomic.Bool
	w := &Walker{}
	diags := w.Walk(t.Context(), graph("agent.a -> agent.b", "agent.b -> agent.a", "agent.c"), func(ctx context.Context, v dag.Vertex) hcl.Diagnostics {
		called.Store(true)
		return nil
	})
	want := hcl.Diagnostics{{
		Severity: hcl.DiagError,
		Summary:  "Dependency cycle",
		Detail:   "dependency cycle: agent.a -> agent.b -> agent.a",
	}}
	if diff := cmp.Diff(want, diags); diff != "" {
		t.Errorf("diagnostics (-want +got):\n%s", diff)
	}
	if called.Load() {
		t.Error("fn was called on a cyclic graph")
	}
}

func TestWalkEmpty(t *testing.T) {
	w := &Walker{}
	fn := func(ctx context.Context, v dag.Vertex) hcl.Diagnostics { panic("called") }
	if diags := w.Walk(t.Context(), &dag.Graph{}, fn); diags != nil {
		t.Error(diags)
	}
	if diags := w.Walk(t.Context(), nil, fn); diags != nil {
		t.Error(diags)
	}
}

func BenchmarkWalk(b *testing.B) {
	g := &dag.Graph{}
	rt := node("runtime.default")
	g.Add(rt)
	for i := range 10_000 {
		net := node(fmt.Sprintf("agent.a%05d.network", i))
		g.Connect(net, rt)
		g.Connect(node(fmt.Sprintf("agent.a%05d", i)), net)
	}
	w := &Walker{}
	fn := func(ctx context.Context, v dag.Vertex) hcl.Diagnostics { return nil }
	b.ReportAllocs()
	for b.Loop() {
		if diags := w.Walk(b.Context(), g, fn); len(diags) != 0 {
			b.Fatal(diags)
		}
	}
}

// TestWalkReleaseSlot: a WalkFunc that gives its slot back lets other
// vertices start while it still runs (apply watching started workloads:
// ten bottles do not wait ten times), and its dependents still wait for
// it to return.
func TestWalkReleaseSlot(t *testing.T) {
	g := graph("a", "b", "c", "after -> a")
	const n = 3
	arrived := make(chan string, n)
	all := make(chan struct{})
	var count atomic.Int64
	rec := &recorder{}
	w := &Walker{Parallelism: 1}
	diags := w.Walk(t.Context(), g, func(ctx context.Context, v dag.Vertex) hcl.Diagnostics {
		rec.event("start " + v.Name())
		defer rec.event("end " + v.Name())
		if v.Name() == "after" {
			return nil
		}
		ReleaseSlot(ctx)
		ReleaseSlot(ctx) // a second call does nothing
		arrived <- v.Name()
		if count.Add(1) == n {
			close(all)
		}
		// With one slot, this returns only if all three gave theirs back.
		select {
		case <-all:
		case <-time.After(5 * time.Second):
			return errorDiag(v.Name() + " waited alone: its released slot was not reused")
		}
		return nil
	})
	if len(diags) != 0 {
		t.Fatal(diags)
	}
	ev := rec.events
	if i, j := slices.Index(ev, "end a"), slices.Index(ev, "start after"); i < 0 || j < i {
		t.Errorf("after started before a returned: %v", ev)
	}
}
