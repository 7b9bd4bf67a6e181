package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/docker/docker/client"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/docker/dockertest"
)

// movesAgent is one bottle: an agent with a sidecar, an allowlist and a
// snapshot policy, at the name given first, on the runtime given second
// ("" for none).
const movesAgent = `
agent %[1]q {
  image   = %[3]q
  command = ["sleep", "3600"]
  workdir = "/workspace"
  %[2]s
  egress {
    allow = ["example.com:443"]
  }
  sidecar "db" {
    image   = %[3]q
    command = ["sleep", "3600"]
  }
  snapshot_policy {
    before = ["replace", "destroy", "migrate"]
  }
}
`

const movedBlock = `
moved {
  from = agent.%s
  to   = agent.%s
}
`

// movesAgentConfig is movesAgent for one agent.
func movesAgentConfig(name, runtime, img string) string {
	return fmt.Sprintf(movesAgent, name, runtime, img)
}

// movesWrite writes a Bottlefile of these parts.
func movesWrite(t *testing.T, dir string, parts ...string) {
	t.Helper()
	writeBottlefile(t, dir, "%s", strings.Join(parts, "\n"))
}

// movesRecorded is what state show says of one field of the record at addr.
func movesRecorded(t *testing.T, dir, addr, field string) string {
	t.Helper()
	for _, line := range strings.Split(mustRun(t, dir, "state", "show", addr).stdout, "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == field && f[1] == "=" {
			return f[2]
		}
	}
	return ""
}

// movesContainer is the one container of the lineage labelled addr.
func movesContainer(t *testing.T, cli *client.Client, lineage, addr string) string {
	t.Helper()
	list := containersWith(t, cli, drivers.LabelAddress+"="+addr, drivers.LabelLineage+"="+lineage)
	if len(list) != 1 {
		t.Fatalf("want one container labelled %s, got %d: %+v", addr, len(list), list)
	}
	return list[0].ID
}

// movesWant fails the test unless out holds every one of want.
func movesWant(t *testing.T, what, out string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("%s lacks %q:\n%s", what, w, out)
		}
	}
}

