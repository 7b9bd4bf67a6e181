package main

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/docker/dockertest"
)

// healthConfig is an agent whose sidecar has a healthcheck; %[2]s is the
// sidecar's command, %[3]s its healthcheck command.
const healthConfig = `
agent "coder" {
  image   = %[1]q
  command = ["sleep", "600"]

  sidecar "db" {
    image   = %[1]q
    command = %[2]s

    healthcheck {
      command  = %[3]s
      interval = "200ms"
      timeout  = "5s"
      retries  = %[4]d
    }
  }
}
`

// TestE2EAgentWaitsForHealthySidecar is issue 13's start order on the real
// engine: the sidecar becomes ready only two seconds after its start (its
// command then makes /ready, which its healthcheck tests), and the agent's
// container starts only after that, by the engine's own clocks: the
// agent's State.StartedAt is after /ready's modification time. Without
// the order both start within a moment of each other, two seconds before
// /ready exists.
func TestE2EAgentWaitsForHealthySidecar(t *testing.T) {
	parallel(t)
	cli := dockertest.Client(t)
	image := dockertest.BusyboxImage(t, cli)
	dir := t.TempDir()
	writeBottlefile(t, dir, healthConfig, image,
		`["sh", "-c", "sleep 2; touch /ready; exec sleep 600"]`, `["test", "-f", "/ready"]`, 50)
	mustRun(t, dir, "apply", "-auto-approve")
	lineage := lineageOf(t, cli, dir)
	ctx := context.Background()

	inspect := func(addr string) (id string, started time.Time) {
		t.Helper()
		cs := containersWith(t, cli, drivers.LabelAddress+"="+addr, drivers.LabelLineage+"="+lineage)
		if len(cs) != 1 {
			t.Fatalf("want one container of %s, got %d", addr, len(cs))
		}
		info, err := cli.ContainerInspect(ctx, cs[0].ID)
		if err != nil {
			t.Fatal(err)
		}
		at, err := time.Parse(time.RFC3339Nano, info.State.StartedAt)
		if err != nil {
			t.Fatalf("%s started at %q: %v", addr, info.State.StartedAt, err)
		}
		if addr == "agent.coder.sidecar.db" {
			if hc := info.Config.Healthcheck; hc == nil || !slices.Equal(hc.Test, []string{"CMD", "test", "-f", "/ready"}) || hc.Interval != 200*time.Millisecond || hc.Retries != 50 {
				t.Errorf("the sidecar's healthcheck on the engine is %+v", hc)
			}
			if info.State.Health == nil || info.State.Health.Status != "healthy" {
				t.Errorf("the sidecar's health after apply: %+v", info.State.Health)
			}
		}
		return cs[0].ID, at
	}
	dbID, dbStarted := inspect("agent.coder.sidecar.db")
	_, agentStarted := inspect("agent.coder")
	ready, err := cli.ContainerStatPath(ctx, dbID, "/ready")
	if err != nil {
		t.Fatalf("the sidecar has no /ready: %v", err)
	}
	t.Logf("sidecar started %s, ready %s, agent started %s", dbStarted.Format(time.StampMicro), ready.Mtime.Format(time.StampMicro), agentStarted.Format(time.StampMicro))
	if !agentStarted.After(ready.Mtime) {
		t.Errorf("the agent started at %s, before its sidecar was ready at %s", agentStarted.Format(time.StampMicro), ready.Mtime.Format(time.StampMicro))
	}

	// Replacing the sidecar leaves the agent alone.
	writeBottlefile(t, dir, healthConfig, image,
		`["sh", "-c", "touch /ready; exec sleep 601"]`, `["test", "-f", "/ready"]`, 50)
	r := mustRun(t, dir, "plan")
	if !strings.Contains(r.stdout, "agent.coder.sidecar.db must be replaced") || strings.Contains(r.stdout, "agent.coder must be replaced") || !strings.Contains(r.stdout, "1 to add, 0 to change, 1 to destroy") {
		t.Errorf("plan of a changed sidecar:\n%s", r)
	}
}

// TestE2EUnhealthySidecar: a sidecar that never becomes ready fails apply
// once its retries are spent, naming it with its last health output; the
// agent that waits for it is not started (nor created).
func TestE2EUnhealthySidecar(t *testing.T) {
	parallel(t)
	cli := dockertest.Client(t)
	image := dockertest.BusyboxImage(t, cli)
	dir := t.TempDir()
	writeBottlefile(t, dir, healthConfig, image,
		`["sleep", "600"]`, `["sh", "-c", "echo db is still loading; exit 1"]`, 2)
	r := bottlefile(t, dir, "apply", "-auto-approve")
	lineage := lineageOf(t, cli, dir)
	if r.code != 1 {
		t.Fatalf("apply with a sidecar that never becomes healthy: want exit 1, got %s", r)
	}
	for _, want := range []string{"agent.coder.sidecar.db never became healthy", "its last health check said:", "db is still loading"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("apply's error lacks %q:\n%s", want, r)
		}
	}
	for _, want := range []string{"failed:      create agent.coder.sidecar.db", "not started: create agent.coder"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("apply's summary lacks %q:\n%s", want, r)
		}
	}
	if cs := containersWith(t, cli, drivers.LabelAddress+"=agent.coder", drivers.LabelLineage+"="+lineage); len(cs) != 0 {
		t.Errorf("the agent was created although its sidecar never became healthy: %+v", cs)
	}
}
