package drivertest

import (
	"context"
	"fmt"

	"github.com/bottlefile/bottlefile/drivers"
)

var _ drivers.Stopper = (*Fake)(nil)

// StopWorkload stops a workload as bottlefile stop asks (drivers.Stopper):
// it keeps its files and its id, and OpStart runs it again. Stopping one
// that is not running is no error.
func (f *Fake) StopWorkload(ctx context.Context, req drivers.StopRequest) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	l := f.lineages[req.Lineage]
	if l == nil || l.objects[req.Object.Addr] == nil {
		return fmt.Errorf("fake: stop %s: no such object", req.Object.Addr)
	}
	obj := l.objects[req.Object.Addr]
	if req.ID != "" && req.ID != obj.live.ID {
		return fmt.Errorf("fake: stop %s: no object with id %s (it is %s)", req.Object.Addr, req.ID, obj.live.ID)
	}
	if !obj.workload {
		return fmt.Errorf("fake: stop %s: a %s is not a workload", req.Object.Addr, obj.live.Kind)
	}
	if obj.live.Running {
		obj.live.Running = false
		obj.live.State, obj.live.Finished = drivers.StateExited, f.clock()
		obj.live.Exit = &drivers.Exit{Stopped: true, At: obj.live.Finished}
		l.sorted = nil
	}
	return nil
}