// TestE2EMovedBlock renames an agent with a moved block on the real
// engine: the plan shows the move and destroys nothing; the apply keeps
// the agent's container (same id, its file in /workspace there), its
// sidecar, gateway and network, and its policy snapshot, now under the new
// address; the next plan has nothing to do, with the moved block still in
// the file and after it is removed. A new agent given the old name then
// gets engine names of its own, beside the moved bottle's.
func TestE2EMovedBlock(t *testing.T) {
	parallel(t)
	cli := dockertest.Client(t)
	img := dockertest.BusyboxImage(t, cli)
	dir := t.TempDir()
	movesWrite(t, dir, movesAgentConfig("old", "", img))
	mustRun(t, dir, "apply", "-auto-approve")
	lineage := lineageOf(t, cli, dir)
	t.Cleanup(func() { snapRemoveImages(t, cli, lineage) })
	agentID := movesContainer(t, cli, lineage, "agent.old")
	sidecarID := movesContainer(t, cli, lineage, "agent.old.sidecar.db")
	mustRun(t, dir, "exec", "agent.old", "--", "sh", "-c", "echo kept > /workspace/f")
	mustRun(t, dir, "snapshot", "take", "agent.old")

	movesWrite(t, dir, fmt.Sprintf(movedBlock, "old", "new"), movesAgentConfig("new", "", img))
	r := mustRun(t, dir, "plan")
	movesWant(t, "plan of the move", r.stdout, "# agent.old has moved to agent.new", "Plan: 0 to add, 0 to change, 0 to destroy, 1 to move.")
	if strings.Contains(r.stdout, "destroyed") || strings.Contains(r.stdout, "will be created") {
		t.Errorf("the move plans more than the move:\n%s", r)
	}
	r = mustRun(t, dir, "apply", "-auto-approve")
	movesWant(t, "apply of the move", r.stdout, "Apply complete! Objects: 0 added, 0 changed, 0 destroyed, 1 moved.")

	if got := movesContainer(t, cli, lineage, "agent.old"); got != agentID {
		t.Errorf("the agent's container is %s after the move, was %s", got, agentID)
	}
	if got := movesContainer(t, cli, lineage, "agent.old.sidecar.db"); got != sidecarID {
		t.Errorf("the sidecar's container is %s after the move, was %s", got, sidecarID)
	}
	if r := mustRun(t, dir, "exec", "agent.new", "--", "cat", "/workspace/f"); r.stdout != "kept\n" {
		t.Errorf("/workspace/f of agent.new = %q", r.stdout)
	}
	list := mustRun(t, dir, "state", "list").stdout
	movesWant(t, "state list after the move", list, "agent.new\n", "agent.new.sidecar.db\n", "agent.new.gateway\n", "agent.new.network\n", "agent.new.snapshot.1\n")
	if strings.Contains(list, "agent.old") {
		t.Errorf("the state still records agent.old:\n%s", list)
	}
	movesWant(t, "snapshot list", mustRun(t, dir, "snapshot", "list").stdout, "agent.new.snapshot.1")
	wantNoChanges(t, dir, "plan with the moved block still there")
	movesWrite(t, dir, movesAgentConfig("new", "", img))
	wantNoChanges(t, dir, "plan after removing the moved block")

	// The old name again: a bottle of its own, named apart.
	movesWrite(t, dir, movesAgentConfig("new", "", img), movesAgentConfig("old", "", img))
	r = mustRun(t, dir, "plan")
	movesWant(t, "plan of a new agent.old", r.stdout, "# agent.old will be created")
	if strings.Contains(r.stdout, "agent.new") {
		t.Errorf("a new agent.old touches agent.new:\n%s", r)
	}
	mustRun(t, dir, "apply", "-auto-approve")
	if r := mustRun(t, dir, "exec", "agent.new", "--", "cat", "/workspace/f"); r.stdout != "kept\n" {
		t.Errorf("/workspace/f of agent.new after a new agent.old = %q", r.stdout)
	}
	ids := map[string]bool{}
	for _, c := range containersWith(t, cli, drivers.LabelAddress+"=agent.old", drivers.LabelLineage+"="+lineage) {
		ids[c.ID] = true
	}
	if len(ids) != 2 || !ids[agentID] {
		t.Errorf("want the moved agent's container %s and a new one labelled agent.old, got %v", agentID, ids)
	}
	wantNoChanges(t, dir, "plan after the new agent.old")
	mustRun(t, dir, "destroy", "-auto-approve", "-include-snapshots")
	if left := containersWith(t, cli, drivers.LabelLineage+"="+lineage); len(left) != 0 {
		t.Errorf("containers left after destroy: %+v", left)
	}
}

// TestE2EStateMv moves an agent's records by hand: state mv, then a plan
// for the renamed block that has nothing to do, the same container id.
func TestE2EStateMv(t *testing.T) {
	parallel(t)
	cli := dockertest.Client(t)
	img := dockertest.BusyboxImage(t, cli)
	dir := t.TempDir()
	movesWrite(t, dir, movesAgentConfig("before", "", img))
	mustRun(t, dir, "apply", "-auto-approve")
	lineage := lineageOf(t, cli, dir)
	t.Cleanup(func() { snapRemoveImages(t, cli, lineage) })
	id := movesContainer(t, cli, lineage, "agent.before")

	r := mustRun(t, dir, "state", "mv", "agent.before", "agent.after")
	movesWant(t, "state mv", r.stdout, "Moved agent.before to agent.after")
	movesWrite(t, dir, movesAgentConfig("after", "", img))
	wantNoChanges(t, dir, "plan after state mv")
	if got := movesContainer(t, cli, lineage, "agent.before"); got != id {
		t.Errorf("the container is %s after state mv, was %s", got, id)
	}
	if r := bottlefile(t, dir, "state", "mv", "agent.after", "agent.after"); r.code == 0 || !strings.Contains(r.stderr, "itself") {
		t.Errorf("state mv to the same address: %s", r)
	}
	mustRun(t, dir, "destroy", "-auto-approve", "-include-snapshots")
}

