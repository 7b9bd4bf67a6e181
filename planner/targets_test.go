package planner_test

import (
	"testing"

	"github.com/bottlefile/bottlefile/planner"
)

// TestDestroyTargetKeepsDependencies: a targeted delete takes what depends
// on the target along, never what the target depends on (as Terraform).
func TestDestroyTargetKeepsDependencies(t *testing.T) {
	tests := []struct {
		name, src, target, want string
	}{{
		name: "the workload goes before the network it is on",
		src: `
agent "coder" {
  image   = "busybox:1"
  command = ["sleep", "600"]
}`,
		target: "agent.coder.network",
		want:   "- agent.coder\n- agent.coder.network",
	}, {
		name: "snapshot block removed from the configuration",
		src: `
agent "coder" {
  image   = "busybox:1"
  command = ["sleep", "600"]
}
snapshot "base" {
  agent = agent.coder
}`,
		target: "snapshot.base",
		want:   "- snapshot.base",
	}, {
		name: "a fork goes before the snapshot it boots from",
		src: `
agent "coder" {
  image   = "busybox:1"
  command = ["sleep", "600"]
}
snapshot "base" {
  agent = agent.coder
}
agent "fork" {
  from_snapshot = snapshot.base
  command       = ["sleep", "600"]
}`,
		target: "snapshot.base",
		want:   "- agent.fork\n- snapshot.base",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newBench(t)
			b.write(tt.src)
			b.apply(planner.Options{})
			p := b.plan(planner.Options{Destroy: true, Targets: []string{tt.target}})
			if got := pending(p); got != tt.want {
				t.Errorf("plan:\n%s\nwant:\n%s", got, tt.want)
			}
		})
	}
}
