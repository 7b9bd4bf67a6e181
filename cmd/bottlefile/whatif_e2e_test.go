package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/docker/dockertest"
)

// whatIfBottlefile is one agent on a runtime whose egress network is the
// test's outside world, with the allow list %[3]s.
const whatIfBottlefile = `
runtime "local" {
  driver         = "docker"
  egress_network = %q
}

agent "coder" {
  runtime = runtime.local
  image   = %q
  command = ["sleep", "3600"]
  egress {
    allow = %s
  }
}
`

// TestE2EEgressWhatIf is issue 13's egress what-if on the real engine: the
// agent fetches from the allowed host (a container this test started on
// the outside network) once and is refused twice for another name (by
// policy: nothing is even looked up); the plan of an allowlist that swaps
// them replays the gateway's decisions and says, on the gateway's change,
// that it would now allow the refused destination (2 requests) and deny
// the one in use (1 request), in the human plan and in plan -json.
func TestE2EEgressWhatIf(t *testing.T) {
	parallel(t)
	cli := dockertest.Client(t)
	r := &escapeRig{t: t, cli: cli, img: dockertest.BusyboxImage(t, cli), run: randomHex(4), dir: t.TempDir()}
	r.makeOutside()
	t.Cleanup(r.removeWorld)
	_, allowedIP := r.outsider("allowed-host", r.img, []string{"sh", "-c", "mkdir -p /www && echo allowed-host-content > /www/index.html && exec httpd -f -p 8080 -h /www"})

	// The host's address is private: the name resolves to it only with
	// an address rule too.
	writeBottlefile(t, r.dir, whatIfBottlefile, r.outside, r.img, fmt.Sprintf(`["allowed-host:8080", "%s:8080"]`, allowedIP))
	mustRun(t, r.dir, "apply", "-auto-approve")
	lineage := lineageOf(t, cli, r.dir)
	agents := containersWith(t, cli, drivers.LabelAddress+"=agent.coder", drivers.LabelLineage+"="+lineage)
	if len(agents) != 1 {
		t.Fatalf("want one agent container, got %d", len(agents))
	}
	out, err := raceExec(cli, agents[0].ID, "timeout 10 wget -qO- http://allowed-host:8080/ 2>&1")
	if err != nil || !strings.Contains(out, "allowed-host-content") {
		t.Fatalf("the agent did not reach the allowed host through its gateway: %v %q", err, out)
	}
	for range 2 {
		out, err := raceExec(cli, agents[0].ID, "timeout 10 wget -q -O- http://denied.invalid/ 2>&1; true")
		if err != nil || !strings.Contains(out, "403") {
			t.Fatalf("the request through the gateway was not refused with 403: %v %q", err, out)
		}
	}

	writeBottlefile(t, r.dir, whatIfBottlefile, r.outside, r.img, `["denied.invalid:80"]`)
	res := mustRun(t, r.dir, "plan")
	wantAll(t, "the plan of the swapped allowlist", res.stdout,
		"~ agent.coder.gateway (gateway)",
		"# (what-if: of the destinations denied in the last 24 hours, the new allowlist would allow denied.invalid:80 (2 requests))",
		"# (what-if: of the destinations in use in the last 24 hours, the new allowlist would deny allowed-host:8080 (1 request))",
	)
	res = mustRun(t, r.dir, "plan", "-json")
	var doc struct {
		ResourceChanges []struct {
			Address string   `json:"address"`
			WhatIf  []string `json:"what_if"`
		} `json:"resource_changes"`
	}
	if err := json.Unmarshal([]byte(res.stdout), &doc); err != nil {
		t.Fatalf("plan -json: %v\n%s", err, res)
	}
	var whatIf []string
	for _, c := range doc.ResourceChanges {
		if c.Address == "agent.coder.gateway" {
			whatIf = c.WhatIf
		}
	}
	if len(whatIf) != 2 || !strings.Contains(whatIf[0], "would allow denied.invalid:80 (2 requests)") || !strings.Contains(whatIf[1], "would deny allowed-host:8080 (1 request)") {
		t.Errorf("plan -json what_if of the gateway: %q\n%s", whatIf, res.stdout)
	}
}
