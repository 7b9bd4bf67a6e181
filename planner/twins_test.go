package planner_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/planner"
)

// twinDriver reports, besides what the fake has, second objects of the
// fake's addresses (as the docker engine can hold two networks of one name
// when a killed apply's create lands beside the next one's), and deletes
// them by id.
type twinDriver struct {
	drivers.Driver
	mu      sync.Mutex
	twins   []drivers.LiveObject
	deleted []string
}

func (d *twinDriver) Read(ctx context.Context, req drivers.ReadRequest) (drivers.ReadResponse, error) {
	resp, err := d.Driver.Read(ctx, req)
	d.mu.Lock()
	defer d.mu.Unlock()
	// The twin first: the recorded one is still the address's.
	resp.Objects = append(slices.Clone(d.twins), resp.Objects...)
	return resp, err
}

func (d *twinDriver) Apply(ctx context.Context, req drivers.ApplyRequest) (drivers.ApplyResponse, error) {
	d.mu.Lock()
	for i, t := range d.twins {
		if req.Op == drivers.OpDelete && req.ID == t.ID {
			d.twins = slices.Delete(d.twins, i, i+1)
			d.deleted = append(d.deleted, t.ID)
			d.mu.Unlock()
			return drivers.ApplyResponse{}, nil
		}
	}
	d.mu.Unlock()
	return d.Driver.Apply(ctx, req)
}

// TestTwinRemovedByPlan: a second object of an address, carrying the
// lineage, is shown in the plan and removed by its id; the recorded one
// stays, and the next plan has no changes. A destroy plan removes it too,
// so it is never left for destroy to miss. Before, refresh kept one object
// per address and the other was invisible to every plan.
func TestTwinRemovedByPlan(t *testing.T) {
	b := newBench(t)
	b.write(`
agent "a" {
  image = "x:1"
}
`)
	b.apply(planner.Options{})
	recs := b.records()
	twin := &twinDriver{twins: []drivers.LiveObject{{Addr: "agent.a.network", Kind: "network", ID: "twin-network-id", Name: "bf-twin", Hash: recs["agent.a.network"].Hash}}}
	b.wrap = func(d drivers.Driver) drivers.Driver { twin.Driver = d; return twin }

	for _, destroy := range []bool{true, false} {
		p := b.plan(planner.Options{Destroy: destroy})
		var twinChange *planner.Change
		for _, c := range p.Changes {
			if c.Addr == "agent.a.network" && c.Live != nil && c.Live.ID == "twin-network-id" {
				twinChange = c
			} else if !destroy && c.Action != planner.NoOp {
				t.Errorf("%s: %s, want no change (the recorded object stays)", c.Addr, c.Action)
			}
		}
		if twinChange == nil || twinChange.Action != planner.Delete || !twinChange.Twin || !strings.Contains(strings.Join(planner.ReasonTexts(twinChange.Reasons), " "), "second network of this name") {
			t.Fatalf("destroy=%v: plan has no removal of the twin:\n%s", destroy, p)
		}
	}
	b.apply(planner.Options{})
	if !slices.Equal(twin.deleted, []string{"twin-network-id"}) {
		t.Errorf("deleted %v, want the twin by its id", twin.deleted)
	}
	if r := b.records()["agent.a.network"]; r.ID != recs["agent.a.network"].ID {
		t.Errorf("the recorded network changed: %s, was %s", r.ID, recs["agent.a.network"].ID)
	}
	for _, c := range b.plan(planner.Options{}).Changes {
		if c.Action != planner.NoOp {
			t.Errorf("after the apply, %s: %s", c.Addr, c.Action)
		}
	}
}
