package planner

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/lang"
)

// Policies that run on time: snapshot_policy.every, idle.stop_after and
// idle.archive_after. Their due times come from what is recorded and live
// (the newest policy snapshot, the workload's creation and last start or
// stop) and from what the runtime says of the agent's use
// (drivers.ActivityReader), measured against the planner's Clock. Every
// plan says when each is next due (Plan.Due) and acts on none; a tick
// plan (Options.Tick) holds only the actions of those due now.

// The time policies, as Due.Policy names them.
const (
	PolicyEvery   = "snapshot_policy.every"
	PolicyStop    = "idle.stop_after"
	PolicyArchive = "idle.archive_after"
)

// IdleStopReason is the StoppedKey value of a workload a tick stopped
// for idleness (a bottlefile stop records "true"): status says
// "stopped (idle)".
const IdleStopReason = "idle"

// Due is when one time policy of one agent is next due.
type Due struct {
	Agent  string // agent.NAME
	Policy string // PolicyEvery, PolicyStop or PolicyArchive
	// After is the policy's duration (every, stop_after, archive_after).
	After time.Duration
	// At is when it is due; zero when it is not scheduled, Note says why
	// (the agent is busy, stopped, its use is not known).
	At time.Time
	// Since is what At counts from: the newest snapshot or the
	// workload's creation (every); the last use, start or stop (idle).
	Since time.Time
	// Idle is how long the agent has gone unused, for an idle policy
	// whose agent's use is known; 0 otherwise.
	Idle time.Duration
	Note string
	// Now is set in a tick plan on a policy due at the plan's time: its
	// actions are in the plan (or Note says why none is, as for a
	// snapshot of an agent that wrote nothing since the last).
	Now bool
}

// IsDue reports whether the policy is due at now.
func (d Due) IsDue(now time.Time) bool { return !d.At.IsZero() && !d.At.After(now) }

// ArchiveDue are the agents a tick plan archives because their
// idle.archive_after is due.
func (p *Plan) ArchiveDue() []string {
	var out []string
	for _, d := range p.Due {
		if d.Policy == PolicyArchive && d.Now && d.Note == "" {
			out = append(out, d.Agent)
		}
	}
	return out
}

// idleAfter is the shortest idle duration after which one of the
// agent's idle policies can act: stop_after while its workload runs,
// archive_after; 0 when none can (no idle block, or stopped with
// stop_after alone). Its use is asked for in every plan, to say when the
// policy is due, and only as far back as this (IdleSince).
func idleAfter(v lang.AgentValue, w *Change) time.Duration {
	if v.Idle == nil {
		return 0
	}
	after := v.Idle.ArchiveAfter
	if s := v.Idle.StopAfter; s > 0 && w != nil && w.Live != nil && w.Live.Running && (after == 0 || s < after) {
		after = s
	}
	return after
}

// hasTimePolicy reports whether the agent has a policy that runs on time.
func hasTimePolicy(v lang.AgentValue) bool {
	return (v.SnapshotPolicy != nil && v.SnapshotPolicy.Every > 0) ||
		(v.Idle != nil && (v.Idle.StopAfter > 0 || v.Idle.ArchiveAfter > 0))
}

