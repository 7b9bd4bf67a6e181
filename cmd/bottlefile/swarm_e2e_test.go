package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/swarm"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/swarm/swarmtest"
)

// e2eSwarmPlacement is issue 15's first promise on the three-node
// fixture: nine bottles placed by node labels land on the labelled nodes
// (status says where), a second plan says "No changes.", one scaled
// outside bottlefile is drift the plan names with its node, and destroy
// leaves no service, network, task container, config or image of the
// lineage on any node.
func e2eSwarmPlacement(t *testing.T) {
	f := swarmtest.Start(t)
	dir := t.TempDir()
	var cfg strings.Builder
	fmt.Fprintf(&cfg, "runtime \"fleet\" {\n  driver       = \"swarm\"\n  host         = %q\n  registry     = %q\n  registry_url = %q\n}\n", f.Manager().Host, f.Registry, f.RegistryURL)
	want := map[string]string{} // agent -> node
	for _, n := range f.Nodes {
		zone := n.Labels["zone"]
		for j := 1; j <= 3; j++ {
			name := fmt.Sprintf("%s%d", zone, j)
			want[name] = n.Name
			fmt.Fprintf(&cfg, `
agent %q {
  runtime = runtime.fleet
  image   = %q
  command = ["sleep", "600"]
  driver {
    placement = ["node.labels.zone==%s"]
  }
}
`, name, f.Busybox, zone)
		}
	}
	writeBottlefile(t, dir, "%s", cfg.String())

	timed := func(args ...string) result {
		t.Helper()
		start := time.Now()
		r := mustRun(t, dir, args...)
		t.Logf("bottlefile %s: %.1fs", strings.Join(args, " "), time.Since(start).Seconds())
		return r
	}
	r := timed("apply", "-auto-approve")
	lineage, _ := readState(t, dir)
	if lineage == "" {
		t.Fatal("no lineage after apply")
	}
	f.Cleanup(t, lineage)
	if !strings.Contains(r.stdout, "Apply complete! Objects: 18 added") {
		t.Errorf("apply did not add 9 networks and 9 services:\n%s", r)
	}
	prefix := drivers.LineagePrefix(lineage)
	for agent, node := range want {
		i, _, err := f.TaskContainer(t.Context(), "bf-"+prefix+"-"+agent)
		if err != nil {
			t.Errorf("agent.%s: %v", agent, err)
			continue
		}
		if got := f.Nodes[i].Name; got != node {
			t.Errorf("agent.%s runs on %s, want %s (its zone label)", agent, got, node)
		}
	}

	if r := timed("plan", "-detailed-exitcode"); !strings.Contains(r.stdout, "No changes.") {
		t.Errorf("the plan after apply is not empty:\n%s", r)
	}
	// Scaled outside bottlefile: the plan says so, and where it runs.
	mgr := f.Client(t, 0)
	svc, _, err := mgr.ServiceInspectWithRaw(t.Context(), "bf-"+prefix+"-b1", swarm.ServiceInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	three := uint64(3)
	svc.Spec.Mode.Replicated.Replicas = &three
	if _, err := mgr.ServiceUpdate(t.Context(), svc.ID, svc.Version, svc.Spec, swarm.ServiceUpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	r = mustRun(t, dir, "plan")
	for _, want := range []string{"# agent.b1 (on node2) must be replaced", "it was scaled to 3 replicas outside bottlefile", "Plan: 1 to add, 0 to change, 1 to destroy."} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("the plan after scaling agent.b1 to 3 lacks %q:\n%s", want, r.stdout)
		}
	}

	r = mustRun(t, dir, "status")
	for agent, node := range want {
		if !strings.Contains(r.stdout, fmt.Sprintf("agent.%s  ", agent)) || !strings.Contains(r.stdout, "running on "+node) {
			t.Errorf("status does not show agent.%s running on %s:\n%s", agent, node, r.stdout)
		}
	}

	r = timed("destroy", "-auto-approve")
	if !strings.Contains(r.stdout, "Destroy complete! Objects: 0 added, 0 changed, 18 destroyed") {
		t.Errorf("destroy did not remove the 18 objects:\n%s", r)
	}
	var left []string
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		var err error
		if left, err = f.LineageObjects(context.Background(), lineage); err != nil {
			t.Fatal(err)
		}
		if len(left) == 0 || time.Now().After(deadline) {
			break
		}
	}
	if len(left) > 0 {
		t.Errorf("left on the swarm after destroy:\n  %s", strings.Join(left, "\n  "))
	}
}

