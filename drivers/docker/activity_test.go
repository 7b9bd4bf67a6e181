package docker

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/zclconf/go-cty/cty"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/engine"
	"github.com/bottlefile/bottlefile/drivers/gateway"
	"github.com/bottlefile/bottlefile/egress"
)

// activityAPI is fakeAPI with the calls activity makes beyond dockerAPI:
// stats and exec inspect, answered from its maps.
type activityAPI struct {
	*fakeAPI

	mu   sync.Mutex        // guards the maps
	cpu  map[string]uint64 // CPU nanoseconds by container id, one more second each read
	at   map[string]time.Time
	busy map[string]bool // containers that use a whole core
	exec map[string]bool // exec ids that are running
}

func (a *activityAPI) stats(id string, sampled bool) (container.StatsResponseReader, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	step := uint64(time.Millisecond) // 0.1 % of a core a second: idle
	if a.busy[id] {
		step = uint64(time.Second)
	}
	var st container.StatsResponse
	if a.at[id].IsZero() {
		a.at[id] = time.Now().Add(-time.Second) // read now, unless the test set when
	}
	if sampled {
		st.PreRead, st.PreCPUStats.CPUUsage.TotalUsage = a.at[id], a.cpu[id]
	}
	a.at[id] = a.at[id].Add(time.Second)
	a.cpu[id] += step
	st.Read, st.CPUStats.CPUUsage.TotalUsage = a.at[id], a.cpu[id]
	b, _ := json.Marshal(st)
	return container.StatsResponseReader{Body: io.NopCloser(strings.NewReader(string(b)))}, nil
}

func (a *activityAPI) ContainerStats(_ context.Context, id string, stream bool) (container.StatsResponseReader, error) {
	a.record("ContainerStats")
	return a.stats(id, !stream)
}

func (a *activityAPI) ContainerStatsOneShot(_ context.Context, id string) (container.StatsResponseReader, error) {
	a.record("ContainerStatsOneShot")
	return a.stats(id, false)
}

func (a *activityAPI) ContainerExecInspect(_ context.Context, id string) (container.ExecInspect, error) {
	a.record("ContainerExecInspect")
	a.mu.Lock()
	defer a.mu.Unlock()
	return container.ExecInspect{ExecID: id, Running: a.exec[id]}, nil
}

// bottles is a lineage of n running agents named a0..a(n-1), each with
// a gateway whose stamp says stamp (NoActivity: no request), and its api.
func bottles(t *testing.T, n int, started, stamp time.Time, stateDir string) (*Driver, *activityAPI) {
	t.Helper()
	var list []container.Summary
	for i := range n {
		agent := fmt.Sprintf("agent.a%d", i)
		list = append(list,
			container.Summary{ID: fmt.Sprintf("c%d", i), State: container.StateRunning, Labels: map[string]string{
				drivers.LabelLineage: "lin", drivers.LabelAddress: agent}},
			container.Summary{ID: fmt.Sprintf("g%d", i), State: container.StateRunning, Labels: map[string]string{
				drivers.LabelLineage: "lin", drivers.LabelAddress: agent + ".gateway", labelKind: gateway.Kind}},
		)
	}
	a := &activityAPI{cpu: map[string]uint64{}, at: map[string]time.Time{}, busy: map[string]bool{}, exec: map[string]bool{}}
	a.fakeAPI = &fakeAPI{
		ContainerListFn: func(container.ListOptions) ([]container.Summary, error) { return list, nil },
		ContainerInspectFn: func(id string) (container.InspectResponse, error) {
			r := container.InspectResponse{ContainerJSONBase: &container.ContainerJSONBase{
				ID: id, State: &container.State{Running: true, StartedAt: started.Format(time.RFC3339Nano)}}}
			a.mu.Lock()
			for x := range a.exec {
				if strings.HasPrefix(x, id+"/") {
					r.ExecIDs = append(r.ExecIDs, x)
				}
			}
			a.mu.Unlock()
			return r, nil
		},
		ContainerStatPathFn: func(id, path string) (container.PathStat, error) {
			if path != gateway.ActivityPath {
				return container.PathStat{}, cerrdefs.ErrNotFound
			}
			return container.PathStat{Name: filepath.Base(path), Mtime: stamp}, nil
		},
	}
	d := newDriver(testLogger(t), func(engine.Endpoint) (dockerAPI, error) { return a, nil })
	cfg := cty.ObjectVal(map[string]cty.Value{"host": cty.NullVal(cty.String), "subnet_pool": cty.StringVal(DefaultSubnetPool)})
	if err := d.Configure(t.Context(), drivers.ConfigureRequest{Runtime: "test", Config: cfg, StateDir: stateDir}); err != nil {
		t.Fatal(err)
	}
	return d, a
}

