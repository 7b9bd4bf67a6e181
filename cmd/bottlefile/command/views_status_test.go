package command

import (
	"strings"
	"testing"
	"time"

	"github.com/bottlefile/bottlefile/operations"
)

// A workload on a runtime of several machines says where it runs, in the
// table and in JSON; one on a single machine says nothing of it.
func TestStatusShowsNode(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	code := 3
	bottles := []operations.BottleStatus{{
		Addr: "agent.coder", Runtime: "fleet", Driver: "swarm",
		Workloads: []operations.WorkloadStatus{
			{Addr: "agent.coder", Role: "agent", ID: "svc1", State: operations.WorkloadRunning, Started: at.Add(-time.Minute), Node: "node2"},
			{Addr: "agent.coder.sidecar.db", Role: "sidecar", ID: "svc2", State: operations.WorkloadExited, ExitCode: &code, Node: "node3"},
			{Addr: "agent.coder.gateway", Role: "gateway", ID: "c3", State: operations.WorkloadRunning},
		},
	}}
	var table strings.Builder
	renderStatus(&table, bottles, at)
	for _, want := range []string{"agent.coder  ", "running on node2", "exited (3) on node3"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("status table lacks %q:\n%s", want, table.String())
		}
	}
	if strings.Contains(table.String(), "running on \n") || strings.Count(table.String(), " on node") != 2 {
		t.Errorf("a workload without a node names one:\n%s", table.String())
	}
	var js strings.Builder
	if err := writeStatusJSON(&js, bottles, at); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(js.String(), `"node": "node2"`) || strings.Count(js.String(), `"node"`) != 2 {
		t.Errorf("status JSON:\n%s\nwant node on the two swarm workloads only", js.String())
	}
}
