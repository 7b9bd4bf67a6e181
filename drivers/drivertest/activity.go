package drivertest

import (
	"context"

	"github.com/bottlefile/bottlefile/drivers"
)

var _ drivers.ActivityReader = (*Fake)(nil)

// SetActivity sets what Activity reports for the agent at addr (an agent
// address, "agent.NAME" or an instance's) of a lineage, while the fake
// has its workload: a test says when the agent was last used, whether it
// is busy and whether it wrote, as an engine would measure them.
func (f *Fake) SetActivity(lineage, addr string, a drivers.Activity) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.activity == nil {
		f.activity = map[[2]string]drivers.Activity{}
	}
	f.activity[[2]string{lineage, addr}] = a
}

// Activity records the request and answers with ActivityFn when set.
// Otherwise each asked agent the fake has a workload for gets what
// SetActivity set, or, when nothing was set, what an engine that saw no
// use would report: last active when its workload last started (or
// stopped, when it is not running), not busy, Wrote unknown. An agent
// the fake has no workload for is left out, as a driver leaves out one
// the runtime runs nothing of.
func (f *Fake) Activity(ctx context.Context, req drivers.ActivityRequest) (map[string]drivers.Activity, error) {
	f.mu.Lock()
	f.ActivityCalls++
	f.ActivityRequest = req
	fn := f.ActivityFn
	f.mu.Unlock()
	if fn != nil {
		return fn(req)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	l := f.lineageLocked(req.Lineage)
	out := map[string]drivers.Activity{}
	for _, addr := range req.Agents {
		o := l.objects[addr]
		if o == nil || !o.workload {
			continue
		}
		if a, ok := f.activity[[2]string{req.Lineage, addr}]; ok {
			out[addr] = a
			continue
		}
		last := o.live.Started
		if !o.live.Running && o.live.Finished.After(last) {
			last = o.live.Finished
		}
		if last.IsZero() {
			last = o.live.Created
		}
		out[addr] = drivers.Activity{LastActive: last}
	}
	return out, nil
}
