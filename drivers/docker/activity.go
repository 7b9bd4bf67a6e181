package docker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"

	"github.com/bottlefile/bottlefile/addrs"
	"github.com/bottlefile/bottlefile/atomicfile"
	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/engine"
	"github.com/bottlefile/bottlefile/drivers/gateway"
	"github.com/bottlefile/bottlefile/egress"
)

// Activity (issue 31): how recently each agent was used, for idle
// policies. An agent is in use while a request goes through its gateway,
// an exec session is open in it or one of its sidecars, or its workloads
// burn CPU; it was last used at the latest of those, and no earlier than
// when its workload last started (a start is a use). One look costs:
//
//   - one container list of the lineage (every agent's containers);
//   - per running agent or sidecar container, an inspect (its open exec
//     sessions, ExecIDs, and when it started), plus an exec inspect per
//     open exec only (to tell an exec that never started, which lingers,
//     from a session);
//   - per gateway, a stat of its activity stamp (egress activity.go): a
//     HEAD of the container's archive, no body, no exec;
//   - then, per running agent or sidecar container, a stats call (its
//     cgroup's CPU counter), unless the request's IdleSince spares it:
//     its agent is busy, cannot be told about, or was used after it by
//     what the calls above (and the memory) say. A stats call is the
//     slow one (about a second on a loaded engine), and CPU can only
//     make an agent busier: a tick over agents in use, or not idle for
//     long enough, reads none.
//
// A stopped workload costs nothing beyond the list: it was last used when
// it stopped, as far as the list's "Exited ... ago" tells (to the unit it
// names, which errs late, never early).
//
// CPU is averaged since the driver's last look at the container, which
// it remembers in the state directory (activityMemory), so a tick from
// cron averages over the cron interval as watch does over its own. Asked
// with IdleSince, a look reads CPU seldom, so over long spans: CPU used
// since the last reading counts as if all of it fell after IdleSince
// (CPUBusy of the part after it), never diluted over the time before; and
// a container with no reading of its current run counts from its start
// (its cgroup's counter starts at zero then). Without IdleSince, the
// first look at a container has nothing to average from: it asks the
// engine for a sampled reading instead (stats without one-shot, which the
// engine answers with two readings a second or two apart), the one call
// that waits.
//
// What it cannot tell: a request through a gateway of a bottlefile before
// the stamp (its agent is reported with a zero LastActive, never idle);
// an exec session that opened and closed between two looks, unless it
// was bottlefile exec's (Exec records its end) or burned CPU; a
// healthcheck probe running at the very moment of the inspect counts as
// a session for that look (a probe lasts milliseconds: it delays an idle
// stop by one look at worst). Wrote is left nil: the engine sizes a
// container's writes only by walking its layer (expensive on overlayfs,
// impossible cheaply on fuse-overlayfs, see writesMeasurable), and a size
// would miss a file rewritten in place; periodic snapshots are then
// always taken. Times are the engine host's clock where the engine
// reports them (starts, stats, the stamp).

// CPUBusy is the CPU use, in cores averaged since the last look, at or
// above which a workload is busy: 5 % of one core. An agent waiting on a
// model's answer or a prompt sits near 0 (a Node or Python runtime idles
// well below 1 %); one that builds, tests or greps uses a core or more;
// 5 % is above the idle noise of a runtime and its sidecars' timers, and
// far below any real work, so neither a sleeping agent looks busy nor a
// working one idle.
const CPUBusy = 0.05

// activityLooks bounds the containers looked at at once.
const activityLooks = 8

var _ drivers.ActivityReader = (*Driver)(nil)

// statsAPI is the part of the engine API activity reads CPU with. The
// engine client has it; a client without it cannot tell CPU use.
type statsAPI interface {
	ContainerStats(ctx context.Context, container string, stream bool) (container.StatsResponseReader, error)
	ContainerStatsOneShot(ctx context.Context, container string) (container.StatsResponseReader, error)
}

// execInspector tells whether an exec is running (exec.go's execAPI has it).
type execInspector interface {
	ContainerExecInspect(ctx context.Context, execID string) (container.ExecInspect, error)
}

