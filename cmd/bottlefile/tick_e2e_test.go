package main

import (
	"context"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/docker/dockertest"
	"github.com/bottlefile/bottlefile/planner"
)

const tickEveryConfig = `
agent "coder" {
  image   = %[1]q
  command = ["sh", "-c", "trap 'exit 0' TERM; while true; do date >> /tmp/log; sleep 0.2; done"]
  snapshot_policy {
    every     = "2s"
    keep_last = 2
  }
}
`

// policySnapshotNumbers are the N of the agent.coder.snapshot.N the
// state in dir records.
func policySnapshotNumbers(t *testing.T, dir string) []int {
	t.Helper()
	_, recs := readState(t, dir)
	var out []int
	for _, r := range recs {
		if n, ok := strings.CutPrefix(r.Addr, "agent.coder.snapshot."); ok {
			i, err := strconv.Atoi(n)
			if err != nil {
				t.Fatalf("record %s", r.Addr)
			}
			out = append(out, i)
		}
	}
	return out
}

// TestE2ETickEvery is issue 31's periodic snapshots on the real engine:
// an agent that writes all the time, with every = "2s" and keep_last = 2,
// under watch -interval=500ms for 10 seconds (longer, until it took 3, on
// an engine too loaded to commit that fast): watch takes 3 snapshots and
// no more than one per 2 s of the window (the first is due 2 s after the
// agent was created; each take commits a container), logs each, keeps two
// (in the state and on the engine), and stops cleanly on SIGINT; plan
// then says "No changes.".
func TestE2ETickEvery(t *testing.T) {
	parallel(t)
	cli := dockertest.Client(t)
	img := dockertest.BusyboxImage(t, cli)
	dir := t.TempDir()
	writeBottlefile(t, dir, tickEveryConfig, img)
	mustRun(t, dir, "apply", "-auto-approve")
	lineage := lineageOf(t, cli, dir)

	r := startBottlefile(t, dir, "watch", "-interval=500ms")
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(r.errb.String(), "watching") && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	// The window the issue measures: what watch does in 10 seconds. On a
	// loaded engine (CI runs 4 packages' real-engine tests at once) a
	// commit can take seconds, so a watch that has not taken 3 by then
	// goes on until it has (up to a minute more), and the bound below is
	// the window's own: no more than one snapshot per 2 s of it.
	start := time.Now()
	time.Sleep(10 * time.Second)
	for strings.Count(r.errb.String(), "snapshot taken") < 3 && time.Since(start) < 70*time.Second {
		time.Sleep(200 * time.Millisecond)
	}
	window := time.Since(start)
	if err := r.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if code := r.wait(2 * time.Minute); code != 0 {
		t.Fatalf("watch exited %d after SIGINT:\n%s", code, r)
	}
	logs := r.errb.String()
	if !strings.Contains(logs, "stopped: reason=interrupted") {
		t.Errorf("watch did not log its stop:\n%s", logs)
	}
	taken := strings.Count(logs, "snapshot taken")
	nums := policySnapshotNumbers(t, dir)
	highest := 0
	for _, n := range nums {
		highest = max(highest, n)
	}
	t.Logf("watch took %d snapshots in %v (the highest is agent.coder.snapshot.%d); kept %v", taken, window.Round(100*time.Millisecond), highest, nums)
	// every = "2s" from the agent's creation: at most one per 2 s of the
	// window, plus the one already due when watch started.
	if most := int(window/(2*time.Second)) + 1; taken < 3 || taken > most || highest != taken {
		t.Errorf("watch logged %d snapshots taken in %v and the state's newest is number %d, want 3 to %d of both:\n%s", taken, window, highest, most, logs)
	}
	if len(nums) != 2 {
		t.Errorf("the state keeps snapshots %v, want keep_last = 2", nums)
	}
	imgs, err := cli.ImageList(context.Background(), image.ListOptions{Filters: filters.NewArgs(filters.Arg("label", drivers.LabelLineage+"="+lineage))})
	if err != nil {
		t.Fatal(err)
	}
	snapImages := 0
	for _, im := range imgs {
		if strings.HasPrefix(im.Labels[drivers.LabelAddress], "agent.coder.snapshot.") {
			snapImages++
		}
	}
	if snapImages != 2 {
		t.Errorf("%d snapshot images of the lineage on the engine, want 2 (keep_last)", snapImages)
	}
	wantNoChanges(t, dir, "after watch")
}

const tickIdleConfig = `
agent "idle" {
  image   = %[1]q
  command = ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1; done"]
  idle {
    stop_after = "3s"
  }
}

agent "busy" {
  image   = %[1]q
  command = ["sh", "-c", "trap 'exit 0' TERM; while true; do wget -O /dev/null http://example.invalid/ >/dev/null 2>&1; sleep 0.5; done"]
  egress {
    allow = []
  }
  idle {
    stop_after = "3s"
  }
}

agent "old" {
  image   = %[1]q
  command = ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1; done"]
  idle {
    archive_after = "3s"
  }
}
`