// readActivity asks each runtime that can tell (drivers.ActivityReader),
// once, how recently the agents with an idle policy that can act were
// used (since now less idleAfter: a runtime may spare the CPU reading of
// an agent used after that), and whether they wrote anything since their
// last snapshot. An agent with
// only snapshot_policy.every is not asked: no runtime tells cheaply what
// was written (docker's look costs a sampled stats call, about 2 s, to
// say nil), so its snapshot is taken when due; one with an idle policy
// too is skipped when its runtime says it wrote nothing. A runtime
// that cannot tell, or fails to, leaves its agents out: their idle
// policies wait, and a snapshot on time is taken without asking whether
// anything was written. The error of a failed read is a warning.
func (p *Planner) readActivity(ctx context.Context, changes map[string]*Change, agents map[string]*agentPlan, lineage string) (map[string]drivers.Activity, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	// Not earlier than the now a tick acts by (planTick takes that first):
	// an agent used after now-after is never due by it.
	now := p.now()
	byRuntime := map[string][]string{}
	since := map[string]time.Time{}
	for _, addr := range sortedKeys(agents) {
		w := changes[addr]
		after := idleAfter(agents[addr].val, w)
		if after <= 0 || w == nil || w.Live == nil || w.Prior == nil {
			continue
		}
		byRuntime[w.DeleteRuntime()] = append(byRuntime[w.DeleteRuntime()], addr)
		since[addr] = now.Add(-after)
	}
	out := map[string]drivers.Activity{}
	for _, name := range sortedKeys(byRuntime) {
		rt, ok := p.Runtimes[name]
		if !ok || p.unreachable[name] {
			continue
		}
		ar, ok := drivers.As[drivers.ActivityReader](rt.Driver)
		if !ok {
			continue
		}
		idleSince := map[string]time.Time{}
		for _, addr := range byRuntime[name] {
			idleSince[addr] = since[addr]
		}
		got, err := ar.Activity(ctx, drivers.ActivityRequest{Lineage: lineage, Agents: byRuntime[name], IdleSince: idleSince})
		if err != nil {
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagWarning,
				Summary: fmt.Sprintf("Cannot read the activity of runtime %q", name),
				Detail:  fmt.Sprintf("%s. Idle policies of its agents wait for the next time it can be read.", err)})
			continue
		}
		for _, addr := range byRuntime[name] {
			if a, ok := got[addr]; ok {
				out[addr] = a
			}
		}
	}
	return out, diags
}

// dueTimes is when each time policy of each agent is next due, sorted by
// agent and policy.
func (p *Planner) dueTimes(changes map[string]*Change, agents map[string]*agentPlan, activity map[string]drivers.Activity) []Due {
	now := p.now()
	snaps := indexSnapshots(changes)
	var out []Due
	for _, addr := range sortedKeys(agents) {
		ap := agents[addr]
		if !hasTimePolicy(ap.val) {
			continue
		}
		w := changes[addr]
		if pol := ap.val.SnapshotPolicy; pol != nil && pol.Every > 0 {
			out = append(out, everyDue(addr, pol.Every, w, snaps[addr]))
		}
		if idle := ap.val.Idle; idle != nil {
			act, known := activity[addr]
			if idle.StopAfter > 0 {
				out = append(out, idleDue(addr, PolicyStop, idle.StopAfter, w, act, known, now))
			}
			if idle.ArchiveAfter > 0 {
				out = append(out, idleDue(addr, PolicyArchive, idle.ArchiveAfter, w, act, known, now))
			}
		}
	}
	return out
}

// everyDue is when the agent's next snapshot on time is due: every after
// its newest recorded policy snapshot (whatever took it), or after its
// workload was created when it has none newer.
func everyDue(addr string, every time.Duration, w *Change, snaps []*Change) Due {
	d := Due{Agent: addr, Policy: PolicyEvery, After: every}
	if w != nil && IsArchived(w.Prior) {
		d.Note = "it is archived"
		return d
	}
	if why := notRunning(w); why != "" {
		d.Note = why
		return d
	}
	if w.Live != nil && !w.Live.Created.IsZero() {
		d.Since = w.Live.Created
	} else if w.Prior != nil {
		d.Since = w.Prior.CreatedAt
	}
	for _, s := range snaps {
		if s.Prior == nil || s.Action == Delete || s.Action == Forget {
			continue
		}
		if _, ok := policySnapshotIndex(addr, s.Addr); !ok {
			continue
		}
		if t := recorded(s).Created; t.After(d.Since) {
			d.Since = t
		}
	}
	d.At = d.Since.Add(every)
	return d
}

// idleDue is when an idle policy of the agent is due: after its last use
// (act.LastActive) or its workload's last start or stop, whichever is
// latest. An agent busy now, or whose use its runtime does not report, is
// never idle; one stopped already is not stopped again, and one whose
// workload is gone (archived, or removed outside) is not archived again.
func idleDue(addr, policy string, after time.Duration, w *Change, act drivers.Activity, known bool, now time.Time) Due {
	d := Due{Agent: addr, Policy: policy, After: after}
	switch {
	case w == nil || w.Prior == nil:
		d.Note = "it has never been applied"
		return d
	case IsArchived(w.Prior):
		d.Note = "it is archived"
		return d
	case w.Live == nil:
		d.Note = "its workload is gone from the runtime"
		return d
	case policy == PolicyStop && !w.Live.Running:
		d.Note = "its workload is stopped"
		return d
	case !known || act.LastActive.IsZero():
		d.Note = "its runtime does not report its use"
		return d
	case act.Busy:
		d.Note = "it is busy (an exec session, or its CPU above the threshold)"
		return d
	}
	d.Since = act.LastActive
	for _, t := range []time.Time{w.Live.Started, w.Live.Finished} {
		if t.After(d.Since) {
			d.Since = t
		}
	}
	d.Idle = max(0, now.Sub(d.Since))
	d.At = d.Since.Add(after)
	return d
}

