package command

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/drivertest"
)

const statusConfig = `
agent "coder" {
  image   = "busybox:1"
  command = ["sleep", "600"]
  snapshot_policy {
    before    = ["replace"]
    keep_last = 2
  }
}

agent "web" {
  image   = "busybox:1"
  command = ["httpd", "-f"]
}

agent "later" {
  image = "busybox:1"
}
`

// TestStatus: one line per bottle and one per workload, from one Read per
// runtime: an exited agent with its code and when, a running one with its
// uptime and bytes written, a snapshot's age, an agent never applied.
func TestStatus(t *testing.T) {
	w := newWorkspace(t)
	c := fixClock(t, w)
	w.fake.Clock = c.now
	w.write(strings.Replace(statusConfig, `agent "later" {
  image = "busybox:1"
}
`, "", 1))
	w.must("apply", "-auto-approve", "-parallelism=1") // fake ids in a fixed order: the golden files show them
	c.t = c.t.Add(10 * time.Minute)
	w.must("snapshot take", "agent.coder")
	w.write(statusConfig)
	lineage := w.lineage()
	c.t = c.t.Add(20 * time.Minute)
	w.fake.WriteFile(lineage, "agent.web", "/www/index.html")
	w.fake.Exit(lineage, "agent.coder", 3)
	c.t = c.t.Add(2 * time.Minute)

	reads := w.fake.ReadCalls
	out := w.must("status")
	if n := w.fake.ReadCalls - reads; n != 1 {
		t.Errorf("status read the runtime %d times, want once", n)
	}
	golden(t, "testdata/status/status.txt", w.normalize(out))

	out = w.must("status", "-json", "agent.coder")
	// The fake numbers ids in apply order, which parallel steps vary.
	golden(t, "testdata/status/coder.json", regexp.MustCompile(`"fake-\d+"`).ReplaceAllString(w.normalize(out), `"fake-ID"`))
	var doc statusJSON
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Bottles) != 1 || doc.Bottles[0].Workloads[0].State != "exited" || doc.Bottles[0].Workloads[0].ExitCode == nil || *doc.Bottles[0].Workloads[0].ExitCode != 3 {
		t.Errorf("status -json agent.coder: %s", out)
	}

	if code, _, errs := w.run("status", "agent.nope"); code != 1 || !strings.Contains(errs, "agent.nope is neither declared") {
		t.Errorf("status of an unknown agent: exit %d\n%s", code, errs)
	}
	if code, _, errs := w.run("status", "runtime.default"); code != 1 || !strings.Contains(errs, "Not an agent address") {
		t.Errorf("status of a runtime: exit %d\n%s", code, errs)
	}
}

// TestStatusDenials: status counts the requests each bottle's gateway
// refused in the last hour, from its decision log, as egress denials
// reads it: not what it allowed, not what is older; a bottle without a
// gateway has no count (null, "-").
func TestStatusDenials(t *testing.T) {
	w := newWorkspace(t)
	c := fixClock(t, w)
	w.fake.Clock = c.now
	w.write(`
agent "coder" {
  image = "busybox:1"
}

agent "web" {
  image = "busybox:1"
}
`)
	w.must("apply", "-auto-approve")
	lineage := w.lineage()
	// The fake plans no gateway: one is put beside agent.coder, as the
	// docker driver makes it, with what its log says.
	w.fake.Put(lineage, drivers.LiveObject{Addr: "agent.coder.gateway", Kind: drivertest.KindContainer, ID: "fake-gw", Running: true, State: drivers.StateRunning})
	decision := func(ago time.Duration, dest string, allowed bool) string {
		outcome := map[bool]string{true: "connected", false: "denied"}[allowed]
		return fmt.Sprintf(`{"time":%q,"source":"10.213.0.2:40000","destination":%q,"rule":"","allowed":%t,"outcome":%q,"reason":"x","serial":1}`,
			c.t.Add(-ago).Format(time.RFC3339Nano), dest, allowed, outcome)
	}
	for _, line := range []string{
		`{"event":"listening"}`,
		decision(2*time.Hour, "old.example:443", false),
		decision(30*time.Minute, "denied.example:443", false),
		decision(20*time.Minute, "allowed.example:443", true),
		decision(time.Minute, "denied.example:443", false),
	} {
		w.fake.Say(lineage, "agent.coder.gateway", false, line)
	}

	var doc statusJSON
	out := w.must("status", "-json")
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, b := range doc.Bottles {
		got[b.Address] = "null"
		if b.DenialsLastHour != nil {
			got[b.Address] = fmt.Sprint(*b.DenialsLastHour)
		}
	}
	if got["agent.coder"] != "2" || got["agent.web"] != "null" {
		t.Errorf("denials in the last hour: %v, want agent.coder 2 and agent.web null\n%s", got, out)
	}
	human := w.must("status")
	if !regexp.MustCompile(`(?m)^agent\.coder .* 2\n`).MatchString(human) || !regexp.MustCompile(`(?m)^agent\.web .* -\n`).MatchString(human) {
		t.Errorf("status does not show 2 denials for agent.coder and - for agent.web:\n%s", human)
	}
}
