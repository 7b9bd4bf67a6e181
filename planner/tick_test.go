package planner_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/drivertest"
	"github.com/bottlefile/bottlefile/executor"
	"github.com/bottlefile/bottlefile/planner"
)

// activeFake is the fake driver with a use it reports
// (drivers.ActivityReader), set by the test.
type activeFake struct {
	*drivertest.Fake
	activity map[string]drivers.Activity
	calls    int
	req      drivers.ActivityRequest // the last asked
}

func (a *activeFake) Activity(_ context.Context, req drivers.ActivityRequest) (map[string]drivers.Activity, error) {
	a.calls++
	a.req = req
	out := map[string]drivers.Activity{}
	for _, addr := range req.Agents {
		if act, ok := a.activity[addr]; ok {
			out[addr] = act
		}
	}
	return out, nil
}

// simBench is a bench on a simulated clock: the planner, the fake's
// workloads and its snapshots all read sim.
type simBench struct {
	*bench
	sim  time.Time
	fake *activeFake
}

func newSimBench(t *testing.T, src string) *simBench {
	b := &simBench{bench: newBench(t), sim: time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)}
	clock := func() time.Time { return b.sim }
	b.bench.now, b.bench.fake.Now, b.bench.fake.Clock = clock, clock, clock
	b.fake = &activeFake{Fake: b.bench.fake, activity: map[string]drivers.Activity{}}
	b.wrap = func(drivers.Driver) drivers.Driver { return b.fake }
	b.write(src)
	return b
}

// due is the plan's due time of the agent's policy.
func due(t *testing.T, p *planner.Plan, agent, policy string) planner.Due {
	t.Helper()
	for _, d := range p.Due {
		if d.Agent == agent && d.Policy == policy {
			return d
		}
	}
	t.Fatalf("no due time of %s %s in %+v", agent, policy, p.Due)
	return planner.Due{}
}

func policySnapshots(b *bench, agent string) []string {
	var out []string
	for addr := range b.records() {
		if strings.HasPrefix(addr, agent+".snapshot.") {
			out = append(out, addr)
		}
	}
	slices.Sort(out)
	return out
}

// TestTickEveryOverAWeek: with every = "1h" and keep_last = 3, a tick
// every hour (and one half an hour later each day) over a simulated week takes one snapshot an hour, none
// on the day the runtime says nothing was written, and keeps the newest
// three; plan shows when the next is due and never takes one.
func TestTickEveryOverAWeek(t *testing.T) {
	b := newSimBench(t, `
agent "coder" {
  image = "alpine:3"
  snapshot_policy {
    every     = "1h"
    keep_last = 3
  }
  idle {
    archive_after = "30d" # its use is read, with whether it wrote
  }
}
`)
	start := b.sim
	b.apply(planner.Options{})

	b.fake.activity["agent.coder"] = drivers.Activity{LastActive: b.sim}
	p := b.plan(planner.Options{})
	if p.Applyable() {
		t.Fatalf("plan after apply:\n%s", pending(p))
	}
	if d := due(t, p, "agent.coder", planner.PolicyEvery); !d.At.Equal(start.Add(time.Hour)) || d.Note != "" {
		t.Fatalf("every due = %+v, want at %s (an hour after the workload was created)", d, start.Add(time.Hour))
	}

	taken, skipped := 0, 0
	for step := 1; step <= 7*24*2; step++ {
		b.sim = start.Add(time.Duration(step) * 30 * time.Minute)
		if step%2 == 1 && step%48 != 1 {
			continue // ticks on the hour, and one at half past each day
		}
		wrote := true
		if h := b.sim.Sub(start); h >= 48*time.Hour && h < 72*time.Hour {
			wrote = false // day 3: the agent wrote nothing
		}
		b.fake.activity["agent.coder"] = drivers.Activity{LastActive: b.sim, Wrote: &wrote}

		if step%49 == 0 {
			// A plan between ticks acts on nothing, even when due.
			if p := b.plan(planner.Options{}); p.Applyable() {
				t.Fatalf("plan at %s acts on a policy:\n%s", b.sim, pending(p))
			}
		}
		p := b.apply(planner.Options{Tick: true})
		d := due(t, p, "agent.coder", planner.PolicyEvery)
		if step%2 == 1 {
			if (d.Now && wrote) || p.Applyable() {
				t.Fatalf("tick at %s, half an hour after the last snapshot: %+v\n%s", b.sim, d, pending(p))
			}
			continue
		}
		if !d.Now {
			t.Fatalf("tick at %s: not due: %+v", b.sim, d)
		}
		if !wrote {
			skipped++
			if p.Applyable() || d.Note == "" {
				t.Fatalf("tick at %s snapshots an agent that wrote nothing: %+v\n%s", b.sim, d, pending(p))
			}
			continue
		}
		if s := p.Summary(); s.Snapshot != 1 {
			t.Fatalf("tick at %s: %s\n%s", b.sim, s, pending(p))
		}
		for _, c := range p.Changes {
			if c.Action != planner.Create && c.Action != planner.Delete {
				t.Fatalf("tick at %s plans %s %s", b.sim, c.Action, c.Addr)
			}
		}
		taken++
	}
	// An hour apart: at 1h..47h, then from 72h (the first tick after day
	// 3 that sees a write) to 168h.
	if taken != 47+97 {
		t.Errorf("taken %d snapshots over the week, want %d", taken, 47+97)
	}
	if skipped != 24 {
		t.Errorf("skipped %d ticks on the quiet day, want 24", skipped)
	}
	if got, want := policySnapshots(b.bench, "agent.coder"), []string{"agent.coder.snapshot.142", "agent.coder.snapshot.143", "agent.coder.snapshot.144"}; !slices.Equal(got, want) {
		t.Errorf("kept %v, want %v", got, want)
	}
	p = b.plan(planner.Options{})
	if d := due(t, p, "agent.coder", planner.PolicyEvery); !d.At.Equal(start.Add(169 * time.Hour)) {
		t.Errorf("next due %s, want %s", d.At, start.Add(169*time.Hour))
	}
}

