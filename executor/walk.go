package executor

import (
	"context"
	"errors"
	"sync"

	"github.com/hashicorp/hcl/v2"

	"github.com/bottlefile/bottlefile/planner/dag"
)

// DefaultParallelism is how many vertices a Walker runs at once when its
// Parallelism is not set.
const DefaultParallelism = 10

// WalkFunc performs one vertex. A vertex fails when its diagnostics hold an
// error; warnings alone do not fail it. The context is cancelled only when the
// walk is abandoned (Walker.Abandon), never because the walk was stopped.
type WalkFunc func(ctx context.Context, v dag.Vertex) hcl.Diagnostics

// Walker runs a function on every vertex of a graph, each vertex after all its
// dependencies succeeded, up to Parallelism at a time. The zero value is ready
// to use.
type Walker struct {
	// Parallelism caps how many WalkFuncs run at once; DefaultParallelism
	// when <= 0.
	Parallelism int
	// Abandon is optional. When it is done, the context given to running
	// WalkFuncs is cancelled, and no new vertex starts (a second Ctrl-C).
	Abandon context.Context
	// OnSkip is optional. It is called once for every vertex that was not
	// run: cause is the dependency that failed or was itself skipped because
	// of a failure, or nil when the walk was stopped (its context done) before
	// the vertex could start. Calls are serialized, never concurrent with one
	// another, but they run on the walk's goroutines while WalkFuncs run.
	OnSkip func(v dag.Vertex, cause dag.Vertex)
}

// Walk validates g, then calls fn for every vertex of g. It returns when every
// vertex has run or been skipped, so no WalkFunc is still running after it.
//
//   - A vertex starts only after all its dependencies succeeded.
//   - When a vertex fails, its dependents, direct and indirect, are skipped
//     (OnSkip with the dependency that failed or was skipped); vertices that
//     do not depend on it still run.
//   - Once ctx is done no vertex starts: those not started are skipped with a
//     nil cause. Running WalkFuncs go on, with a context that ctx's
//     cancellation does not reach; it carries ctx's values.
//   - Once Abandon is done, the running WalkFuncs' context is cancelled too.
//
// The diagnostics returned are a cycle error from g.Validate (and then nothing
// ran), or else every diagnostic the WalkFuncs returned, warnings included,
// grouped by vertex in the order of the vertices' names. Walk adds none for
// skipped vertices: a stopped walk is visible through ctx.Err and OnSkip.
func (w *Walker) Walk(ctx context.Context, g *dag.Graph, fn WalkFunc) hcl.Diagnostics {
	if g == nil {
		return nil
	}
	if err := g.Validate(); err != nil {
		summary := "Invalid dependency graph"
		if _, ok := errors.AsType[*dag.CycleError](err); ok {
			summary = "Dependency cycle"
		}
		return hcl.Diagnostics{{Severity: hcl.DiagError, Summary: summary, Detail: err.Error()}}
	}

	verts := g.Vertices()
	if len(verts) == 0 {
		return nil
	}
	index := make(map[string]int, len(verts))
	for i, v := range verts {
		index[v.Name()] = i
	}

	parallelism := w.Parallelism
	if parallelism <= 0 {
		parallelism = DefaultParallelism
	}

	// stop is done when no vertex may start any more: ctx or Abandon done.
	stop, cancelStop := context.WithCancel(ctx)
	defer cancelStop()
	// run is what WalkFuncs get: ctx's values, cancelled only by Abandon.
	run, cancelRun := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelRun()
	if w.Abandon != nil {
		abandon := func() {
			cancelRun()
			cancelStop()
		}
		if w.Abandon.Err() != nil {
			abandon() // before any vertex starts, not whenever AfterFunc's goroutine runs
		} else {
			unregister := context.AfterFunc(w.Abandon, abandon)
			defer unregister()
		}
	}

	res := newWalkResults(len(verts), w.OnSkip)
	sem := make(chan struct{}, parallelism)
	var wg sync.WaitGroup
	for i, v := range verts {
		deps := g.Dependencies(v)
		depIdx := make([]int, len(deps))
		for k, d := range deps {
			depIdx[k] = index[d.Name()]
		}
		wg.Go(func() {
			defer close(res.done[i])
			// Dependencies are in name order, so the cause reported for a
			// skip does not depend on which dependency finished first.
			for _, d := range depIdx {
				<-res.done[d]
			}
			var stopped bool
			for _, d := range depIdx {
				switch res.outcome(d) {
				case failed, skippedByFailure:
					res.skip(i, v, verts[d])
					return
				case skippedByStop:
					stopped = true
				}
			}
			if stopped || stop.Err() != nil {
				res.skip(i, v, nil)
				return
			}
			select {
			case sem <- struct{}{}:
			case <-stop.Done():
				res.skip(i, v, nil)
				return
			}
			release := sync.OnceFunc(func() { <-sem })
			defer release()
			// The select picks at random when both are ready.
			if stop.Err() != nil {
				res.skip(i, v, nil)
				return
			}
			res.finish(i, fn(context.WithValue(run, slotKey{}, release), v))
		})
	}
	wg.Wait()
	return res.diagnostics()
}