// TestE2ENameTheDefaultRuntime gives the engine the agent already runs on
// a name: an explicit runtime "local" in place of the implicit default.
// The plan moves the records, the runtime's egress network's included: no
// snapshot, no re-create, nothing destroyed; the container and its
// gateway are the same, with its file; the next plan has nothing to do.
func TestE2ENameTheDefaultRuntime(t *testing.T) {
	parallel(t)
	cli := dockertest.Client(t)
	img := dockertest.BusyboxImage(t, cli)
	dir := t.TempDir()
	movesWrite(t, dir, movesAgentConfig("x", "", img))
	mustRun(t, dir, "apply", "-auto-approve")
	lineage := lineageOf(t, cli, dir)
	t.Cleanup(func() { snapRemoveImages(t, cli, lineage) })
	id := movesContainer(t, cli, lineage, "agent.x")
	mustRun(t, dir, "exec", "agent.x", "--", "sh", "-c", "echo here > /workspace/f")

	movesWrite(t, dir, "runtime \"local\" {\n  driver = \"docker\"\n}\n", movesAgentConfig("x", "runtime = runtime.local", img))
	r := mustRun(t, dir, "plan")
	movesWant(t, "plan naming the runtime", r.stdout, `# agent.x has moved from runtime "default" to runtime "local" (the same engine)`, "0 to destroy")
	for _, bad := range []string{"interrupted migration", "will be taken", "=> agent.x", "agent.x must be replaced"} {
		if strings.Contains(r.stdout, bad) {
			t.Errorf("plan naming the runtime says %q:\n%s", bad, r)
		}
	}
	if strings.Contains(r.stdout, "will be destroyed") || strings.Contains(r.stdout, "will be created") {
		t.Errorf("naming the runtime creates or destroys something:\n%s", r)
	}
	gateway := movesContainer(t, cli, lineage, "agent.x.gateway")
	mustRun(t, dir, "apply", "-auto-approve")
	if got := movesContainer(t, cli, lineage, "agent.x"); got != id {
		t.Errorf("the container is %s after naming the runtime, was %s", got, id)
	}
	if got := movesContainer(t, cli, lineage, "agent.x.gateway"); got != gateway {
		t.Errorf("the gateway is %s after naming the runtime, was %s", got, gateway)
	}
	if r := mustRun(t, dir, "exec", "agent.x", "--", "cat", "/workspace/f"); r.stdout != "here\n" {
		t.Errorf("/workspace/f = %q", r.stdout)
	}
	if got := movesRecorded(t, dir, "agent.x", "runtime"); got != "local" {
		t.Errorf("state show agent.x: runtime = %q, want local", got)
	}
	wantNoChanges(t, dir, "plan after naming the runtime")
	mustRun(t, dir, "destroy", "-auto-approve", "-include-snapshots")
}

const twoRuntimes = `
runtime "one" {
  driver = "docker"
}

runtime "two" {
  driver = "docker"
}
`