// Activity reports, per asked agent the engine runs containers of, when
// it was last used and whether it is busy now (see above).
func (d *Driver) Activity(ctx context.Context, req drivers.ActivityRequest) (map[string]drivers.Activity, error) {
	out, err := d.activity(ctx, req)
	return out, d.Unreachable(err)
}

// activityLook is one container to look at, and what was seen of it.
type activityLook struct {
	agent   string
	id      string
	gateway bool
	running bool
	stopped time.Time // when a stopped workload stopped, from the list
	since   time.Time // its agent's IdleSince: zero reads CPU always

	started time.Time // when a running workload last started, from its inspect
	last    time.Time
	busy    bool
	unknown bool // the look could not tell (LastActive zero)
	sample  *activitySample
}

func (d *Driver) activity(ctx context.Context, req drivers.ActivityRequest) (map[string]drivers.Activity, error) {
	out := map[string]drivers.Activity{}
	if req.Lineage == "" || len(req.Agents) == 0 {
		return out, nil
	}
	api, _, err := d.engine(ctx)
	if err != nil {
		return nil, err
	}
	asked := map[string]bool{}
	for _, a := range req.Agents {
		asked[a] = true
	}
	list, err := api.ContainerList(ctx, container.ListOptions{All: true,
		Filters: filters.NewArgs(filters.Arg("label", drivers.LabelLineage+"="+req.Lineage))})
	if err != nil {
		return nil, fmt.Errorf("listing containers of lineage %s: %w", req.Lineage, err)
	}
	now := time.Now()
	var looks []*activityLook
	listed := map[string]bool{}
	for _, c := range list {
		listed[c.ID] = true
		a, err := addrs.Parse(c.Labels[drivers.LabelAddress])
		if err != nil {
			continue
		}
		agent, ok := addrs.AgentOf(a.String())
		if !ok || !asked[agent.String()] || c.State == container.StateRemoving || c.State == container.StateDead {
			continue
		}
		// Paused is running for this purpose: a snapshot pauses an agent
		// for a moment, and its counters and sessions are still there.
		running := c.State == container.StateRunning || c.State == container.StatePaused
		l := &activityLook{agent: agent.String(), id: c.ID, running: running, since: req.IdleSince[agent.String()]}
		switch {
		case c.Labels[labelKind] == gateway.Kind:
			l.gateway = true
		case a.Kind() == addrs.AgentKind || a.Kind() == addrs.SidecarKind:
			if !l.running {
				var o drivers.LiveObject
				runFacts(&o, c, now)
				l.stopped = o.Finished
			}
		default:
			continue // an image's builder, a leftover: no workload
		}
		looks = append(looks, l)
	}

	uses, err := d.lookAll(ctx, api, "", looks, listed, now)
	if err != nil {
		return nil, err
	}
	return engine.Merge(uses), nil
}

// ContainerActivity looks at running containers of the engine as
// Activity looks at those it lists (engine.Driver): a driver running
// bottles on several engines (swarm) asks each engine about its task
// containers, under a memory of its own per engine. The exec sessions of
// bottlefile that ended in them (Exec records those in the driver's own
// memory) count, and are moved to that memory.
func (d *Driver) ContainerActivity(ctx context.Context, memory string, ctrs []engine.Watched) ([]engine.Use, error) {
	if memory == "" {
		return nil, errors.New("an activity look of given containers needs a memory of its own")
	}
	if len(ctrs) == 0 {
		return nil, nil
	}
	api, _, err := d.engine(ctx)
	if err != nil {
		return nil, d.Unreachable(err)
	}
	looks := make([]*activityLook, 0, len(ctrs))
	listed := map[string]bool{}
	for _, c := range ctrs {
		listed[c.ID] = true
		looks = append(looks, &activityLook{agent: c.Agent, id: c.ID, gateway: c.Gateway, running: true, since: c.IdleSince})
	}
	uses, err := d.lookAll(ctx, api, memory, looks, listed, time.Now())
	return uses, d.Unreachable(err)
}

