package executor

import (
	"context"
	"fmt"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/planner"
)

// stop stops a workload through its driver (drivers.Stopper) and records
// it as stopped on purpose (planner.StoppedKey), so that the next plan
// leaves it stopped until bottlefile start.
func (e *Executor) stop(ctx context.Context, s *planner.Step, rt *planner.Runtime) error {
	c := s.Change
	st, ok := drivers.As[drivers.Stopper](rt.Driver)
	if !ok {
		return fmt.Errorf("%s: the %s driver cannot stop workloads", c.Addr, rt.Driver.Name())
	}
	if c.Prior == nil {
		return fmt.Errorf("%s: only a recorded workload can be stopped", c.Addr)
	}
	obj := c.Object
	if obj.Addr == "" {
		obj = drivers.Object{Addr: c.Addr, Kind: c.Kind, Workload: true}
	}
	if err := st.StopWorkload(ctx, drivers.StopRequest{Lineage: e.Lineage, Object: obj, ID: c.ID(), NameAddr: c.NameAddr}); err != nil {
		return err
	}
	// The record is kept as it was (a stop changes no configuration),
	// marked stopped.
	rec := *c.Prior
	rec.Computed = marked(rec.Computed, s.Op)
	if c.StopReason != "" && s.Op.Stopped() > 0 {
		rec.Computed[planner.StoppedKey] = c.StopReason // marked cloned it
	}
	return e.State.Put(rec)
}
