package command

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/bottlefile/bottlefile/drivers"
)

const tickConfig = `
agent "coder" {
  image = "alpine:3"
  snapshot_policy {
    every     = "1h"
    keep_last = 2
  }
}
agent "helper" {
  image = "alpine:3"
  idle {
    stop_after = "30m"
  }
}
`

// TestTickCommand: tick with nothing due changes nothing, says when each
// policy is due and exits 0; when due it takes the snapshot and stops the
// idle agent as planned actions; plan (human and -json) shows the due
// times and acts on none; status says stopped (idle) and idle 20m.
func TestTickCommand(t *testing.T) {
	w := newWorkspace(t)
	c := fixClock(t, w)
	w.fake.Clock = c.now
	w.write(tickConfig)
	w.must("apply", "-auto-approve")
	lin := w.lineage()
	applies := len(w.fake.ApplyRequests)

	c.t = c.t.Add(10 * time.Minute)
	w.fake.SetActivity(lin, "agent.helper", drivers.Activity{LastActive: c.t.Add(-10 * time.Minute)})
	out := w.must("tick")
	if !strings.Contains(out, "Nothing due.") || !strings.Contains(out, "agent.coder   snapshot_policy.every = 1h  due in 50m") ||
		!strings.Contains(out, "agent.helper  idle.stop_after = 30m       due in 20m (2026-11-25 06:30:00 UTC), idle 10m") {
		t.Errorf("tick with nothing due:\n%s", out)
	}
	if n := len(w.fake.ApplyRequests); n != applies {
		t.Errorf("tick with nothing due made %d engine changes", n-applies)
	}
	status := w.must("status")
	if !strings.Contains(status, "1 of 1 running, idle 10m") {
		t.Errorf("status of an agent idle 10m:\n%s", status)
	}

	c.t = c.t.Add(50 * time.Minute)
	plan := w.must("plan")
	if !strings.Contains(plan, "No changes.") || !strings.Contains(plan, "due since 2026-11-25 06:30:00 UTC") {
		t.Errorf("plan with policies due:\n%s", plan)
	}
	var doc struct {
		Due []jsonDue `json:"due"`
	}
	if err := json.Unmarshal([]byte(w.must("plan", "-json")), &doc); err != nil || len(doc.Due) != 2 || doc.Due[0].Policy != "snapshot_policy.every" || doc.Due[0].At == nil || *doc.Due[0].At != "2026-11-25T07:00:00Z" {
		t.Errorf("plan -json due: %+v (%v)", doc.Due, err)
	}

	out = w.must("tick")
	for _, want := range []string{"@ agent.coder.snapshot.1", "idle.stop_after = \"30m\": agent.helper has not been used for 1h", "1 snapshot taken", "1 stopped"} {
		if !strings.Contains(out, want) {
			t.Errorf("tick output lacks %q:\n%s", want, out)
		}
	}
	if plan := w.must("plan"); !strings.Contains(plan, "No changes.") {
		t.Errorf("plan after the tick:\n%s", plan)
	}
	if status := w.must("status"); !strings.Contains(status, "stopped (idle)") {
		t.Errorf("status after the idle stop:\n%s", status)
	}
	if out := w.must("tick"); !strings.Contains(out, "Nothing due.") {
		t.Errorf("a second tick at the same time:\n%s", out)
	}
	// start runs it again; the next tick stops it again only stop_after
	// after that start.
	w.must("start", "agent.helper")
	if out := w.must("tick"); !strings.Contains(out, "Nothing due.") {
		t.Errorf("a tick just after start:\n%s", out)
	}
}

// TestWatchRefusesBadInterval: -interval must be more than zero; and a
// tick where nothing was ever applied has nothing due.
func TestWatchRefusesBadInterval(t *testing.T) {
	w := newWorkspace(t)
	w.write(tickConfig)
	if out := w.must("tick"); !strings.Contains(out, "Nothing due.") {
		t.Errorf("tick before any apply:\n%s", out)
	}
	if n := len(w.fake.ApplyRequests); n != 0 {
		t.Errorf("tick before any apply made %d engine changes", n)
	}
	code, _, errs := w.run("watch", "-interval=0s")
	if code != 1 || !strings.Contains(errs, "more than zero") {
		t.Errorf("watch -interval=0s: exit %d\n%s", code, errs)
	}
}