// TestTickIdle: stop_after and archive_after count from the agent's last
// use, start or stop; a busy agent, or one whose runtime does not report
// its use, is never idle; an idle stop is recorded as stopped for
// idleness, and the plan then has nothing to do; archive_after comes due
// for the archive plan (Options.Archive).
func TestTickIdle(t *testing.T) {
	b := newSimBench(t, `
agent "coder" {
  image = "alpine:3"
  idle {
    stop_after    = "30m"
    archive_after = "7d"
  }
}
`)
	start := b.sim
	b.apply(planner.Options{})
	at := func(d time.Duration) { b.sim = start.Add(d) }
	used := start.Add(10 * time.Minute)

	// Unknown use: never idle.
	at(2 * time.Hour)
	p := b.apply(planner.Options{Tick: true})
	if d := due(t, p, "agent.coder", planner.PolicyStop); p.Applyable() || !d.At.IsZero() || d.Note == "" {
		t.Fatalf("unknown use: %+v\n%s", d, pending(p))
	}

	b.fake.activity["agent.coder"] = drivers.Activity{LastActive: used}
	at(30 * time.Minute)
	p = b.apply(planner.Options{Tick: true})
	d := due(t, p, "agent.coder", planner.PolicyStop)
	if p.Applyable() || !d.At.Equal(used.Add(30*time.Minute)) || d.Idle != 20*time.Minute {
		t.Fatalf("idle 20m of 30m: %+v\n%s", d, pending(p))
	}

	// Busy: an exec session is open.
	at(50 * time.Minute)
	b.fake.activity["agent.coder"] = drivers.Activity{LastActive: used, Busy: true}
	if p := b.apply(planner.Options{Tick: true}); p.Applyable() {
		t.Fatalf("a busy agent is stopped:\n%s", pending(p))
	}

	// A plan never acts on a due policy.
	at(60 * time.Minute)
	b.fake.activity["agent.coder"] = drivers.Activity{LastActive: used}
	p = b.plan(planner.Options{})
	if p.Applyable() {
		t.Fatalf("plan acts on idle.stop_after:\n%s", pending(p))
	}
	if d := due(t, p, "agent.coder", planner.PolicyStop); d.Now || !d.IsDue(b.sim) || d.Idle != 50*time.Minute {
		t.Fatalf("plan's due time: %+v", d)
	}

	p = b.apply(planner.Options{Tick: true})
	if s := p.Summary(); s.Stop != 1 || len(p.Changes) != 1 || p.Changes[0].Addr != "agent.coder" {
		t.Fatalf("idle tick: %s\n%s", s, pending(p))
	}
	if r := b.records()["agent.coder"]; r.Computed[planner.StoppedKey] != planner.IdleStopReason {
		t.Fatalf("record of the idle stop: %v", r.Computed)
	}
	if p := b.plan(planner.Options{}); p.Applyable() {
		t.Fatalf("plan after the idle stop:\n%s", pending(p))
	}
	if p := b.apply(planner.Options{Tick: true}); p.Applyable() || len(p.ArchiveDue()) > 0 {
		t.Fatalf("second tick:\n%s", pending(p))
	}

	// Archive: 7 days after the stop, the last thing that happened to it.
	at(60*time.Minute + 7*24*time.Hour - time.Second)
	if p := b.plan(planner.Options{Tick: true}); len(p.ArchiveDue()) > 0 || p.Applyable() {
		t.Fatalf("archived a second early: %v\n%s", p.ArchiveDue(), pending(p))
	}
	at(60*time.Minute + 7*24*time.Hour)
	p = b.plan(planner.Options{Tick: true})
	if got := p.ArchiveDue(); !slices.Equal(got, []string{"agent.coder"}) {
		t.Fatalf("ArchiveDue = %v, want [agent.coder]\n%s", got, pending(p))
	}
	if d := due(t, p, "agent.coder", planner.PolicyStop); d.Now {
		t.Errorf("stop due beside the archive: %+v", d)
	}

	// The archive is cut off after its snapshot: the network's removal
	// fails. The next tick finishes it, from the snapshot taken.
	b.fake.FailApply = map[string]error{"agent.coder.network": errors.New("killed")}
	if _, err := b.tryApply(planner.Options{Tick: true}); err == "" {
		t.Fatal("the cut-off archive did not fail")
	}
	b.fake.FailApply = nil
	if live := b.live(); !slices.Contains(live, "agent.coder.network") {
		t.Fatalf("live after the cut-off archive: %v", live)
	}
	at(60*time.Minute + 7*24*time.Hour + time.Minute)
	p = b.apply(planner.Options{Tick: true})
	if c := change(p, "agent.coder.network"); c == nil || c.Action == planner.NoOp {
		t.Fatalf("the next tick does not finish the archive:\n%s", pending(p))
	}
	for _, addr := range b.live() {
		if !strings.Contains(addr, ".snapshot.") {
			t.Errorf("%s is live after the archive", addr)
		}
	}
	recs := b.records()
	if !planner.IsArchived(ptr(recs["agent.coder"])) || !planner.IsArchived(ptr(recs["agent.coder.network"])) {
		t.Errorf("records after the archive: %v, %v", recs["agent.coder"].Computed, recs["agent.coder.network"].Computed)
	}
	if p := b.plan(planner.Options{}); p.Applyable() {
		t.Fatalf("plan after the archive:\n%s", pending(p))
	}
	at(30 * 24 * time.Hour)
	p = b.plan(planner.Options{Tick: true})
	if p.Applyable() || len(p.ArchiveDue()) > 0 {
		t.Fatalf("tick of an archived agent:\n%s", pending(p))
	}
	if d := due(t, p, "agent.coder", planner.PolicyArchive); d.Note != "it is archived" {
		t.Errorf("archived agent's due time: %+v", d)
	}
}