// lookAll looks at each container (activityLook, at most activityLooks
// at once) and says what it saw of each, in order: first what is cheap
// (look), then the CPU of the workloads whose agent that leaves in
// question (needCPU). CPU samples are kept in the memory named
// (activityMemory), which then forgets the containers not listed.
func (d *Driver) lookAll(ctx context.Context, api dockerAPI, memory string, looks []*activityLook, listed map[string]bool, now time.Time) ([]engine.Use, error) {
	mem := d.activityMemory(memory)
	samples := mem.load()
	// The ends of bottlefile exec sessions, which Exec notes in the
	// driver's own memory.
	var notes map[string]activitySample
	if memory != "" {
		notes = d.activityMemory("").load()
	}
	lookEach(looks, func(l *activityLook) { d.look(ctx, api, l, now) })
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	for _, l := range looks {
		// Found in use by an earlier look, or an exec's end.
		for _, t := range []time.Time{samples[l.id].Active, notes[l.id].Active} {
			if t.After(l.last) {
				l.last = t
			}
		}
	}

	if sa, ok := api.(statsAPI); ok {
		lookEach(needCPU(looks), func(l *activityLook) { d.lookBusy(ctx, sa, l, samples[l.id]) })
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}

	uses := make([]engine.Use, 0, len(looks))
	var moved []string
	for _, l := range looks {
		note, noted := notes[l.id]
		if l.sample == nil && !l.gateway && (noted || l.busy) {
			// Remembered without a CPU reading (none was needed): the
			// counter stays as last read.
			s := samples[l.id]
			l.sample = &s
		}
		if noted && l.sample != nil {
			if note.Active.After(l.sample.Active) {
				l.sample.Active = note.Active
			}
			moved = append(moved, l.id)
		}
		// A session seen open is a use the next look, once it closed,
		// only knows from here.
		if l.sample != nil && l.busy && l.last.After(l.sample.Active) {
			l.sample.Active = l.last
		}
		uses = append(uses, engine.Use{Agent: l.agent, Gateway: l.gateway, Last: l.last, Busy: l.busy, Unknown: l.unknown})
	}
	if err := mem.save(looks, listed); err != nil {
		d.log.Warn("could not remember the CPU use of the agents: the next look samples it again", "error", err)
	} else if len(moved) > 0 {
		if err := d.activityMemory("").forget(moved); err != nil {
			d.log.Debug("could not forget the exec sessions' ends moved to another memory", "error", err)
		}
	}
	return uses, nil
}

// lookEach runs f on each look, at most activityLooks at once.
func lookEach(looks []*activityLook, f func(*activityLook)) {
	sem := make(chan struct{}, activityLooks)
	var wg sync.WaitGroup
	for _, l := range looks {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			f(l)
		})
	}
	wg.Wait()
}

// look fills l with what is cheap to read: one call for a gateway or a
// stopped workload, one (plus one per open exec) for a running one.
func (d *Driver) look(ctx context.Context, api dockerAPI, l *activityLook, now time.Time) {
	if l.gateway {
		d.lookGateway(ctx, api, l)
		return
	}
	if !l.running {
		l.last = l.stopped
		return
	}
	info, err := api.ContainerInspect(ctx, l.id)
	if err != nil {
		d.log.Debug("inspecting a workload for its activity", "id", shortID(l.id), "error", err)
		l.unknown = true
		return
	}
	if info.State != nil {
		if t, err := time.Parse(time.RFC3339Nano, info.State.StartedAt); err == nil {
			l.started = t
			if t.After(l.last) {
				l.last = t
			}
		}
	}
	if d.sessionOpen(ctx, api, info.ExecIDs) {
		l.busy, l.last = true, now
	}
}

// needCPU are the running workloads whose CPU is to be read: all of them
// without IdleSince; with it, those of an agent that is not busy, can be
// told about (unknown is never idle, whatever the CPU) and was not used
// after it by what the looks saw so far.
func needCPU(looks []*activityLook) []*activityLook {
	type use struct {
		last          time.Time
		busy, unknown bool
	}
	agents := map[string]use{}
	for _, l := range looks {
		u := agents[l.agent]
		if l.last.After(u.last) {
			u.last = l.last
		}
		u.busy, u.unknown = u.busy || l.busy, u.unknown || l.unknown
		agents[l.agent] = u
	}
	var out []*activityLook
	for _, l := range looks {
		if l.gateway || !l.running {
			continue
		}
		if u := agents[l.agent]; !l.since.IsZero() && (u.busy || u.unknown || u.last.After(l.since)) {
			continue
		}
		out = append(out, l)
	}
	return out
}