// planTick plans a tick (Options.Tick): the actions of every time policy
// due now, and nothing else. A snapshot on time is taken as snapshot take
// takes one, and pruned by the same retention; it is skipped when the
// runtime says the agent wrote nothing since its last snapshot. An idle
// agent is stopped as bottlefile stop stops it, recorded as stopped for
// idleness. An agent due for archiving is archived as Options.Archive
// archives it (archive.go), instead of stopped; and an archive an earlier
// tick or apply was cut off in is finished, as any plan finishes it.
func (p *Planner) planTick(ctx context.Context, changes map[string]*Change, agents map[string]*agentPlan, lineage string, plan *Plan) hcl.Diagnostics {
	var diags hcl.Diagnostics
	if p.Options.Destroy || p.Options.RefreshOnly || len(p.Options.Take) > 0 || len(p.Options.Stop) > 0 || len(p.Options.Start) > 0 {
		return append(diags, errorDiag("Cannot tick in this plan", "A tick makes a plan of its own, not with -destroy, -refresh-only, a snapshot take, stop or start.", nil))
	}
	now := p.now() // before readActivity's own (see there)
	activity, moreDiags := p.readActivity(ctx, changes, agents, lineage)
	diags = append(diags, moreDiags...)
	plan.Due = p.dueTimes(changes, agents, activity)
	archiving := map[string]bool{}
	for i := range plan.Due {
		d := &plan.Due[i]
		if d.Policy == PolicyArchive && d.IsDue(now) {
			archiving[d.Agent] = true
		}
	}
	snaps := indexSnapshots(changes)
	keep := map[string]bool{}
	bs := bottles(changes)
	archive := func(agent string, why *Reason) {
		b, ap := bs[agent], agents[agent]
		if b == nil || b.workload == nil || ap == nil {
			return
		}
		if d := p.archiveBottle(changes, snaps, b, ap, why); d != nil {
			diags = append(diags, d)
			return
		}
		for _, c := range b.members {
			keep[c.Addr] = true
		}
		for _, c := range snaps[agent] {
			if ArchiveKeeps(c) { // archive.go
				keep[c.Addr] = true
			}
		}
	}
	for _, agent := range sortedKeys(bs) {
		b := bs[agent]
		if b.archived() && !archiving[agent] && slices.ContainsFunc(b.members, func(c *Change) bool { return c.Live != nil || !IsArchived(c.Prior) }) {
			why := because(ReasonArchiveFinish, "agent", agent)
			archive(agent, &why)
		}
	}
	for i := range plan.Due {
		d := &plan.Due[i]
		if !d.IsDue(now) {
			continue
		}
		d.Now = true
		ap, w := agents[d.Agent], changes[d.Agent]
		switch d.Policy {
		case PolicyEvery:
			if archiving[d.Agent] {
				d.Note = "it is archived, which takes a snapshot"
				continue
			}
			if act, ok := activity[d.Agent]; ok && act.Wrote != nil && !*act.Wrote {
				d.Note = "it wrote nothing since its last snapshot"
				continue
			}
			if !stays(w) {
				d.Note = "its workload is " + w.Action.String()
				continue
			}
			taken := newPolicySnapshot(changes, snaps, ap, w, "taken every "+shortDuration(d.After), "every",
				because(ReasonSnapshotEvery, "agent", d.Agent, "every", shortDuration(d.After), "since", shortDuration(now.Sub(d.Since))))
			keep[taken.Addr] = true
			pol := ap.val.SnapshotPolicy
			prune(snaps[d.Agent], d.Agent, pol, taken, p.takenSize(ctx, pol, taken, w, lineage), p.pinned(w), now)
			for _, c := range snaps[d.Agent] {
				if c.Action == Delete && c.Prior != nil && slices.Contains(c.DeleteAfter, taken.Addr) {
					keep[c.Addr] = true
				}
			}
		case PolicyStop:
			if archiving[d.Agent] {
				d.Note = "it is archived instead"
				continue
			}
			stopped := p.stopIdle(changes, d.Agent, because(ReasonIdleStop, "agent", d.Agent, "idle", shortDuration(d.Idle), "stop_after", shortDuration(d.After)))
			if len(stopped) == 0 {
				d.Note = "its workload has a change to apply first, or its runtime cannot stop it"
				if w.Action == NoOp {
					d.Note = "its runtime cannot stop it"
				}
			}
			for _, addr := range stopped {
				keep[addr] = true
			}
		case PolicyArchive:
			archive(d.Agent, nil)
		}
	}
	// Retention a tick cut off between a snapshot and its prunes left
	// undone (an interrupt starts no new step): done now, as any plan
	// would, for the agents with a snapshot on time that took none here.
	for _, addr := range sortedKeys(agents) {
		pol, w := agents[addr].val.SnapshotPolicy, changes[addr]
		if pol == nil || pol.Every <= 0 || w == nil || w.Prior == nil || IsArchived(w.Prior) || !stays(w) || archiving[addr] ||
			slices.ContainsFunc(snaps[addr], func(c *Change) bool { return c.Action == Create }) {
			continue
		}
		prune(snaps[addr], addr, pol, nil, 0, p.pinned(w), now)
		for _, c := range snaps[addr] {
			if c.Action == Delete && c.Prior != nil {
				keep[c.Addr] = true
			}
		}
	}
	for addr, c := range changes {
		// A snapshot image no record holds is what a tick (or an apply)
		// killed between its commit and its record left: removed, as any
		// plan removes it (ReasonLeftoverSnapshot).
		if c.Action == Delete && c.Prior == nil && c.Kind == drivers.KindSnapshot && c.Live != nil && !c.Stray {
			keep[addr] = true
		}
		if !keep[addr] {
			delete(changes, addr)
			continue
		}
		switch {
		case c.Action == Create:
			spec := agents[snapshotAgent(c)].spec
			c.AgentSpec = &spec
		case c.Prior != nil && c.Prior.Workload:
			c.Policy = c.Prior.Computed[PolicyKey] // recorded as applied
		}
	}
	return diags
}