func agentNames(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("agent.a%d", i)
	}
	return out
}

func countCalls(calls []string) map[string]int {
	out := map[string]int{}
	for _, c := range calls {
		out[c]++
	}
	return out
}

// TestActivityCalls: the engine calls of a look at 100 idle bottles
// (agent and gateway each) asked without IdleSince: one list, then per
// bottle an inspect, a stat of the gateway's stamp and a stats call; the
// first look samples CPU (ContainerStats), later ones read it once
// (one-shot) from the remembered counter, kept in the state directory
// across drivers (runs).
func TestActivityCalls(t *testing.T) {
	const n = 100
	started := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	dir := t.TempDir()
	d, api := bottles(t, n, started, egress.NoActivity, dir)
	req := drivers.ActivityRequest{Lineage: "lin", Agents: agentNames(n)}

	got, err := d.Activity(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != n {
		t.Fatalf("%d agents reported, want %d", len(got), n)
	}
	for addr, a := range got {
		if !a.LastActive.Equal(started) || a.Busy || a.Wrote != nil {
			t.Fatalf("%s: %+v, want last active when it started, not busy, Wrote unknown", addr, a)
		}
	}
	want := map[string]int{"ContainerList": 1, "ContainerStats": n, "ContainerInspect": n, "ContainerStatPath": n}
	if calls := countCalls(api.calls()); fmt.Sprint(calls) != fmt.Sprint(want) {
		t.Errorf("first look at %d bottles: calls %v, want %v", n, calls, want)
	}

	// A later run: a new driver on the same state directory and engine.
	d2 := newDriver(testLogger(t), func(engine.Endpoint) (dockerAPI, error) { return api, nil })
	cfg := cty.ObjectVal(map[string]cty.Value{"host": cty.NullVal(cty.String), "subnet_pool": cty.StringVal(DefaultSubnetPool)})
	if err := d2.Configure(t.Context(), drivers.ConfigureRequest{Runtime: "test", Config: cfg, StateDir: dir}); err != nil {
		t.Fatal(err)
	}
	api.fakeAPI.Calls = nil
	api.mu.Lock()
	for i := range n / 2 {
		api.busy[fmt.Sprintf("c%d", i)] = true
	}
	api.mu.Unlock()
	got, err = d2.Activity(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	busy := 0
	for _, a := range got {
		if a.Busy {
			busy++
		}
	}
	if busy != n/2 {
		t.Errorf("%d agents busy, want %d", busy, n/2)
	}
	want = map[string]int{"ContainerList": 1, "ContainerStatsOneShot": n, "ContainerInspect": n, "ContainerStatPath": n}
	if calls := countCalls(api.calls()); fmt.Sprint(calls) != fmt.Sprint(want) {
		t.Errorf("later look, half busy: calls %v, want %v", calls, want)
	}
}

// TestActivityJudges: what each look makes of what the engine says.
func TestActivityJudges(t *testing.T) {
	started := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	request := started.Add(time.Hour)

	t.Run("a request through the gateway", func(t *testing.T) {
		d, _ := bottles(t, 1, started, request, "")
		got, err := d.Activity(t.Context(), drivers.ActivityRequest{Lineage: "lin", Agents: []string{"agent.a0"}})
		if err != nil {
			t.Fatal(err)
		}
		if a := got["agent.a0"]; !a.LastActive.Equal(request) || a.Busy {
			t.Errorf("%+v, want last active at the gateway's last request", a)
		}
	})
	t.Run("an open exec session", func(t *testing.T) {
		d, api := bottles(t, 1, started, egress.NoActivity, "")
		api.exec["c0/open"] = true
		api.exec["c0/never-started"] = false
		before := time.Now()
		got, err := d.Activity(t.Context(), drivers.ActivityRequest{Lineage: "lin", Agents: []string{"agent.a0"}})
		if err != nil {
			t.Fatal(err)
		}
		if a := got["agent.a0"]; !a.Busy || a.LastActive.Before(before) {
			t.Errorf("%+v, want busy, last active now", a)
		}
		delete(api.exec, "c0/open")
		got, _ = d.Activity(t.Context(), drivers.ActivityRequest{Lineage: "lin", Agents: []string{"agent.a0"}})
		if a := got["agent.a0"]; a.Busy || a.LastActive.Before(before) {
			t.Errorf("after the session: %+v, want not busy, last active when the look saw it open", a)
		}
	})
	t.Run("an exec of bottlefile that ended", func(t *testing.T) {
		d, _ := bottles(t, 1, started, egress.NoActivity, "")
		before := time.Now()
		d.noteExecEnded("c0")
		got, _ := d.Activity(t.Context(), drivers.ActivityRequest{Lineage: "lin", Agents: []string{"agent.a0"}})
		if a := got["agent.a0"]; a.Busy || a.LastActive.Before(before) {
			t.Errorf("%+v, want last active when the session ended", a)
		}
	})
	t.Run("a gateway without a stamp", func(t *testing.T) {
		d, api := bottles(t, 1, started, egress.NoActivity, "")
		api.ContainerStatPathFn = func(string, string) (container.PathStat, error) { return container.PathStat{}, cerrdefs.ErrNotFound }
		got, _ := d.Activity(t.Context(), drivers.ActivityRequest{Lineage: "lin", Agents: []string{"agent.a0"}})
		if a, ok := got["agent.a0"]; !ok || !a.LastActive.IsZero() {
			t.Errorf("%+v (reported %v), want reported with a zero LastActive: never idle", a, ok)
		}
	})
	t.Run("agents not asked, not there, stopped", func(t *testing.T) {
		d, api := bottles(t, 2, started, egress.NoActivity, "")
		list, _ := api.ContainerListFn(container.ListOptions{})
		list[2].State, list[2].Status = container.StateExited, "Exited (0) 2 hours ago"
		api.ContainerListFn = func(container.ListOptions) ([]container.Summary, error) { return list, nil }
		got, _ := d.Activity(t.Context(), drivers.ActivityRequest{Lineage: "lin", Agents: []string{"agent.a1", "agent.gone"}})
		if len(got) != 1 {
			t.Fatalf("reported %v, want agent.a1 only", got)
		}
		if a := got["agent.a1"]; a.Busy || a.LastActive.After(time.Now().Add(-2*time.Hour)) || a.LastActive.Before(time.Now().Add(-3*time.Hour)) {
			t.Errorf("stopped 2 hours ago: %+v", a)
		}
	})
}

// TestCPUBusy: the threshold, and counters that tell nothing.
func TestCPUBusy(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	hour := t0.Add(time.Hour)
	for _, tc := range []struct {
		name       string
		cpu0, cpu1 uint64
		t0, t1     time.Time
		since      time.Time
		want       bool
	}{
		{"a core for a minute", 0, uint64(time.Minute), t0, t0.Add(time.Minute), time.Time{}, true},
		{"5 % of a core", 0, uint64(3 * time.Second), t0, t0.Add(time.Minute), time.Time{}, true},
		{"4 % of a core", 0, uint64(2400 * time.Millisecond), t0, t0.Add(time.Minute), time.Time{}, false},
		{"no interval", 0, uint64(time.Second), t0, t0, time.Time{}, false},
		{"no earlier reading", 0, uint64(time.Second), time.Time{}, t0, time.Time{}, false},
		{"started again", uint64(time.Hour), uint64(time.Second), t0, t0.Add(time.Minute), time.Time{}, false},
		// Two minutes of a core in an hour is 3.3 %: idle over the hour,
		// but it may all have been in the last half hour asked about.
		{"2 minutes in an hour", 0, uint64(2 * time.Minute), t0, hour, time.Time{}, false},
		{"2 minutes in an hour, since its last half", 0, uint64(2 * time.Minute), t0, hour, hour.Add(-30 * time.Minute), true},
		{"1 minute in an hour, since its last half", 0, uint64(time.Minute), t0, hour, hour.Add(-30 * time.Minute), false},
		{"since before the interval", 0, uint64(2 * time.Minute), t0, hour, t0.Add(-time.Hour), false},
		{"since after the interval", 0, uint64(2 * time.Minute), t0, hour, hour.Add(time.Minute), false},
	} {
		if got := cpuBusy(tc.cpu0, tc.t0, tc.cpu1, tc.t1, tc.since); got != tc.want {
			t.Errorf("%s: busy %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestContainerActivity: a look at given containers (as swarm asks a
// node's engine) reads them as Activity reads those it lists, one use per
// container in order, with no list; it keeps its CPU samples under its
// own memory, apart from the driver's, and takes the ends of exec
// sessions Exec noted in the driver's.
func TestContainerActivity(t *testing.T) {
	started := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	request := started.Add(time.Hour)
	dir := t.TempDir()
	d, api := bottles(t, 2, started, request, dir)
	api.busy["c1"] = true
	ctrs := []engine.Watched{
		{Agent: "agent.a0", ID: "c0"}, {Agent: "agent.a0", ID: "g0", Gateway: true},
		{Agent: "agent.a1", ID: "c1"},
	}
	if _, err := d.ContainerActivity(t.Context(), "", ctrs); err == nil {
		t.Error("a look without a memory name: no error")
	}
	noted := time.Now()
	d.noteExecEnded("c0")
	uses, err := d.ContainerActivity(t.Context(), "swarm-fleet-node/1", ctrs)
	if err != nil {
		t.Fatal(err)
	}
	if len(uses) != 3 {
		t.Fatalf("%d uses, want one per container (3): %+v", len(uses), uses)
	}
	if u := uses[0]; u.Agent != "agent.a0" || u.Gateway || u.Busy || u.Last.Before(noted) {
		t.Errorf("the workload whose exec session ended at %v: %+v", noted, u)
	}
	if u := uses[1]; !u.Gateway || !u.Last.Equal(request) {
		t.Errorf("the gateway: %+v, want its last request %v", u, request)
	}
	if calls := countCalls(api.calls()); calls["ContainerList"] != 0 {
		t.Errorf("calls %v, want no list", calls)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "activity", "*.json"))
	want := []string{filepath.Join(dir, "activity", "docker-test.json"), filepath.Join(dir, "activity", "swarm-fleet-node_1.json")}
	if fmt.Sprint(files) != fmt.Sprint(want) {
		t.Errorf("memories %v, want %v", files, want)
	}
	if _, ok := d.activityMemory("").load()["c0"]; ok {
		t.Error("the exec session's end stays in the driver's memory after it was moved")
	}
	if s := d.activityMemory("swarm-fleet-node/1").load()["c0"]; s.Active.Before(noted) || s.At.IsZero() {
		t.Errorf("the look's memory of c0: %+v, want its CPU sample and the session's end", s)
	}

	// A later look reads CPU once (one-shot) from the remembered
	// counter; one with a container gone forgets it.
	api.fakeAPI.Calls = nil
	uses, err = d.ContainerActivity(t.Context(), "swarm-fleet-node/1", ctrs)
	if err != nil {
		t.Fatal(err)
	}
	if u := uses[2]; !u.Busy {
		t.Errorf("the container using a core: %+v, want busy", u)
	}
	if calls := countCalls(api.calls()); calls["ContainerStatsOneShot"] != 2 || calls["ContainerStats"] != 0 {
		t.Errorf("second look: calls %v, want one one-shot stats call per workload (2)", calls)
	}
	if _, err := d.ContainerActivity(t.Context(), "swarm-fleet-node/1", ctrs[:2]); err != nil {
		t.Fatal(err)
	}
	if _, ok := d.activityMemory("swarm-fleet-node/1").load()["c1"]; ok {
		t.Error("a container no longer given is still remembered")
	}
}

// since is an IdleSince of every agent of n at t.
func since(n int, t time.Time) map[string]time.Time {
	out := map[string]time.Time{}
	for _, a := range agentNames(n) {
		out[a] = t
	}
	return out
}

// TestActivityIdleSince: asked with IdleSince, a look reads no CPU of an
// agent its cheap signals already show in use after it (a request
// through its gateway), nor of one busy with a session or that cannot
// be told about; the others' CPU is read once (one-shot), from their
// start on the first look.
func TestActivityIdleSince(t *testing.T) {
	const n = 100
	now := time.Now()
	started, request := now.Add(-2*time.Hour), now.Add(-time.Minute)
	d, api := bottles(t, n, started, egress.NoActivity, t.TempDir())
	// Half the agents had a request through their gateway a minute ago.
	api.ContainerStatPathFn = func(id, _ string) (container.PathStat, error) {
		var i int
		fmt.Sscanf(id, "g%d", &i)
		if i < n/2 {
			return container.PathStat{Mtime: request}, nil
		}
		return container.PathStat{Mtime: egress.NoActivity}, nil
	}
	api.exec["c50/open"] = true // a session open in a50
	req := drivers.ActivityRequest{Lineage: "lin", Agents: agentNames(n), IdleSince: since(n, now.Add(-30*time.Minute))}
	got, err := d.Activity(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"ContainerList": 1, "ContainerInspect": n, "ContainerStatPath": n, "ContainerExecInspect": 1, "ContainerStatsOneShot": n/2 - 1}
	if calls := countCalls(api.calls()); fmt.Sprint(calls) != fmt.Sprint(want) {
		t.Errorf("look at %d bottles, %d used a minute ago, one busy: calls %v, want %v", n, n/2, calls, want)
	}
	for i, addr := range agentNames(n) {
		a := got[addr]
		switch {
		case i < n/2 && (!a.LastActive.Equal(request) || a.Busy):
			t.Errorf("%s, a request a minute ago: %+v", addr, a)
		case i == n/2 && !a.Busy:
			t.Errorf("%s, a session open: %+v, want busy", addr, a)
		case i > n/2 && (!a.LastActive.Equal(started) || a.Busy):
			t.Errorf("%s, unused since it started: %+v", addr, a)
		}
	}
}

// TestActivityIdleSinceJudges: what a look with IdleSince makes of CPU
// it reads seldom, and of uses it sees without reading it.
func TestActivityIdleSinceJudges(t *testing.T) {
	now := time.Now()
	started := now.Add(-2 * time.Hour)
	req := drivers.ActivityRequest{Lineage: "lin", Agents: agentNames(2), IdleSince: since(2, now.Add(-30*time.Minute))}

	t.Run("CPU since the start, judged over the span asked about", func(t *testing.T) {
		d, api := bottles(t, 2, started, egress.NoActivity, "")
		// 2 minutes of a core since the start (1.7 % of two hours), all
		// of which may be in the last half hour: busy; 1 minute is not.
		api.cpu["c0"], api.cpu["c1"] = uint64(2*time.Minute), uint64(time.Minute)
		got, err := d.Activity(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		if a := got["agent.a0"]; !a.Busy {
			t.Errorf("2 minutes of CPU: %+v, want busy", a)
		}
		if a := got["agent.a1"]; a.Busy || !a.LastActive.Equal(started) {
			t.Errorf("1 minute of CPU: %+v, want idle since its start", a)
		}
		if calls := countCalls(api.calls()); calls["ContainerStats"] != 0 || calls["ContainerStatsOneShot"] != 2 {
			t.Errorf("calls %v, want one one-shot stats call per workload, none sampled", calls)
		}
	})
	t.Run("a session seen open, then closed, without CPU read", func(t *testing.T) {
		d, api := bottles(t, 1, started, egress.NoActivity, t.TempDir())
		api.exec["c0/open"] = true
		seen := time.Now()
		got, _ := d.Activity(t.Context(), req)
		if a := got["agent.a0"]; !a.Busy || a.LastActive.Before(seen) {
			t.Fatalf("a session open: %+v, want busy, last active now", a)
		}
		delete(api.exec, "c0/open")
		got, _ = d.Activity(t.Context(), req)
		if a := got["agent.a0"]; a.Busy || a.LastActive.Before(seen) {
			t.Errorf("after the session: %+v, want last active when the look saw it open", a)
		}
		if calls := countCalls(api.calls()); calls["ContainerStats"]+calls["ContainerStatsOneShot"] != 0 {
			t.Errorf("calls %v, want no stats: the agent was in use after IdleSince", calls)
		}
	})
	t.Run("a gateway without a stamp", func(t *testing.T) {
		d, api := bottles(t, 1, started, egress.NoActivity, "")
		api.ContainerStatPathFn = func(string, string) (container.PathStat, error) { return container.PathStat{}, cerrdefs.ErrNotFound }
		got, _ := d.Activity(t.Context(), req)
		if a, ok := got["agent.a0"]; !ok || !a.LastActive.IsZero() {
			t.Errorf("%+v (reported %v), want a zero LastActive: never idle", a, ok)
		}
		if calls := countCalls(api.calls()); calls["ContainerStats"]+calls["ContainerStatsOneShot"] != 0 {
			t.Errorf("calls %v, want no stats: an agent that cannot be told about is never idle", calls)
		}
	})
	t.Run("given containers", func(t *testing.T) {
		d, api := bottles(t, 2, started, now.Add(-time.Minute), t.TempDir())
		cut := now.Add(-30 * time.Minute)
		// a1's gateway runs on another engine: its request is not seen.
		ctrs := []engine.Watched{
			{Agent: "agent.a0", ID: "c0", IdleSince: cut}, {Agent: "agent.a0", ID: "g0", Gateway: true, IdleSince: cut},
			{Agent: "agent.a1", ID: "c1", IdleSince: cut},
		}
		if _, err := d.ContainerActivity(t.Context(), "swarm-fleet-node1", ctrs); err != nil {
			t.Fatal(err)
		}
		if calls := countCalls(api.calls()); calls["ContainerStats"] != 0 || calls["ContainerStatsOneShot"] != 1 {
			t.Errorf("calls %v, want one one-shot stats call (a1's)", calls)
		}
	})
}