func ptr[T any](v T) *T { return &v }

// TestTickOnlyDue: a tick plans nothing that is not a due policy's
// action, however the configuration changed; and a runtime is asked for
// its agents' use once per plan, only when an agent has a time policy.
func TestTickOnlyDue(t *testing.T) {
	b := newSimBench(t, `
agent "coder" {
  image = "alpine:3"
  idle {
    stop_after = "1h"
  }
}
agent "plain" {
  image = "alpine:3"
}
`)
	b.apply(planner.Options{})
	b.fake.activity["agent.coder"] = drivers.Activity{LastActive: b.sim}
	b.write(`
agent "coder" {
  image = "alpine:3.20"
  idle {
    stop_after = "1h"
  }
}
agent "plain" {
  image = "alpine:3.20"
}
`)
	b.fake.calls = 0
	b.sim = b.sim.Add(2 * time.Hour)
	p := b.plan(planner.Options{Tick: true})
	if p.Applyable() {
		t.Fatalf("tick plans the configuration's changes (the agent's replace must come from apply):\n%s", pending(p))
	}
	if b.fake.calls != 1 {
		t.Errorf("%d activity calls, want 1", b.fake.calls)
	}
	if d := due(t, p, "agent.coder", planner.PolicyStop); !d.Now || !strings.Contains(d.Note, "a change to apply first") {
		t.Errorf("stop of an agent with a change to apply: %+v", d)
	}
	for _, d := range p.Due {
		if d.Agent == "agent.plain" {
			t.Errorf("due time of an agent without a time policy: %+v", d)
		}
	}

}

