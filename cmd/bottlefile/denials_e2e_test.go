package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/docker/dockertest"
)

// TestE2EEgressDenials is issue 13's egress denials on the real engine:
// after two requests the gateway refused, egress denials lists the host
// with count 2 and the rule line that would allow it, and -json says the
// same with the allowlist's serial, and status counts them in its denials
// of the last hour. The requests are refused by the
// policy, so nothing leaves the machine (no name is even looked up).
func TestE2EEgressDenials(t *testing.T) {
	parallel(t)
	cli := dockertest.Client(t)
	image := dockertest.BusyboxImage(t, cli)
	dir := t.TempDir()
	writeBottlefile(t, dir, `
agent "coder" {
  image   = %q
  command = ["sleep", "600"]
  egress {
    allow = ["allowed.invalid:443"]
  }
}
`, image)
	mustRun(t, dir, "apply", "-auto-approve")
	lineage := lineageOf(t, cli, dir)
	agents := containersWith(t, cli, drivers.LabelAddress+"=agent.coder", drivers.LabelLineage+"="+lineage)
	if len(agents) != 1 {
		t.Fatalf("want one agent container, got %d", len(agents))
	}
	for range 2 {
		out, err := raceExec(cli, agents[0].ID, "wget -q -O- http://denied.invalid/ 2>&1; true")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out, "403") {
			t.Fatalf("the request through the gateway was not refused with 403: %q", out)
		}
	}

	r := mustRun(t, dir, "egress", "denials")
	for _, want := range []string{"agent.coder", "denied.invalid:80", "2 times", `egress { allow = [..., "denied.invalid:80"] }`} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("egress denials lacks %q:\n%s", want, r)
		}
	}
	r = mustRun(t, dir, "egress", "denials", "-json", "agent.coder")
	var doc struct {
		Denials []struct {
			Agent, Destination, Rule, Outcome string
			Count                             int
			Serial                            uint64 `json:"allowlist_serial"`
		}
	}
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
		t.Fatalf("egress denials -json: %v\n%s", err, r)
	}
	if len(doc.Denials) != 1 || doc.Denials[0].Count != 2 || doc.Denials[0].Rule != "denied.invalid:80" ||
		doc.Denials[0].Outcome != "denied" || doc.Denials[0].Serial != 1 || doc.Denials[0].Agent != "agent.coder" {
		t.Errorf("egress denials -json: %+v\n%s", doc, r.stdout)
	}
	if r := mustRun(t, dir, "egress", "denials", "-since=1ns"); !strings.Contains(r.stdout, "No denials") {
		t.Errorf("egress denials -since=1ns still lists denials:\n%s", r)
	}

	// status counts the same two in its denials of the last hour.
	r = mustRun(t, dir, "status", "-json")
	var status struct {
		Bottles []struct {
			Address string `json:"address"`
			Denials *int   `json:"denials_last_hour"`
		} `json:"bottles"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &status); err != nil {
		t.Fatalf("status -json: %v\n%s", err, r)
	}
	if len(status.Bottles) != 1 || status.Bottles[0].Denials == nil || *status.Bottles[0].Denials != 2 {
		t.Errorf("status -json does not count the 2 denials:\n%s", r.stdout)
	}
}