// lookBusy reads l's CPU (lookCPU) into its sample, busy at the reading
// when it used CPUBusy or more.
func (d *Driver) lookBusy(ctx context.Context, sa statsAPI, l *activityLook, prev activitySample) {
	s, busy, ok := d.lookCPU(ctx, sa, l, prev)
	if !ok {
		return
	}
	l.sample = &s
	if busy {
		l.busy = true
		if s.At.After(l.last) {
			l.last = s.At
		}
	}
}

// sessionOpen reports whether one of the execs is running: an exec
// created and never started (an attach that failed) lingers in ExecIDs
// and is no session.
func (d *Driver) sessionOpen(ctx context.Context, api dockerAPI, ids []string) bool {
	if len(ids) == 0 {
		return false
	}
	x, ok := api.(execInspector)
	if !ok {
		return true // cannot tell: an exec is listed
	}
	for _, id := range ids {
		in, err := x.ContainerExecInspect(ctx, id)
		if err == nil && in.Running {
			return true
		}
	}
	return false
}

// lookCPU reads the container's CPU counter and says whether it used
// CPUBusy or more since prev (cpuBusy, after l.since); with no prev of
// its current run, since it started when l.since is set, else over the
// engine's own sampling interval. ok is false when the engine cannot
// tell.
func (d *Driver) lookCPU(ctx context.Context, sa statsAPI, l *activityLook, prev activitySample) (activitySample, bool, bool) {
	id := l.id
	fromStart := !l.since.IsZero() && !l.started.IsZero() && (prev.At.IsZero() || l.started.After(prev.At))
	sampled := !fromStart && prev.At.IsZero()
	var (
		r   container.StatsResponseReader
		err error
	)
	if sampled {
		r, err = sa.ContainerStats(ctx, id, false)
	} else {
		r, err = sa.ContainerStatsOneShot(ctx, id)
	}
	if err != nil {
		d.log.Debug("reading a workload's CPU use", "id", shortID(id), "error", err)
		return activitySample{}, false, false
	}
	defer r.Body.Close()
	var st container.StatsResponse
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&st); err != nil {
		d.log.Debug("reading a workload's CPU use", "id", shortID(id), "error", err)
		return activitySample{}, false, false
	}
	s := activitySample{CPU: st.CPUStats.CPUUsage.TotalUsage, At: st.Read, Active: prev.Active}
	if s.At.IsZero() {
		return activitySample{}, false, false // a container that stopped meanwhile
	}
	from, fromAt := prev.CPU, prev.At
	switch {
	case fromStart:
		from, fromAt = 0, l.started
	case sampled:
		from, fromAt = st.PreCPUStats.CPUUsage.TotalUsage, st.PreRead
	}
	return s, cpuBusy(from, fromAt, s.CPU, s.At, l.since), true
}

// cpuBusy says whether a counter of CPU nanoseconds that went from cpu0
// at t0 to cpu1 at t1 averaged CPUBusy cores or more: over the part of
// the interval after since when since falls inside it, as if all of it
// were used then (the caller asks about that part only, and a reading
// over a long span must not dilute a recent use). A counter that went
// back (the container started again: a new cgroup) or no interval tells
// nothing: not busy (its start is its last use anyway).
func cpuBusy(cpu0 uint64, t0 time.Time, cpu1 uint64, t1 time.Time, since time.Time) bool {
	if t0.IsZero() || !t1.After(t0) || cpu1 < cpu0 {
		return false
	}
	span := t1.Sub(t0)
	if since.After(t0) && t1.After(since) {
		span = t1.Sub(since)
	}
	return float64(cpu1-cpu0) >= CPUBusy*float64(span.Nanoseconds())
}

// lookGateway reads the gateway's activity stamp: the time of its last
// proxy request, none before the first; a gateway without one (of a
// bottlefile before it) cannot tell.
func (d *Driver) lookGateway(ctx context.Context, api dockerAPI, l *activityLook) {
	st, err := api.ContainerStatPath(ctx, l.id, gateway.ActivityPath)
	if err != nil {
		if !cerrdefs.IsNotFound(err) {
			d.log.Debug("reading a gateway's activity stamp", "id", shortID(l.id), "error", err)
		}
		l.unknown = true
		return
	}
	if st.Mtime.After(egress.NoActivity) {
		l.last = st.Mtime
	}
}