// slotKey carries, in a WalkFunc's context, the function that gives its
// slot back.
type slotKey struct{}

// ReleaseSlot gives up the parallelism slot of the WalkFunc whose context
// ctx is, so another vertex can start while this one only waits (a
// workload watched after its start). Its dependents still wait for it to
// return. It does nothing outside a walk, or when called again.
func ReleaseSlot(ctx context.Context) {
	if release, ok := ctx.Value(slotKey{}).(func()); ok {
		release()
	}
}

// outcome is what became of one vertex.
type outcome uint8

const (
	pending          outcome = iota
	succeeded                // fn returned no error diagnostics
	failed                   // fn returned error diagnostics
	skippedByFailure         // a dependency failed or was skipped by a failure
	skippedByStop            // the walk was stopped before the vertex started
)

// walkResults is the one place the walk's goroutines share results. Each
// vertex's entry is written once, by its own goroutine, before its done
// channel is closed; dependents read it after that.
type walkResults struct {
	// done[i] is closed when vertex i has finished or been skipped. The
	// slice itself is never written after newWalkResults.
	done []chan struct{}

	mu       sync.Mutex // guards outcomes and diags
	outcomes []outcome
	diags    []hcl.Diagnostics

	skipMu sync.Mutex // serializes calls to onSkip
	onSkip func(v, cause dag.Vertex)
}

func newWalkResults(n int, onSkip func(v, cause dag.Vertex)) *walkResults {
	r := &walkResults{
		done:     make([]chan struct{}, n),
		outcomes: make([]outcome, n),
		diags:    make([]hcl.Diagnostics, n),
		onSkip:   onSkip,
	}
	for i := range r.done {
		r.done[i] = make(chan struct{})
	}
	return r
}

// finish records what vertex i's WalkFunc returned. The diagnostics are
// copied, so the WalkFunc may reuse its slice.
func (r *walkResults) finish(i int, diags hcl.Diagnostics) {
	o := succeeded
	if diags.HasErrors() {
		o = failed
	}
	diags = append(hcl.Diagnostics(nil), diags...)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.outcomes[i] = o
	r.diags[i] = diags
}

// skip records that vertex i did not run and tells onSkip.
func (r *walkResults) skip(i int, v, cause dag.Vertex) {
	o := skippedByStop
	if cause != nil {
		o = skippedByFailure
	}
	r.mu.Lock()
	r.outcomes[i] = o
	r.mu.Unlock()
	if r.onSkip != nil {
		r.skipMu.Lock()
		defer r.skipMu.Unlock()
		r.onSkip(v, cause)
	}
}

func (r *walkResults) outcome(i int) outcome {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.outcomes[i]
}

// diagnostics returns a copy of every vertex's diagnostics, in vertex order.
func (r *walkResults) diagnostics() hcl.Diagnostics {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out hcl.Diagnostics
	for _, d := range r.diags {
		out = append(out, d...)
	}
	return out
}