// stopIdle plans stopping the agent's running workloads (its own, its
// sidecars', its gateway's), recorded as stopped for idleness, on a
// runtime that can stop them; it returns their addresses. It stops all of
// them or none: a workload of the bottle with a change to apply first (or
// one its runtime cannot stop) leaves the whole bottle to apply, where
// stopping the rest would leave, say, an agent running without its
// gateway (seen on a loaded swarm: the gateway stopped, the agent's task
// still starting).
func (p *Planner) stopIdle(changes map[string]*Change, agent string, why Reason) []string {
	var stop []string
	for _, addr := range sortedKeys(changes) {
		c := changes[addr]
		if !covers([]string{agent}, c.Addr) || c.Prior == nil || !c.Prior.Workload || c.Stray || c.Twin {
			continue
		}
		if c.Action != NoOp {
			return nil // a change to apply first: apply owns the bottle
		}
		if c.Live == nil || !c.Live.Running {
			continue // stopped already
		}
		if _, ok := drivers.As[drivers.Stopper](p.driverOf(c)); !ok {
			return nil
		}
		stop = append(stop, addr)
	}
	for _, addr := range stop {
		c := changes[addr]
		c.Action, c.StateOnly, c.Changed, c.Forcing = Stop, false, nil, nil
		c.StopReason = IdleStopReason
		c.Reasons = append(c.Reasons, why)
	}
	return stop
}

// shortDuration writes a duration the way a person would say it: "25m",
// "3d", "1h30m", "2s".
func shortDuration(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	switch {
	case d < time.Second:
		return "0s"
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d/time.Minute))
	case d < 24*time.Hour:
		h, m := int(d/time.Hour), int(d%time.Hour/time.Minute)
		if m == 0 {
			return fmt.Sprintf("%dh", h)
		}
		return fmt.Sprintf("%dh%dm", h, m)
	}
	days, h := int(d/(24*time.Hour)), int(d%(24*time.Hour)/time.Hour)
	if h == 0 {
		return fmt.Sprintf("%dd", days)
	}
	return fmt.Sprintf("%dd%dh", days, h)
}

// ShortDuration is shortDuration for the views ("idle 25m").
func ShortDuration(d time.Duration) string { return shortDuration(d) }