// activitySample is what the driver remembers of one container between
// looks.
type activitySample struct {
	CPU uint64    `json:"cpu"` // the CPU counter, in nanoseconds
	At  time.Time `json:"at"`  // when the engine read it
	// Active is the last time a look found the container in use, or a
	// bottlefile exec session in it ended.
	Active time.Time `json:"active,omitzero"`
}

// activityMemory keeps the samples of one runtime's containers in a file
// of the state directory, so that looks of separate runs (tick from cron)
// average CPU between them; without a state directory, in memory only.
type activityMemory struct {
	path string

	mu      sync.Mutex // guards samples
	samples map[string]activitySample
}

// activityMemory is the driver's memory named name ("" for its own, of
// its runtime's containers; Driver.actMems), pointed at the configured
// state directory.
func (d *Driver) activityMemory(name string) *activityMemory {
	d.mu.RLock()
	stateDir, runtime := d.stateDir, d.runtime
	d.mu.RUnlock()
	if name == "" {
		name = "docker-" + runtime
	}
	name = memoryFileName(name)
	path := ""
	if stateDir != "" {
		path = filepath.Join(stateDir, "activity", name+".json")
	}
	v, _ := d.actMems.LoadOrStore(name, &activityMemory{})
	mem := v.(*activityMemory)
	mem.mu.Lock()
	if mem.path != path {
		mem.path, mem.samples = path, nil
	}
	mem.mu.Unlock()
	return mem
}

// load returns the samples as last saved (by this process or another).
func (m *activityMemory) load() map[string]activitySample {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.readLocked()
	return maps.Clone(m.samples)
}

func (m *activityMemory) readLocked() {
	if m.path == "" {
		if m.samples == nil {
			m.samples = map[string]activitySample{}
		}
		return
	}
	samples := map[string]activitySample{}
	if data, err := os.ReadFile(m.path); err == nil {
		_ = json.Unmarshal(data, &samples) // a damaged file is a first look
	}
	m.samples = samples
}

// save keeps the samples of this look, the containers no longer listed
// forgotten. Another process's newer Active (an exec that ended
// meanwhile) is kept.
func (m *activityMemory) save(looks []*activityLook, listed map[string]bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.readLocked()
	for id := range m.samples {
		if !listed[id] {
			delete(m.samples, id)
		}
	}
	for _, l := range looks {
		if l.sample == nil {
			continue
		}
		s := *l.sample
		if old := m.samples[l.id]; old.Active.After(s.Active) {
			s.Active = old.Active
		}
		m.samples[l.id] = s
	}
	return m.writeLocked()
}

// forget drops the containers ids.
func (m *activityMemory) forget(ids []string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.readLocked()
	for _, id := range ids {
		delete(m.samples, id)
	}
	return m.writeLocked()
}

// memoryFileName is name with every character a file name should not
// hold (a separator, a space) replaced by "_".
func memoryFileName(name string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '.', r == '_':
			return r
		}
		return '_'
	}, name)
}

// note records that the container was in use at t (an exec session of
// bottlefile's ended), for the next look.
func (m *activityMemory) note(id string, t time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.readLocked()
	s := m.samples[id]
	if !t.After(s.Active) {
		return nil
	}
	s.Active = t
	m.samples[id] = s
	return m.writeLocked()
}

func (m *activityMemory) writeLocked() error {
	if m.path == "" {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(m.path), 0o700); err != nil {
		return err
	}
	data, err := json.Marshal(m.samples)
	if err != nil {
		return err
	}
	return atomicfile.Write(m.path, data, 0o600)
}

// noteExecEnded records the end of a bottlefile exec session in the
// container id: the agent was in use until then, which no later look
// could see. Failing to is logged, never the command's error.
func (d *Driver) noteExecEnded(id string) {
	if err := d.activityMemory("").note(id, time.Now()); err != nil {
		d.log.Debug("could not record the end of an exec session", "id", shortID(id), "error", err)
	}
}
