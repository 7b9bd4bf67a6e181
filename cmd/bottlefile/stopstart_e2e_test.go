package main

import (
	"context"
	"strings"
	"testing"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/docker/dockertest"
)

// stopStartConfig is an agent with a sidecar; %[1]s is the image.
const stopStartConfig = `
agent "coder" {
  image   = %[1]q
  command = ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1; done"]

  sidecar "db" {
    image   = %[1]q
    command = ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1; done"]
  }
}
`

// TestE2EStopStart is issue 30's day-to-day commands on the real engine:
// stop agent.coder stops its container and its sidecar's, and the next
// plan says "No changes." (a stop on purpose is not drift); start brings
// the agent back with a file it wrote before the stop; restart stops and
// starts it again, keeping the same containers.
func TestE2EStopStart(t *testing.T) {
	parallel(t)
	cli := dockertest.Client(t)
	image := dockertest.BusyboxImage(t, cli)
	dir := t.TempDir()
	writeBottlefile(t, dir, stopStartConfig, image)
	mustRun(t, dir, "apply", "-auto-approve")
	lineage := lineageOf(t, cli, dir)
	mustRun(t, dir, "exec", "agent.coder", "--", "sh", "-c", "echo kept > /tmp/notes.txt")

	// running says, for each workload of the bottle, whether it runs, by
	// the engine's own word; ids are its containers' ids.
	running := func() (map[string]bool, map[string]string) {
		t.Helper()
		run, ids := map[string]bool{}, map[string]string{}
		for _, addr := range []string{"agent.coder", "agent.coder.sidecar.db"} {
			cs := containersWith(t, cli, drivers.LabelAddress+"="+addr, drivers.LabelLineage+"="+lineage)
			if len(cs) != 1 {
				t.Fatalf("want one container of %s, got %d", addr, len(cs))
			}
			info, err := cli.ContainerInspect(context.Background(), cs[0].ID)
			if err != nil {
				t.Fatal(err)
			}
			run[addr], ids[addr] = info.State.Running, cs[0].ID
		}
		return run, ids
	}
	_, before := running()

	r := mustRun(t, dir, "stop", "agent.coder")
	for _, want := range []string{"agent.coder: Stopping...", "agent.coder.sidecar.db: Stop complete", "Apply complete!", "stopped."} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stop's output lacks %q:\n%s", want, r)
		}
	}
	if run, _ := running(); run["agent.coder"] || run["agent.coder.sidecar.db"] {
		t.Fatalf("after stop, running: %v", run)
	}
	wantNoChanges(t, dir, "after stop")
	if r := mustRun(t, dir, "stop", "agent.coder"); !strings.Contains(r.stdout, "No changes. agent.coder stopped already.") {
		t.Errorf("a second stop:\n%s", r)
	}
	// apply leaves it stopped too.
	mustRun(t, dir, "apply", "-auto-approve")
	if run, _ := running(); run["agent.coder"] {
		t.Fatal("apply started the agent stopped on purpose")
	}

	r = mustRun(t, dir, "start", "agent.coder")
	if !strings.Contains(r.stdout, "agent.coder: Start complete") {
		t.Errorf("start's output:\n%s", r)
	}
	run, after := running()
	if !run["agent.coder"] || !run["agent.coder.sidecar.db"] {
		t.Fatalf("after start, running: %v", run)
	}
	if after["agent.coder"] != before["agent.coder"] {
		t.Errorf("start made a new container (%s, was %s)", after["agent.coder"], before["agent.coder"])
	}
	if r := mustRun(t, dir, "exec", "agent.coder", "--", "cat", "/tmp/notes.txt"); r.stdout != "kept\n" {
		t.Errorf("after start the agent's file holds %q, want \"kept\\n\"", r.stdout)
	}
	wantNoChanges(t, dir, "after start")

	r = mustRun(t, dir, "restart", "agent.coder")
	if !strings.Contains(r.stdout, "Stop complete") || !strings.Contains(r.stdout, "Start complete") {
		t.Errorf("restart's output:\n%s", r)
	}
	if run, ids := running(); !run["agent.coder"] || !run["agent.coder.sidecar.db"] || ids["agent.coder"] != before["agent.coder"] {
		t.Errorf("after restart, running %v, ids %v (were %v)", run, ids, before)
	}
	wantNoChanges(t, dir, "after restart")

	if r := bottlefile(t, dir, "stop", "agent.nope"); r.code != 1 || !strings.Contains(r.stderr, "agent.nope names no agent") {
		t.Errorf("stop of an unknown agent:\n%s", r)
	}
	if r := mustRun(t, dir, "ps"); !strings.Contains(r.stdout, "agent.coder") {
		t.Errorf("ps, an alias of status:\n%s", r)
	}
}