// TestE2ETickIdle is issue 31's idle policies on the real engine, with
// tick run as cron would run it: an agent nobody uses, with stop_after =
// "3s", is stopped by a tick (recorded stopped for idleness: plan then
// says "No changes.", status "stopped (idle)"); an agent that makes
// requests through its gateway all along (refused ones: asking is using)
// is never stopped; an agent with archive_after = "3s" is archived (its
// containers and network removed) and exec resumes it with the file it
// wrote. A tick with nothing due exits 0.
func TestE2ETickIdle(t *testing.T) {
	parallel(t)
	cli := dockertest.Client(t)
	img := dockertest.BusyboxImage(t, cli)
	dir := t.TempDir()
	writeBottlefile(t, dir, tickIdleConfig, img)
	mustRun(t, dir, "apply", "-auto-approve")
	lineage := lineageOf(t, cli, dir)
	mustRun(t, dir, "exec", "agent.old", "--", "sh", "-c", "echo kept > /tmp/notes.txt")

	state := func(addr string) string {
		cs := containersWith(t, cli, drivers.LabelLineage+"="+lineage, drivers.LabelAddress+"="+addr)
		if len(cs) != 1 {
			return strconv.Itoa(len(cs)) + " containers"
		}
		return cs[0].State
	}
	var ticks []string
	deadline := time.Now().Add(90 * time.Second)
	for {
		r := mustRun(t, dir, "tick")
		ticks = append(ticks, r.stdout)
		if state("agent.busy") != "running" {
			t.Fatalf("the busy agent is %s after tick:\n%s", state("agent.busy"), strings.Join(ticks, "\n----\n"))
		}
		if state("agent.idle") != "running" && state("agent.old") == "0 containers" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %d ticks, agent.idle is %s and agent.old %s:\n%s", len(ticks), state("agent.idle"), state("agent.old"), strings.Join(ticks, "\n----\n"))
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Logf("%d ticks until both acted", len(ticks))
	if got := state("agent.idle"); got != "exited" {
		t.Errorf("the idle agent is %s", got)
	}
	all := strings.Join(ticks, "\n")
	if !regexp.MustCompile(`idle\.stop_after = "3s": agent\.idle has not been used for \d+s`).MatchString(all) {
		t.Errorf("no tick said why it stopped agent.idle:\n%s", all)
	}
	_, recs := readState(t, dir)
	for _, r := range recs {
		if r.Addr == "agent.idle" && r.Computed[planner.StoppedKey] != planner.IdleStopReason {
			t.Errorf("agent.idle's record: %v", r.Computed)
		}
	}

	// The busy agent keeps running through more ticks, well past 3 s.
	for range 3 {
		mustRun(t, dir, "tick")
		if got := state("agent.busy"); got != "running" {
			t.Fatalf("the busy agent is %s", got)
		}
	}
	wantNoChanges(t, dir, "after the idle stop and the archive")
	status := mustRun(t, dir, "status").stdout
	if !strings.Contains(status, "stopped (idle)") {
		t.Errorf("status after the idle stop:\n%s", status)
	}
	if ns := networksWith(t, cli, drivers.LabelLineage+"="+lineage, drivers.LabelAddress+"=agent.old.network"); len(ns) != 0 {
		t.Errorf("the archived agent's network is left")
	}
	r := mustRun(t, dir, "exec", "agent.old", "--", "cat", "/tmp/notes.txt")
	if r.stdout != "kept\n" {
		t.Errorf("exec of the archived agent:\n%s", r)
	}
	if got := state("agent.old"); got != "running" {
		t.Errorf("agent.old is %s after exec resumed it", got)
	}
}

const tickArchiveConfig = `
agent "coder" {
  image   = %[1]q
  command = ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1; done"]

  sidecar "db" {
    image   = %[1]q
    command = ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1; done"]
  }

  idle {
    archive_after = "3s"
  }
}
`

// TestE2EWatchArchiveCrash: watch is killed with SIGKILL in the middle of
// the archive an idle policy (archive_after = "3s") makes, after each of
// its engine calls in turn (the snapshot committed and not yet recorded;
// one container removed; both; the network too). The next tick converges:
// it finishes the archive (or removes the unrecorded snapshot and archives
// again), plan says "No changes.", and exec resumes the agent with every
// line it wrote.
func TestE2EWatchArchiveCrash(t *testing.T) {
	parallel(t)
	cli := dockertest.Client(t)
	img := dockertest.BusyboxImage(t, cli)
	c := &crashRig{t: t, cli: cli, dir: t.TempDir(), image: img}
	writeBottlefile(t, c.dir, tickArchiveConfig, img)
	mustRun(t, c.dir, "apply", "-auto-approve")
	lineage := lineageOf(t, cli, c.dir)
	c.readState()

	want := ""
	for n := 1; n <= 4; n++ {
		what := "watch killed after " + strconv.Itoa(n) + " engine calls of the archive"
		// Written just before: the archive is due 3 s later.
		mustRun(t, c.dir, "exec", "agent.coder", "--", "sh", "-c", "echo "+strconv.Itoa(n)+" >> /tmp/notes.txt")
		want += strconv.Itoa(n) + "\n"
		c.crashAfter(n, "watch", "-interval=500ms")
		c.settle()
		r := mustRun(t, c.dir, "tick")
		if archivedIn(t, c.dir) == "" {
			t.Fatalf("%s: the next tick did not archive the agent:\n%s", what, r)
		}
		archiveGone(t, cli, lineage, what)
		_, recs := readState(t, c.dir)
		recorded := map[string]bool{}
		for _, r := range recs {
			recorded[r.Addr] = true
		}
		for _, o := range c.live() {
			if !strings.Contains(o.addr, ".snapshot.") || !recorded[o.addr] {
				t.Errorf("%s: %s is left (unrecorded, or not a snapshot)", what, o)
			}
		}
		wantNoChanges(t, c.dir, what)
		if r := mustRun(t, c.dir, "exec", "agent.coder", "--", "cat", "/tmp/notes.txt"); r.stdout != want {
			t.Errorf("%s: after the resume the agent has %q, want %q\n%s", what, r.stdout, want, r)
		}
	}
}