// e2eSwarmExamplePlans: examples/swarm, pointed at the fixture's
// manager and registry as its README says, plans what it describes.
func e2eSwarmExamplePlans(t *testing.T) {
	f := swarmtest.Start(t)
	dir := copyExampleTree(t, "swarm")
	r := mustRun(t, dir, "plan", "-var", "manager="+f.Manager().Host, "-var", "registry="+f.Registry)
	for _, want := range []string{
		"+ agent.alpha (service)", "+ agent.alpha.sidecar.cache (service)", "+ agent.alpha.gateway (gateway)",
		"+ agent.beta.gateway (gateway)", "+ agent.gamma (service)", "+ runtime.fleet.egress (network)",
		`"node.labels.pool==agents"`,
		"Plan: 10 to add, 0 to change, 0 to destroy.",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("the example's plan lacks %q:\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "agent.gamma.gateway") {
		t.Errorf("gamma has no egress block, but its plan has a gateway:\n%s", r.stdout)
	}
}

const swarmTickIdleConfig = `%[1]s
agent "idle" {
  runtime = runtime.fleet
  image   = %[2]q
  command = ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1; done"]
  egress {
    allow = []
  }
  driver {
    placement = ["node.labels.zone==b"]
  }
  idle {
    stop_after = "3s"
  }
}

agent "old" {
  runtime = runtime.fleet
  image   = %[2]q
  command = ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1; done"]
  driver {
    placement = ["node.labels.zone==c"]
  }
  idle {
    archive_after = "3s"
  }
}
`

// e2eSwarmTickIdle is issue 31's idle policies on the swarm, tick run as
// cron runs it: an agent on a worker nobody uses (its gateway a service
// of its own), with stop_after = "3s", is stopped by a tick (its service
// scaled to none, recorded stopped for idleness: plan then says "No
// changes."); one with archive_after = "3s" is archived (its service
// removed, a snapshot in the registry) and exec resumes it with the file
// it wrote.
func e2eSwarmTickIdle(t *testing.T) {
	f := swarmtest.Start(t)
	dir := t.TempDir()
	writeBottlefile(t, dir, swarmTickIdleConfig, swarmRuntime(f, "fleet"), f.Busybox)
	mustRun(t, dir, "apply", "-auto-approve")
	lineage, _ := readState(t, dir)
	if lineage == "" {
		t.Fatal("no lineage after apply")
	}
	f.Cleanup(t, lineage)
	t.Cleanup(func() { bottlefile(t, dir, "destroy", "-auto-approve", "-include-snapshots") })
	mustRun(t, dir, "exec", "agent.old", "--", "sh", "-c", "echo kept > /tmp/notes.txt")

	mgr := f.Client(t, 0)
	// state is "running", "stopped" (scaled to none) or "gone".
	state := func(addr string) string {
		t.Helper()
		list, err := mgr.ServiceList(t.Context(), swarm.ServiceListOptions{Filters: filters.NewArgs(
			filters.Arg("label", drivers.LabelLineage+"="+lineage), filters.Arg("label", drivers.LabelAddress+"="+addr))})
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case len(list) == 0:
			return "gone"
		case len(list) > 1:
			return fmt.Sprintf("%d services", len(list))
		case list[0].Spec.Mode.Replicated != nil && list[0].Spec.Mode.Replicated.Replicas != nil && *list[0].Spec.Mode.Replicated.Replicas == 0:
			return "stopped"
		}
		return "running"
	}
	var ticks []string
	deadline := time.Now().Add(120 * time.Second)
	for {
		start := time.Now()
		r := mustRun(t, dir, "tick")
		t.Logf("tick: %.1fs", time.Since(start).Seconds())
		ticks = append(ticks, r.stdout)
		if state("agent.idle") == "stopped" && state("agent.old") == "gone" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %d ticks, agent.idle is %s and agent.old %s:\n%s", len(ticks), state("agent.idle"), state("agent.old"), strings.Join(ticks, "\n----\n"))
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Logf("%d ticks until both acted", len(ticks))
	if !strings.Contains(strings.Join(ticks, "\n"), `idle.stop_after = "3s": agent.idle has not been used for`) {
		t.Errorf("no tick said why it stopped agent.idle:\n%s", strings.Join(ticks, "\n----\n"))
	}
	if got := state("agent.idle.gateway"); got != "running" && got != "stopped" {
		t.Errorf("agent.idle's gateway is %s", got)
	}
	wantNoChanges(t, dir, "after the idle stop and the archive on the swarm")
	if status := mustRun(t, dir, "status").stdout; !strings.Contains(status, "stopped (idle)") {
		t.Errorf("status after the idle stop:\n%s", status)
	}
	r := mustRun(t, dir, "exec", "agent.old", "--", "cat", "/tmp/notes.txt")
	if r.stdout != "kept\n" {
		t.Errorf("exec of the archived agent:\n%s", r)
	}
	if got := state("agent.old"); got != "running" {
		t.Errorf("agent.old is %s after exec resumed it", got)
	}
}

// TestE2ESwarm runs the end-to-end tests on the package's one test swarm
// (swarmtest.Start) in one lane beside the docker engine's tests: the
// swarm's nodes are engines of their own. The cases that cut a node off,
// kill its engine or stop the registry run alone, one after another; the
// ones that only use the swarm run together once those are done (go test
// starts a parallel subtest when its parent's function returns). A new
// swarm test is a case here.
func TestE2ESwarm(t *testing.T) {
	t.Parallel() // the long lane (e2e_test.go): not parallel(t)
	for _, tc := range []struct {
		name  string
		test  func(*testing.T)
		fault bool // it breaks the swarm for a while
	}{
		{"Placement", e2eSwarmPlacement, false},
		{"ExamplePlans", e2eSwarmExamplePlans, false},
		{"PartitionedPush", e2eSwarmPartitionedPush, true},
		{"RegistryDownDuringBuild", e2eSwarmRegistryDownDuringBuild, true},
		{"DestroyNodeDown", e2eSwarmDestroyNodeDown, true},
		{"NodeBackBeforePlan", e2eSwarmNodeBackBeforePlan, true},
		{"NodeLoss", e2eSwarmNodeLoss, true},
		{"Migrate", e2eSwarmMigrate, false},
		{"WorkspaceImageUpgrade", e2eSwarmWorkspaceImageUpgrade, false},
		{"WorkspaceMigrateUpgrade", e2eSwarmWorkspaceMigrateUpgrade, false},
		{"TickIdle", e2eSwarmTickIdle, false},
	} {
		if tc.fault {
			t.Run(tc.name, tc.test)
			continue
		}
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel() // after the faults, beside the others like it
			tc.test(t)
		})
	}
}
