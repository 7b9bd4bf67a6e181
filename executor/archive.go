package executor

import (
	"context"
	"fmt"
	"maps"
	"time"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/planner"
	"github.com/bottlefile/bottlefile/state"
)

// archive archives one object of an archived agent (planner/archive.go):
// its record is marked archived first (with the snapshot that keeps the
// agent, on the agent's workload), then the object is removed from its
// runtime. A process cut off between the two leaves a marked record of a
// live object, which the next plan archives again; never an object gone
// whose record does not say why.
func (e *Executor) archive(ctx context.Context, s *planner.Step, rt *planner.Runtime) error {
	c := s.Change
	rec, err := e.recordOf(c)
	if err != nil {
		return err
	}
	rec.Computed = maps.Clone(rec.Computed)
	if rec.Computed == nil {
		rec.Computed = map[string]string{}
	}
	if rec.Computed[planner.ArchivedKey] == "" {
		now := time.Now
		if e.Clock != nil {
			now = e.Clock
		}
		rec.Computed[planner.ArchivedKey] = now().UTC().Format(time.RFC3339)
	}
	if c.ArchiveTo != "" {
		rec.Computed[planner.ArchiveSnapshotKey] = c.ArchiveTo
	}
	delete(rec.Computed, planner.StoppedKey) // gone, not stopped
	if err := e.State.Put(rec); err != nil {
		return err
	}
	if c.Live == nil {
		return nil // already gone: the mark is all there is to do
	}
	_, err = rt.Driver.Apply(ctx, drivers.ApplyRequest{
		Op: drivers.OpDelete, Lineage: e.Lineage, ID: c.Live.ID,
		Object: drivers.Object{Addr: c.Addr, Kind: c.Live.Kind}, NameAddr: c.NameAddr, RuntimeNameAddr: c.RuntimeNameAddr,
	})
	return err
}

// recordOf is the change's record: the plan's, or, for a plan read from a
// file (which carries none), the state's.
func (e *Executor) recordOf(c *planner.Change) (state.Record, error) {
	if c.Prior != nil {
		return *c.Prior, nil
	}
	records, err := e.State.Records()
	if err != nil {
		return state.Record{}, err
	}
	for _, r := range records {
		if r.Addr == c.Addr {
			return r, nil
		}
	}
	return state.Record{}, fmt.Errorf("%s: only a recorded object can be archived", c.Addr)
}