// TestE2ETwoRuntimesOneEngine declares two runtime blocks for the one
// engine, an agent on each: after the apply the next plan has nothing to
// do (neither calls the other's objects strays). Moving one agent to the
// other runtime, as a saved plan, moves its records: the same container,
// and again nothing to do after.
func TestE2ETwoRuntimesOneEngine(t *testing.T) {
	parallel(t)
	cli := dockertest.Client(t)
	img := dockertest.BusyboxImage(t, cli)
	dir := t.TempDir()
	config := func(a1 string) {
		movesWrite(t, dir, twoRuntimes, movesAgentConfig("a1", "runtime = runtime."+a1, img), movesAgentConfig("a2", "runtime = runtime.two", img))
	}
	config("one")
	mustRun(t, dir, "apply", "-auto-approve")
	lineage := lineageOf(t, cli, dir)
	t.Cleanup(func() { snapRemoveImages(t, cli, lineage) })
	for _, c := range containersWith(t, cli, drivers.LabelLineage+"="+lineage) {
		if c.Labels[drivers.LabelRuntime] == "" {
			t.Errorf("container %s carries no runtime label: %v", c.Names, c.Labels)
		}
	}
	if r := mustRun(t, dir, "plan"); !strings.Contains(r.stdout, "No changes.") {
		t.Fatalf("plan after applying two runtimes on one engine:\n%s", r)
	}
	id := movesContainer(t, cli, lineage, "agent.a1")
	mustRun(t, dir, "exec", "agent.a1", "--", "sh", "-c", "echo one > /workspace/f")

	config("two")
	planFile := filepath.Join(dir, "move.plan")
	r := mustRun(t, dir, "plan", "-out="+planFile)
	movesWant(t, "plan of the move", r.stdout, `# agent.a1 has moved from runtime "one" to runtime "two" (the same engine)`)
	if strings.Contains(r.stdout, "=> agent.a1") || strings.Contains(r.stdout, "agent.a1 must be replaced") {
		t.Errorf("the move between runtimes on one engine migrates or replaces the agent:\n%s", r)
	}
	mustRun(t, dir, "apply", planFile)
	if got := movesContainer(t, cli, lineage, "agent.a1"); got != id {
		t.Errorf("the container is %s after the move, was %s", got, id)
	}
	if r := mustRun(t, dir, "exec", "agent.a1", "--", "cat", "/workspace/f"); r.stdout != "one\n" {
		t.Errorf("/workspace/f = %q", r.stdout)
	}
	wantNoChanges(t, dir, "plan after the move")
	mustRun(t, dir, "destroy", "-auto-approve", "-include-snapshots")
	if left := containersWith(t, cli, drivers.LabelLineage+"="+lineage); len(left) != 0 {
		t.Errorf("containers left after destroy: %+v", left)
	}
}

// TestE2ESavedMigrationBetweenEngines moves an agent to a second dockerd
// with a saved plan: plan -out, then apply PLANFILE. The saved plan is not
// refused as stale, and the agent's file arrives on the second engine.
func TestE2ESavedMigrationBetweenEngines(t *testing.T) {
	parallel(t)
	cli := dockertest.Client(t)
	img := dockertest.BusyboxImage(t, cli)
	host, cli2 := snapSecondEngine(t, cli)
	snapCopyImage(t, cli, cli2, img)

	dir := t.TempDir()
	writeBottlefile(t, dir, migrateBottlefile, host, secondEngineOptOut, "a", img)
	mustRun(t, dir, "apply", "-auto-approve")
	lineage := snapLineage(t, cli, dir)
	t.Cleanup(func() { snapRemoveImages(t, cli2, lineage); dockertest.Cleanup(t, cli2, lineage) })
	old := snapAgentContainer(t, cli, lineage)
	dockertest.Sh(t, cli, old.ID, "echo saved > /workspace/f")

	writeBottlefile(t, dir, migrateBottlefile, host, secondEngineOptOut, "b", img)
	planFile := filepath.Join(t.TempDir(), "mig.plan")
	r := mustRun(t, dir, "plan", "-out="+planFile)
	movesWant(t, "saved migration plan", r.stdout, "=> agent.coder (container)", `its runtime changes from "a" to "b"`)
	r = bottlefile(t, dir, "apply", planFile)
	if r.code != 0 {
		t.Fatalf("apply of the saved migration plan: %s", r)
	}
	moved := snapAgentContainer(t, cli2, lineage)
	if got := dockertest.Sh(t, cli2, moved.ID, "cat /workspace/f"); got != "saved\n" {
		t.Errorf("on the second engine /workspace/f = %q", got)
	}
	if left := containersWith(t, cli, drivers.LabelAddress+"=agent.coder", drivers.LabelLineage+"="+lineage); len(left) != 0 {
		t.Errorf("the old container is still on the first engine: %+v", left)
	}
	wantNoChanges(t, dir, "not converged after the saved migration")
	mustRun(t, dir, "destroy", "-auto-approve", "-include-snapshots")
}
