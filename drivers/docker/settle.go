package docker

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/bottlefile/bottlefile/drivers"
)

var (
	_ drivers.Settler       = (*Driver)(nil)
	_ drivers.ExitDescriber = (*Driver)(nil)
)

// settlePoll is how often Settle inspects a container with a healthcheck
// it watches; one without is looked at on its start and at the deadline.
const settlePoll = 200 * time.Millisecond

// startMark is what Settle learns of a start this process made: when it
// happened, and whether the inspect that followed (containerResponse) saw
// the container running without a healthcheck.
type startMark struct {
	at      time.Time // the engine's StartedAt when trusted, else after
	running bool
	// before and after bracket the start call, local clock: the engine's
	// StartedAt is taken only between them.
	before, after time.Time
	// lookedAt is when the inspect after the start answered.
	lookedAt time.Time
}

// markStarted records a start of id this process made: before is the
// local time taken just before the start call, and it has just returned.
// The watch counts from the return until the inspect that follows gives
// the engine's own time of the start (markLooked).
func (d *Driver) markStarted(id string, before time.Time) {
	after := time.Now()
	d.started.Store(id, startMark{at: after, before: before, after: after})
}

// markLooked records what the inspect right after a start of id saw: the
// engine's State.StartedAt, which the watch then counts from when it lies
// between the local times around the start call (true of a local engine;
// a remote engine whose clock is off is counted from the local time), and
// whether it was running without a healthcheck (the watch's first look).
func (d *Driver) markLooked(info container.InspectResponse) {
	if info.ContainerJSONBase == nil || info.State == nil {
		return
	}
	v, ok := d.started.Load(info.ID)
	if !ok {
		return
	}
	m := v.(startMark)
	m.at = startedAt(m, info.State.StartedAt)
	m.running = info.State.Running && info.State.Health == nil
	m.lookedAt = time.Now()
	d.started.Store(info.ID, m)
}

// startedAt is the time the watch of a start counts from: the engine's
// StartedAt (RFC 3339) when it lies within [m.before, m.after], else
// m.after. The result keeps m.after's monotonic reading, so that the
// deadline does not move with the wall clock.
func startedAt(m startMark, engine string) time.Time {
	at, err := time.Parse(time.RFC3339Nano, engine)
	if err != nil || at.Before(m.before) || at.After(m.after) {
		return m.after
	}
	return m.after.Add(at.Sub(m.after))
}

// lastLines is how many lines of its log an exited workload reports.
const lastLines = 5

// Settle watches an agent or sidecar container apply just started: it
// fails when the container exits within req.Wait of its start (it looks
// at least once), or, with a healthcheck,
// until the engine reports it healthy (nil) or unhealthy (an
// *drivers.ExitError with the last health output). A gateway is not
// watched here: create and start already wait for it to listen with its
// rules in force.
func (d *Driver) Settle(ctx context.Context, req drivers.SettleRequest) error {
	if req.Object.Kind != kindContainer || req.ID == "" {
		return nil
	}
	api, _, err := d.engine(ctx)
	if err != nil {
		return err
	}
	// The watch counts from the container's start (the engine's time of
	// it, markLooked): the inspect and the state write after it are time
	// it ran too.
	from, looked := time.Now(), false
	var lookedAt time.Time
	if v, ok := d.started.LoadAndDelete(req.ID); ok {
		m := v.(startMark)
		from, looked, lookedAt = m.at, m.running, m.lookedAt
	}
	deadline := from.Add(req.Wait)
	if looked && lookedAt.After(deadline) {
		// The engine answered the inspect after the start only once the
		// whole wait had passed: it is loaded, and so may be the
		// workload, which may not have run its first lines yet (CI saw
		// `sh -c 'exit 3'` pass the watch so). The last look is a whole
		// wait after that answer.
		deadline = lookedAt.Add(req.Wait)
	}
	if looked {
		// The inspect right after the start saw it running without a
		// healthcheck: that was the first look, and the next is at the
		// deadline (one inspect fewer per workload, issue 28).
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Until(deadline)):
		}
	}
	for {
		info, err := api.ContainerInspect(ctx, req.ID)
		if err != nil {
			return fmt.Errorf("watching %s after its start: %w", req.Object.Addr, err)
		}
		st := info.State
		if st == nil {
			return nil
		}
		if !st.Running && !st.Restarting {
			return &drivers.ExitError{Addr: req.Object.Addr, Exit: *d.exitOf(ctx, api, info)}
		}
		if h := st.Health; h != nil {
			switch h.Status {
			case container.Healthy:
				return nil
			case container.Unhealthy:
				out := ""
				if n := len(h.Log); n > 0 {
					out = strings.TrimSpace(h.Log[n-1].Output)
					if out == "" {
						out = fmt.Sprintf("(no output; exit code %d)", h.Log[n-1].ExitCode)
					}
				}
				return &drivers.ExitError{Addr: req.Object.Addr, Unhealthy: true, Health: out}
			}
		} else if !time.Now().Before(deadline) {
			return nil
		}
		wait := settlePoll
		if st.Health == nil {
			// One more look, at the deadline: an exit in between shows
			// then, and an apply starting many workloads does not add an
			// inspect of each every poll to the engine's work.
			wait = max(time.Until(deadline), time.Millisecond)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
	}
}

