package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/docker/docker/client"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/docker/dockertest"
)

// keepBottlefile: coder stays; %[2]s is more agents (keepRemoved: tester
// keeps its snapshots across destroy, scratch's policy covers only
// replace).
const keepBottlefile = `
agent "coder" {
  image   = %[1]q
  command = ["sleep", "600"]
}
%[2]s`

const keepRemoved = `
agent "tester" {
  image   = %[1]q
  command = ["sleep", "600"]
  workdir = "/workspace"

  snapshot_policy {
    before    = ["replace", "destroy"]
    keep_last = 3
  }
}

agent "scratch" {
  image   = %[1]q
  command = ["sleep", "600"]
  workdir = "/workspace"

  snapshot_policy {
    before = ["replace"]
  }
}
`

// keepContainer is the one container of the lineage at addr.
func keepContainer(t *testing.T, cli *client.Client, lineage, addr string) string {
	t.Helper()
	list := containersWith(t, cli, drivers.LabelAddress+"="+addr, drivers.LabelLineage+"="+lineage)
	if len(list) != 1 {
		t.Fatalf("want one container at %s, got %d", addr, len(list))
	}
	return list[0].ID
}

// TestE2ERemovedAgentKeepsSnapshots: removing the blocks of an agent whose
// policy has "destroy" and of one whose policy has not: the plan takes
// the first's snapshot, lists its kept ones and counts 1 snapshot deleted
// (the second's, whose discard it states); after apply the kept snapshots
// are recorded and their images are on the engine, and the next plan has
// nothing to do. On main before this change the removal destroyed all
// three snapshots with no reason, discard or kept line.
func TestE2ERemovedAgentKeepsSnapshots(t *testing.T) {
	parallel(t)
	cli := dockertest.Client(t)
	img := dockertest.BusyboxImage(t, cli)
	dir := t.TempDir()
	writeBottlefile(t, dir, keepBottlefile, img, fmt.Sprintf(keepRemoved, img))
	mustRun(t, dir, "apply", "-auto-approve")
	lineage := snapLineage(t, cli, dir)
	for i := range 2 {
		dockertest.Sh(t, cli, keepContainer(t, cli, lineage, "agent.tester"), fmt.Sprintf("echo %d > /workspace/tester-%d", i, i))
		mustRun(t, dir, "snapshot", "take", "agent.tester")
	}
	dockertest.Sh(t, cli, keepContainer(t, cli, lineage, "agent.scratch"), "echo scratch > /workspace/notes")
	mustRun(t, dir, "snapshot", "take", "agent.scratch")
	dockertest.Sh(t, cli, keepContainer(t, cli, lineage, "agent.scratch"), "head -c 100000 /dev/zero > /workspace/more")

	writeBottlefile(t, dir, keepBottlefile, img, "")
	r := mustRun(t, dir, "plan")
	snapWant(t, "removal plan", r.stdout,
		"@ agent.tester.snapshot.3 (snapshot)",
		"agent.tester.snapshot.3 is taken first",
		"# kept: agent.tester.snapshot.1, ",
		"# kept: agent.tester.snapshot.2, ",
		"# kept: agent.tester.snapshot.3, taken by this plan",
		"# agent.scratch will be destroyed",
		"discards", // what scratch wrote since its snapshot
		"its block was removed, and the snapshot_policy it was applied with does not include \"destroy\"",
		"# agent.scratch.snapshot.1 will be destroyed",
		"1 to snapshot, 1 snapshot deleted.")
	if strings.Contains(r.stdout, "agent.tester.snapshot.1 will be destroyed") || strings.Contains(r.stdout, "agent.coder ") {
		t.Errorf("the removal touches what it keeps:\n%s", r.stdout)
	}
	mustRun(t, dir, "apply", "-auto-approve")

	list := mustRun(t, dir, "snapshot", "list").stdout
	for n := 1; n <= 3; n++ {
		addr := "agent.tester.snapshot." + strconv.Itoa(n)
		rec, ok := snapRecord(t, dir, addr)
		if !ok || !strings.Contains(list, addr) || !snapImageExists(t, cli, rec.Computed["image"]) {
			t.Errorf("%s is gone after the removal (recorded %v):\n%s", addr, ok, list)
		}
	}
	if _, ok := snapRecord(t, dir, "agent.scratch.snapshot.1"); ok {
		t.Errorf("agent.scratch.snapshot.1 is still recorded")
	}
	if got := bottlefile(t, dir, "plan").stdout; !strings.Contains(got, "No changes.") {
		t.Errorf("plan after the removal:\n%s", got)
	}
	// The kept snapshot holds what the tester wrote.
	rec, _ := snapRecord(t, dir, "agent.tester.snapshot.3")
	if got := dockertest.RunImage(t, cli, rec.Computed["image"], "cat", "/workspace/tester-1"); got != "1\n" {
		t.Errorf("the kept snapshot's /workspace/tester-1 = %q", got)
	}
	mustRun(t, dir, "destroy", "-auto-approve", "-include-snapshots")
}

