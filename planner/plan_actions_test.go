package planner_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/bottlefile/bottlefile/drivers/drivertest"
	"github.com/bottlefile/bottlefile/planner"
)

const oneAgent = `
agent "coder" {
  image   = "busybox:1"
  command = ["sleep", "%s"]
  cpus    = %s
}
`

// TestPlanActions: each action the planner chooses for one agent, from a
// configuration change or from drift the fake driver reports, with the
// summary it counts; after an apply the plan is empty.
func TestPlanActions(t *testing.T) {
	tests := []struct {
		name   string
		after  string // the configuration planned; "" means removed
		drift  func(f *drivertest.Fake, lineage string)
		opts   planner.Options
		want   string
		reason string // a reason the plan must give, when not ""
		summed planner.Summary
	}{{
		name:  "unchanged",
		after: sprintf(oneAgent, "600", "1"),
		want:  "",
	}, {
		name:   "cpus change in place",
		after:  sprintf(oneAgent, "600", "2"),
		want:   "~ agent.coder",
		summed: planner.Summary{Change: 1},
	}, {
		name:   "command forces replacement",
		after:  sprintf(oneAgent, "700", "1"),
		want:   "-/+ agent.coder forced by command",
		summed: planner.Summary{Add: 1, Destroy: 1},
	}, {
		name:   "removed from the configuration",
		after:  "",
		want:   "- agent.coder\n- agent.coder.network",
		summed: planner.Summary{Destroy: 2},
	}, {
		name:   "stopped out of band",
		after:  sprintf(oneAgent, "600", "1"),
		drift:  func(f *drivertest.Fake, l string) { f.Stop(l, "agent.coder") },
		want:   "> agent.coder",
		summed: planner.Summary{Start: 1},
	}, {
		name:  "changed out of band, as the runtime tells",
		after: sprintf(oneAgent, "600", "1"),
		drift: func(f *drivertest.Fake, l string) {
			f.Drift(l, "agent.coder", "it was scaled to 3 replicas outside bottlefile")
		},
		want:   "-/+ agent.coder",
		reason: "it was scaled to 3 replicas outside bottlefile; it will be replaced to match the configuration",
		summed: planner.Summary{Add: 1, Destroy: 1},
	}, {
		name:   "deleted out of band",
		after:  sprintf(oneAgent, "600", "1"),
		drift:  func(f *drivertest.Fake, l string) { f.Remove(l, "agent.coder") },
		want:   "+ agent.coder",
		summed: planner.Summary{Add: 1},
	}, {
		name:   "replace requested",
		after:  sprintf(oneAgent, "600", "1"),
		opts:   planner.Options{Replace: []string{"agent.coder"}},
		want:   "-/+ agent.coder",
		summed: planner.Summary{Add: 1, Destroy: 1},
	}, {
		name:   "destroy",
		after:  sprintf(oneAgent, "600", "1"),
		opts:   planner.Options{Destroy: true},
		want:   "- agent.coder\n- agent.coder.network",
		summed: planner.Summary{Destroy: 2},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newBench(t)
			b.write(sprintf(oneAgent, "600", "1"))
			b.apply(planner.Options{})
			b.write(tt.after)
			if tt.drift != nil {
				tt.drift(b.fake, b.lineage())
			}
			p := b.plan(tt.opts)
			if got := pending(p); !sameLines(got, tt.want) {
				t.Errorf("plan:\n%s\nwant:\n%s", got, tt.want)
			}
			if got := pending(p); tt.reason != "" && !strings.Contains(got, tt.reason) {
				t.Errorf("plan:\n%s\nwant the reason %q", got, tt.reason)
			}
			if got := p.Summary(); got != tt.summed {
				t.Errorf("summary %+v, want %+v", got, tt.summed)
			}
			if p.Applyable() != (tt.want != "") {
				t.Errorf("Applyable() = %v", p.Applyable())
			}
			b.apply(tt.opts)
			if tt.opts.Destroy {
				return
			}
			if p := b.plan(planner.Options{}); p.Applyable() {
				t.Errorf("after apply the plan still has changes:\n%s", pending(p))
			}
		})
	}
}

// sameLines compares two renderings line by line, ignoring the reasons the
// planner appends in parentheses.
func sameLines(got, want string) bool {
	return stripReasons(got) == want
}

func sprintf(format string, args ...any) string { return fmt.Sprintf(format, args...) }

// stripReasons drops the " (...)" reasons from each line of a plan's String.
func stripReasons(s string) string {
	var lines []string
	for _, l := range strings.Split(s, "\n") {
		if i := strings.Index(l, " ("); i >= 0 {
			l = l[:i]
		}
		lines = append(lines, l)
	}
	return strings.Join(lines, "\n")
}
