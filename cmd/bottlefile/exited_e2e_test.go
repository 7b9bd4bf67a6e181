package main

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/docker/dockertest"
	"github.com/bottlefile/bottlefile/operations"
)

// TestE2EApplyWorkloadExited is issue 13's "apply knows a workload died"
// on the real engine: an agent whose command does not exist makes apply
// exit 1, naming code 127 and the exec error; the next plan says it
// exited with code 127 and what it printed last, not that someone
// stopped it.
func TestE2EApplyWorkloadExited(t *testing.T) {
	parallel(t)
	cli := dockertest.Client(t)
	image := dockertest.BusyboxImage(t, cli)
	dir := t.TempDir()
	writeBottlefile(t, dir, agentConfig, image, `["no-such-binary"]`)

	r := bottlefile(t, dir, "apply", "-auto-approve", "-wait=3s")
	lineageOf(t, cli, dir)
	if r.code != 1 {
		t.Fatalf("apply of an agent whose command does not exist: want exit 1, got %s", r)
	}
	for _, want := range []string{"agent.coder exited with code 127", "exec no-such-binary failed"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("apply's error lacks %q:\n%s", want, r)
		}
	}
	if !strings.Contains(r.stdout, "failed:      create agent.coder") {
		t.Errorf("apply's summary does not name the failed action:\n%s", r)
	}

	r = mustRun(t, dir, "plan")
	if !regexp.MustCompile(`it exited with code 127 at \d{4}-\d\d-\d\d \d\d:\d\d UTC after printing ".*exec no-such-binary failed`).MatchString(r.stdout) {
		t.Errorf("plan for the exited agent does not give its code, time and last line:\n%s", r)
	}
	if strings.Contains(r.stdout, "stopped outside bottlefile") {
		t.Errorf("plan blames the operator for an agent that exited on its own:\n%s", r)
	}
}

// TestE2EApplyExitAtOnceDefaultWait: with the default -wait (issue 28
// shortened it), the failures the watch exists for still fail the apply:
// a command that is not there (127 through tini), a shell that exits at
// once, an entrypoint that fails at its first line. bench/early-exit.sh
// measures how soon each shows on the engine.
func TestE2EApplyExitAtOnceDefaultWait(t *testing.T) {
	parallel(t)
	cli := dockertest.Client(t)
	image := dockertest.BusyboxImage(t, cli)
	for _, tc := range []struct {
		name, body string
		code       string
	}{
		{"missing command", `command = ["no-such-binary"]`, "127"},
		{"shell exits", `command = ["sh", "-c", "exit 3"]`, "3"},
		{"entrypoint fails at its first line", `entrypoint = ["/bin/sh", "-c", "test -f /etc/app.conf || { echo missing /etc/app.conf >&2; exit 1; }; exec sleep 600"]`, "1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// The promise is for an exit within the wait of the engine's
			// start. On a machine so loaded that the workload ran its
			// first lines later (CI saw `exit 3` 7 s into a create), the
			// apply was right to pass: that attempt is made again, and
			// only a miss of an exit within the wait fails the test.
			for attempt := 1; ; attempt++ {
				dir := t.TempDir()
				writeBottlefile(t, dir, "agent \"coder\" {\n  image = %q\n  %s\n}\n", image, tc.body)
				r := bottlefile(t, dir, "apply", "-auto-approve")
				lineage := lineageOf(t, cli, dir)
				if r.code == 1 && strings.Contains(r.stderr, "agent.coder exited with code "+tc.code) {
					return
				}
				ran, exited := ranFor(t, cli, lineage)
				if !exited || ran <= operations.DefaultWait || attempt == 3 {
					t.Errorf("apply with the default -wait of an agent that exits at once: want exit 1 naming code %s, got %s\n(attempt %d; the workload exited %v, %v after its start)", tc.code, r, attempt, exited, ran)
					return
				}
				t.Logf("attempt %d: the workload exited %v after its start, past the %v watch (a loaded machine): again", attempt, ran, operations.DefaultWait)
			}
		})
	}
}

// ranFor is how long lineage's agent.coder container ran, from the
// engine's start to its exit, and whether it has exited.
func ranFor(t *testing.T, cli *client.Client, lineage string) (time.Duration, bool) {
	t.Helper()
	list := containersWith(t, cli, drivers.LabelAddress+"=agent.coder", drivers.LabelLineage+"="+lineage)
	if len(list) != 1 {
		t.Fatalf("want one container for agent.coder, got %d", len(list))
	}
	// A workload the loaded machine has not run to its exit yet: the
	// exit is waited for, up to 10 s.
	var info container.InspectResponse
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		var err error
		info, err = cli.ContainerInspect(t.Context(), list[0].ID)
		if err != nil || info.State == nil {
			t.Fatalf("inspecting agent.coder: %v", err)
		}
		if !info.State.Running && !info.State.Restarting {
			break
		}
		if time.Now().After(deadline) {
			return 0, false
		}
	}
	started, err1 := time.Parse(time.RFC3339Nano, info.State.StartedAt)
	finished, err2 := time.Parse(time.RFC3339Nano, info.State.FinishedAt)
	if err1 != nil || err2 != nil {
		t.Fatalf("agent.coder's times: %q, %q", info.State.StartedAt, info.State.FinishedAt)
	}
	return finished.Sub(started), true
}
