package swarm

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/zclconf/go-cty/cty"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/swarm/swarmtest"
)

// TestExecAndLogsOnSwarm: exec and logs reach an agent whose task runs on
// node3 through node3's engine: the command's output on its streams and
// its exit code; the task's log as it wrote it. Without node3 in
// node_hosts, both say how to name it.
func TestExecAndLogsOnSwarm(t *testing.T) {
	f := swarmtest.Start(t)
	d := fixtureDriver(t, f, true, nil)
	lineage := uuid.NewString()
	f.Cleanup(t, lineage)
	ctx := t.Context()

	agent := placedAgent("talker", f.Busybox, []string{"node.labels.zone==c"}, nil)
	agent.Workload = drivers.WithWorkloadAttr(agent.Workload, "command", drivers.StringsValue([]string{"sh", "-c", "echo hello-log; echo err-log >&2; exec sleep 600"}))
	plan, err := d.Plan(ctx, drivers.PlanRequest{Agent: agent})
	if err != nil {
		t.Fatal(err)
	}
	applyAll(t, d, lineage, plan.Objects)
	read, err := d.Read(ctx, drivers.ReadRequest{Lineage: lineage})
	if err != nil {
		t.Fatal(err)
	}
	var obj drivers.LiveObject
	for _, o := range read.Objects {
		if o.Addr == "agent.talker" {
			obj = o
		}
	}
	if obj.Node != "node3" {
		t.Fatalf("the agent runs on %q, want node3", obj.Node)
	}

	var out, errw bytes.Buffer
	code, err := d.Exec(ctx, lineage, obj, drivers.ExecRequest{Command: []string{"sh", "-c", "echo out-$(hostname | wc -c); echo err >&2; exit 3"}, Stdout: &out, Stderr: &errw})
	if err != nil || code != 3 || !strings.HasPrefix(out.String(), "out-") || errw.String() != "err\n" {
		t.Errorf("exec: code %d, err %v, stdout %q, stderr %q; want 3, out-N, err", code, err, out.String(), errw.String())
	}
	out.Reset()
	errw.Reset()
	if err := d.Logs(ctx, lineage, obj, drivers.LogOptions{}, &out, &errw); err != nil || out.String() != "hello-log\n" || errw.String() != "err-log\n" {
		t.Errorf("logs: err %v, stdout %q, stderr %q", err, out.String(), errw.String())
	}

	partial := fixtureDriver(t, f, true, map[string]cty.Value{attrNodeHosts: cty.MapVal(map[string]cty.Value{"node2": cty.StringVal(f.Nodes[1].Host)})})
	if _, err := partial.Exec(ctx, lineage, obj, drivers.ExecRequest{Command: []string{"true"}}); err == nil || !strings.Contains(err.Error(), "node_hosts") || !strings.Contains(err.Error(), "node3") {
		t.Errorf("exec without node3's engine: %v, want an error naming node3 and node_hosts", err)
	}
	deleteAll(t, d, lineage)
}
