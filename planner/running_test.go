package planner

import (
	"slices"
	"testing"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/state"
)

// TestRunningFrom: which snapshot a live workload runs is read from the
// image the runtime reports (docker's image id, a swarm service's
// ref@digest, a smolvm machine's reference), and from the record only
// where that names no snapshot.
func TestRunningFrom(t *testing.T) {
	snap := func(addr, id, name string) *Change {
		return &Change{Addr: addr, Kind: drivers.KindSnapshot, Live: &drivers.LiveObject{Addr: addr, Kind: drivers.KindSnapshot, ID: id, Name: name}}
	}
	work := func(addr, image, bootFrom string) *Change {
		c := &Change{Addr: addr, Kind: "container", Live: &drivers.LiveObject{Addr: addr, Kind: "container", ID: addr + "-id", ImageID: image}}
		if bootFrom != "" {
			c.Prior = &state.Record{Addr: addr, Computed: map[string]string{BootFromKey: bootFrom}}
		}
		return c
	}
	changes := map[string]*Change{}
	for _, c := range []*Change{
		snap("agent.a.snapshot.1", "sha256:aaa", "bf-x-a-snap:1"),
		snap("agent.b.snapshot.1", "reg:5000/bf-x-b-snap@sha256:bbb", "reg:5000/bf-x-b-snap@sha256:bbb"),
		snap("agent.c.snapshot.1", "reg:5000/bf-x-c-snap:1", "reg:5000/bf-x-c-snap:1"),
		snap("agent.d.snapshot.2", "sha256:ddd", "bf-x-d-snap:2"),
		work("agent.a", "sha256:aaa", "agent.a.snapshot.9"),      // docker: the image id wins over a wrong record
		work("agent.b", "reg:5000/bf-x-b-snap@sha256:bbb", ""),   // swarm: the recorded digest
		work("agent.c", "reg:5000/bf-x-c-snap:1@sha256:ccc", ""), // swarm: ref pinned to a digest
		work("agent.d", "sha256:other", "agent.d.snapshot.2"),    // names no snapshot: the record says
		work("agent.e", "", ""), // nothing known
	} {
		changes[c.Addr] = c
	}
	got := runningAddrs(runningFrom(changes))
	want := map[string][]string{
		"agent.a.snapshot.1": {"agent.a"},
		"agent.b.snapshot.1": {"agent.b"},
		"agent.c.snapshot.1": {"agent.c"},
		"agent.d.snapshot.2": {"agent.d"},
	}
	if len(got) != len(want) {
		t.Errorf("running from %v, want %v", got, want)
	}
	for k, v := range want {
		if !slices.Equal(got[k], v) {
			t.Errorf("%s: run by %v, want %v", k, got[k], v)
		}
	}
}
