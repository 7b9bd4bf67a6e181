package planner

import (
	"time"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/state"
)

// A runtime of several machines (swarm) starts a new instance of a
// workload by itself when the node it ran on goes down or is drained, or
// when it fails: the new instance runs from the workload's image (or the
// snapshot it was created from), without what the old one wrote. The
// driver reports the running instance (drivers.LiveObject.Instance) and
// records the one it started (drivers.ComputedInstance); when they
// differ, the plan says so in words, with the nodes, and resumes the
// agent from its newest snapshot when one is newer than what the new
// instance booted from. Otherwise it records the new instance, so the
// next plan does not say it again.

// restartedByRuntime reports whether the live instance of a recorded
// workload is one the runtime started by itself: running, or still
// being started.
func restartedByRuntime(rec *state.Record, lo *drivers.LiveObject) bool {
	was := rec.Computed[drivers.ComputedInstance]
	return was != "" && lo.Instance != "" && lo.Instance != was
}

// restartedParams are what a reason about a workload the runtime
// restarted says (restartedText): "agent.coder was restarted by the
// cluster on node3 from its image (node node2 is down)"; and where what
// the old instance wrote was (lost_node).
func restartedParams(addr string, rec *state.Record, lo *drivers.LiveObject, more ...string) []string {
	return append([]string{"addr", addr, "node", lo.Node, "boot_from", rec.Computed[BootFromKey], "restart_cause", lo.Restarted,
		"lost_node", rec.Computed[drivers.ComputedNode]}, more...)
}

// planRestarted decides what becomes of a workload the runtime restarted
// (w.Restarted, an Update that only records it so far): with resume on
// and a snapshot of the agent newer than what the new instance booted
// from, it is replaced by one resumed from the newest snapshot;
// otherwise only the new instance is recorded. Either way the plan says
// what happened and what was lost.
func planRestarted(w *Change, ofAgent []*Change, ap *agentPlan, now time.Time) {
	rec, lo := w.Prior, w.Live
	record := func(code ReasonCode, more ...string) {
		w.Reasons = []Reason{because(code, restartedParams(w.Addr, rec, lo, more...)...)}
	}
	switch {
	case !ap.val.Resume:
		record(ReasonRestartNoResume)
		return
	case ap.agent.FromSnapshot != "":
		record(ReasonRestartPinned, "snapshot", ap.agent.FromSnapshot)
		return
	}
	// What the new instance booted from, and when that was taken; a
	// snapshot taken after it is newer.
	var booted time.Time
	if b := rec.Computed[BootFromKey]; b != "" {
		booted = lo.Created
		for _, c := range ofAgent {
			if c.Addr == b && c.Prior != nil {
				if t := recorded(c).Created; !t.IsZero() {
					booted = t
				}
			}
		}
	}
	var newest *Change
	var newestAt time.Time
	for _, c := range ofAgent {
		if c.Prior == nil || c.Action == Delete || c.Action == Forget || snapshotAgent(c) != ap.agent.Addr() {
			continue
		}
		created := recorded(c).Created
		if created.IsZero() || !created.After(booted) {
			continue
		}
		if newest == nil || created.After(newestAt) {
			newest, newestAt = c, created
		}
	}
	if newest == nil {
		record(ReasonRestartNoNewer)
		return
	}
	w.Action, w.StateOnly, w.BootFrom = Replace, false, newest.Addr
	w.Reasons = []Reason{
		because(ReasonRestartResumed, restartedParams(w.Addr, rec, lo, "snapshot", newest.Addr, "taken", clock(newestAt, now))...),
		because(ReasonRestartLost, "lost_node", rec.Computed[drivers.ComputedNode], "snapshot", newest.Addr),
	}
	if !lo.Started.IsZero() {
		w.Reasons = append(w.Reasons, because(ReasonRestartReplaced, "started", clock(lo.Started, now)))
	}
}

// clock writes a time of today as "15:04 UTC", an older one with its date.
func clock(t, now time.Time) string {
	t = t.UTC()
	if t.Format(time.DateOnly) == now.UTC().Format(time.DateOnly) {
		return t.Format("15:04 UTC")
	}
	return t.Format("2006-01-02 15:04 UTC")
}
