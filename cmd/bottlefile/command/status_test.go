package command

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"
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