// exitStatus is the engine's list status of an exited container:
// "Exited (127) 5 minutes ago".
var exitStatus = regexp.MustCompile(`^Exited \((-?\d+)\)`)

// exitFromStatus is what the container list says of how a container
// ended: its code, judged by the rule of exitOf without the out-of-memory
// flag, which only inspect has (DescribeExit). Nil when the status does
// not say.
func exitFromStatus(status string) *drivers.Exit {
	m := exitStatus.FindStringSubmatch(status)
	if m == nil {
		return nil
	}
	code, err := strconv.Atoi(m[1])
	if err != nil {
		return nil
	}
	return &drivers.Exit{Code: code, Stopped: code == 137 || code == 143}
}

// DescribeExit inspects an exited agent or sidecar container for how it
// ended, and reads the last lines of its log.
func (d *Driver) DescribeExit(ctx context.Context, lineage string, obj drivers.LiveObject) (*drivers.Exit, error) {
	if obj.Kind != kindContainer || obj.ID == "" {
		return obj.Exit, nil
	}
	api, _, err := d.engine(ctx)
	if err != nil {
		return nil, err
	}
	info, err := api.ContainerInspect(ctx, obj.ID)
	if err != nil {
		return nil, fmt.Errorf("inspecting the exited container %s of %s: %w", shortID(obj.ID), obj.Addr, err)
	}
	if info.State == nil || info.State.Running {
		return obj.Exit, nil
	}
	return d.exitOf(ctx, api, info), nil
}

// exitOf says how a container that is not running came to stop. The
// engine does not record whether `docker stop` or `docker kill` ended a
// container, so the rule is the exit code: 143 (SIGTERM, what docker stop
// sends first) or 137 (SIGKILL, what it sends after the grace period, and
// docker kill's default), unless the kernel's out-of-memory killer sent
// it, counts as stopped by someone; every other code is the workload's
// own exit, reported with the last lines it printed.
func (d *Driver) exitOf(ctx context.Context, api dockerAPI, info container.InspectResponse) *drivers.Exit {
	st := info.State
	e := &drivers.Exit{Code: st.ExitCode, OOMKilled: st.OOMKilled, Error: st.Error}
	if at, err := time.Parse(time.RFC3339Nano, st.FinishedAt); err == nil && at.Year() > 1 {
		e.At = at
	}
	e.Stopped = !st.OOMKilled && (st.ExitCode == 137 || st.ExitCode == 143)
	if e.Stopped {
		return e
	}
	rc, err := api.ContainerLogs(ctx, info.ID, container.LogsOptions{ShowStdout: true, ShowStderr: true, Tail: fmt.Sprint(lastLines)})
	if err != nil {
		d.log.Debug("reading the last lines of an exited container", "id", shortID(info.ID), "error", err)
		return e
	}
	defer rc.Close()
	var buf bytes.Buffer
	_, _ = stdcopy.StdCopy(&buf, &buf, rc)
	for _, l := range strings.Split(strings.TrimRight(buf.String(), "\n"), "\n") {
		if l = strings.TrimRight(l, "\r"); l != "" {
			e.Last = append(e.Last, l)
		}
	}
	return e
}