// tryApply plans with opts and applies; it returns the apply's errors as
// one string ("" when it succeeded).
func (b *bench) tryApply(opts planner.Options) (*planner.Plan, string) {
	b.t.Helper()
	p := b.plan(opts)
	store := b.open(false)
	defer store.Close()
	lineage, err := store.Init()
	if err != nil {
		b.t.Fatal(err)
	}
	ex := &executor.Executor{State: store, Lineage: lineage, Runtimes: b.last.Runtimes, Parallelism: 10, Resolver: b.last}
	if _, diags := ex.Apply(context.Background(), p); diags.HasErrors() {
		return p, diags.Error()
	}
	return p, ""
}

// TestTickEveryAlone: an agent with snapshot_policy.every and no idle
// policy costs no activity call, in a plan or a tick (no runtime tells
// cheaply what it wrote): its snapshot is taken when due.
func TestTickEveryAlone(t *testing.T) {
	b := newSimBench(t, `
agent "coder" {
  image = "alpine:3"
  snapshot_policy {
    every = "1h"
  }
}
`)
	b.apply(planner.Options{})
	b.fake.calls = 0
	b.plan(planner.Options{})
	b.sim = b.sim.Add(time.Hour)
	p := b.apply(planner.Options{Tick: true})
	if s := p.Summary(); s.Snapshot != 1 {
		t.Errorf("tick with a snapshot due: %s", s)
	}
	if b.fake.calls != 0 {
		t.Errorf("%d activity calls for an agent without an idle policy", b.fake.calls)
	}

	// Three snapshots and keep_last = 2, as a tick cut off between its
	// snapshot and its prune leaves them: the next tick prunes, snapshot
	// due or not.
	for range 2 {
		b.sim = b.sim.Add(time.Hour)
		b.apply(planner.Options{Tick: true})
	}
	b.write(`
agent "coder" {
  image = "alpine:3"
  snapshot_policy {
    every     = "1h"
    keep_last = 2
  }
}
`)
	b.sim = b.sim.Add(time.Minute)
	p = b.apply(planner.Options{Tick: true})
	if got := pending(p); !strings.HasPrefix(got, "- agent.coder.snapshot.1 ") || strings.Contains(got, "\n") {
		t.Errorf("tick over keep_last with nothing due:\n%s", got)
	}
	if got := policySnapshots(b.bench, "agent.coder"); !slices.Equal(got, []string{"agent.coder.snapshot.2", "agent.coder.snapshot.3"}) {
		t.Errorf("kept %v", got)
	}
}

// TestTickIdleSince: the planner asks about each agent's use only as far
// back as its shortest idle policy that can act (IdleSince: stop_after
// while it runs, archive_after), so that a runtime can spare the CPU
// reading of an agent used since; and not at all about an agent stopped
// with stop_after alone.
func TestTickIdleSince(t *testing.T) {
	b := newSimBench(t, `
agent "coder" {
  image = "alpine:3"
  idle {
    stop_after    = "30m"
    archive_after = "7d"
  }
}
agent "brief" {
  image = "alpine:3"
  idle {
    stop_after = "1h"
  }
}
agent "plain" {
  image = "alpine:3"
}
`)
	start := b.sim
	b.apply(planner.Options{})
	b.fake.activity["agent.coder"] = drivers.Activity{LastActive: start}
	b.fake.activity["agent.brief"] = drivers.Activity{LastActive: start}

	b.sim = start.Add(20 * time.Minute)
	if p := b.apply(planner.Options{Tick: true}); p.Applyable() {
		t.Fatalf("tick with nothing due:\n%s", pending(p))
	}
	want := map[string]time.Time{"agent.coder": b.sim.Add(-30 * time.Minute), "agent.brief": b.sim.Add(-time.Hour)}
	if got := b.fake.req; !slices.Equal(got.Agents, []string{"agent.brief", "agent.coder"}) || fmt.Sprint(got.IdleSince) != fmt.Sprint(want) {
		t.Errorf("asked about %v since %v, want %v", got.Agents, got.IdleSince, want)
	}

	b.sim = start.Add(time.Hour)
	if s := b.apply(planner.Options{Tick: true}).Summary(); s.Stop != 2 {
		t.Fatalf("idle tick: %s, want both stopped", s)
	}
	b.fake.calls = 0
	b.sim = start.Add(2 * time.Hour)
	b.plan(planner.Options{Tick: true})
	want = map[string]time.Time{"agent.coder": b.sim.Add(-7 * 24 * time.Hour)}
	if got := b.fake.req; b.fake.calls != 1 || !slices.Equal(got.Agents, []string{"agent.coder"}) || fmt.Sprint(got.IdleSince) != fmt.Sprint(want) {
		t.Errorf("stopped: %d calls, the last about %v since %v; want one about agent.coder since %v", b.fake.calls, got.Agents, got.IdleSince, want)
	}
}