// TestE2ESnapshotRmRefusesForkSource: snapshot rm of the snapshot a running
// fork booted from is refused, naming the fork; -force removes it and says
// it is data loss. On main before this change it was removed silently.
func TestE2ESnapshotRmRefusesForkSource(t *testing.T) {
	parallel(t)
	cli := dockertest.Client(t)
	img := dockertest.BusyboxImage(t, cli)
	dir := t.TempDir()
	const fork = `
agent "fork" {
  from_snapshot = agent.coder.snapshot.1
  command       = ["sleep", "600"]
}
`
	writeBottlefile(t, dir, policyBottlefile+"%s", "", "", img, 600, `["replace"]`, 5, "")
	mustRun(t, dir, "apply", "-auto-approve")
	lineage := snapLineage(t, cli, dir)
	dockertest.Sh(t, cli, snapAgentContainer(t, cli, lineage).ID, "echo work > /workspace/f")
	mustRun(t, dir, "snapshot", "take", "agent.coder")
	writeBottlefile(t, dir, policyBottlefile+"%s", "", "", img, 600, `["replace"]`, 5, fork)
	mustRun(t, dir, "apply", "-auto-approve")

	r := bottlefile(t, dir, "snapshot", "rm", "-auto-approve", "agent.coder.snapshot.1")
	if r.code != 1 {
		t.Fatalf("snapshot rm of the fork's snapshot: %s", r)
	}
	snapWant(t, "refused rm", strings.Join(strings.Fields(r.stderr), " "), "Snapshot in use", "agent.fork runs from it", "agent.fork boots from it (from_snapshot)", "-force")
	rec, ok := snapRecord(t, dir, "agent.coder.snapshot.1")
	if !ok || !snapImageExists(t, cli, rec.Computed["image"]) {
		t.Fatalf("a refused rm removed the snapshot")
	}

	r = mustRun(t, dir, "snapshot", "rm", "-auto-approve", "-force", "agent.coder.snapshot.1")
	snapWant(t, "forced rm", r.stdout, "-force: this is data loss: agent.fork runs from it", "1 snapshot deleted")
	if _, ok := snapRecord(t, dir, "agent.coder.snapshot.1"); ok {
		t.Errorf("-force did not remove the record")
	}
	if snapImageExists(t, cli, rec.Computed["image"]) {
		t.Errorf("-force left the snapshot's tag %s", rec.Computed["image"])
	}
}

// TestE2EMaxTotalSizeCountsWhatSnapshotsAdd: max_total_size = "5MiB" over
// a 50 MiB image whose agent writes about 1 MiB between snapshots keeps
// about five snapshots, each sized at what it adds. On main before this
// change every snapshot counted its whole 50 MiB image, so each take
// pruned every older snapshot and one was left.
func TestE2EMaxTotalSizeCountsWhatSnapshotsAdd(t *testing.T) {
	parallel(t)
	cli := dockertest.Client(t)
	base := dockertest.BusyboxImage(t, cli)
	dir := t.TempDir()
	ctxDir := filepath.Join(dir, "img")
	if err := os.MkdirAll(ctxDir, 0o755); err != nil {
		t.Fatal(err)
	}
	// 50 MiB of the image the agent runs, built locally.
	dockerfile := fmt.Sprintf("FROM %s\nRUN head -c 52428800 /dev/zero > /big && mkdir -p /workspace\n", base)
	if err := os.WriteFile(filepath.Join(ctxDir, "Dockerfile"), []byte(dockerfile), 0o644); err != nil {
		t.Fatal(err)
	}
	writeBottlefile(t, dir, `
agent "coder" {
  build { context = "./img" }
  command = ["sleep", "600"]
  workdir = "/workspace"

  snapshot_policy {
    before         = ["replace"]
    max_total_size = "5MiB"
  }
}
`)
	mustRun(t, dir, "apply", "-auto-approve")
	lineage := snapLineage(t, cli, dir)
	const takes = 8
	for range takes {
		// About 1 MiB (1,000,000 bytes) written, over the same file.
		dockertest.Sh(t, cli, snapAgentContainer(t, cli, lineage).ID, "head -c 1000000 /dev/urandom > /workspace/blob")
		mustRun(t, dir, "snapshot", "take", "agent.coder")
	}
	var kept []string
	for n := 1; n <= takes; n++ {
		addr := "agent.coder.snapshot." + strconv.Itoa(n)
		rec, ok := snapRecord(t, dir, addr)
		if !ok {
			continue
		}
		kept = append(kept, addr)
		size, _ := strconv.ParseInt(rec.Computed["size"], 10, 64)
		if size < 1000000 || size > 1100000 {
			t.Errorf("%s recorded size %d, want what it adds: about 1,000,000 bytes", addr, size)
		}
	}
	// Five of about 1 MB fit in 5 MiB (the one a take makes counts what
	// the agent wrote, before it is measured). Where the engine cannot
	// measure writes cheaply, it counts once measured: a sixth may stand
	// until the next take.
	most := 5
	if measured, _ := engineMeasuresWrites(t, cli); !measured {
		most = 6
	}
	if len(kept) < 4 || len(kept) > most || kept[len(kept)-1] != fmt.Sprintf("agent.coder.snapshot.%d", takes) {
		t.Errorf("max_total_size = 5MiB keeps %v; want about five, the newest among them", kept)
	}
	t.Logf("max_total_size = 5MiB over a 50 MiB image keeps %d snapshots: %v", len(kept), kept)
	if list := mustRun(t, dir, "snapshot", "list").stdout; strings.Contains(list, "50.") {
		t.Errorf("snapshot list shows whole-image sizes:\n%s", list)
	}
}

// TestE2ESidecarReplaceSaysWhatItDiscards: a sidecar's replacement says
// what it discards, as an agent's does: no snapshot holds a sidecar. On
// main before this change it said nothing.
func TestE2ESidecarReplaceSaysWhatItDiscards(t *testing.T) {
	parallel(t)
	cli := dockertest.Client(t)
	img := dockertest.BusyboxImage(t, cli)
	dir := t.TempDir()
	const withSidecar = `
agent "coder" {
  image   = %[1]q
  command = ["sleep", "600"]

  sidecar "cache" {
    image   = %[1]q
    command = ["sleep", "%[2]d"]
  }
}
`
	writeBottlefile(t, dir, withSidecar, img, 600)
	mustRun(t, dir, "apply", "-auto-approve")
	lineage := snapLineage(t, cli, dir)
	dockertest.Sh(t, cli, keepContainer(t, cli, lineage, "agent.coder.sidecar.cache"), "head -c 200000 /dev/zero > /cache.db")
	writeBottlefile(t, dir, withSidecar, img, 700)
	r := mustRun(t, dir, "plan")
	snapWant(t, "plan", r.stdout, "# agent.coder.sidecar.cache must be replaced", "this replace discards", "a sidecar is in no snapshot (snapshot_policy commits only the agent)")
	if measured, _ := engineMeasuresWrites(t, cli); measured {
		snapWant(t, "plan", r.stdout, "KiB written inside it")
	}
}
