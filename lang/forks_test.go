package lang

import (
	"strings"
	"testing"
	"testing/fstest"
)

// TestFromSnapshot: from_snapshot takes a snapshot block of any agent or
// a policy snapshot's address, bare or quoted, and says which agent's
// snapshot it is and whether the fork must wait for it.
func TestFromSnapshot(t *testing.T) {
	_, cfg := load(t, map[string]string{"proj/Bottlefile": `
agent "coder" {
  image = "alpine:3"
  snapshot_policy {
    max_total_size = "1.5GiB"
  }
}
snapshot "reviewed" {
  agent = agent.coder
}
agent "reviewer" {
  from_snapshot = snapshot.reviewed
}
agent "bisect" {
  from_snapshot = agent.coder.snapshot.12
}
agent "quoted" {
  from_snapshot = "agent.coder.snapshot.3"
}
agent "pinned" {
  image         = "alpine:3"
  from_snapshot = snapshot.own
}
snapshot "own" {
  agent = agent.pinned
}
`})
	for _, tc := range []struct {
		agent, addr, of, dep string
	}{
		{"reviewer", "snapshot.reviewed", "coder", "snapshot.reviewed"},
		{"bisect", "agent.coder.snapshot.12", "coder", "agent.coder.snapshot.12"},
		{"quoted", "agent.coder.snapshot.3", "coder", "agent.coder.snapshot.3"},
		{"pinned", "snapshot.own", "pinned", ""},
		{"coder", "", "", ""},
	} {
		a := cfg.Agents[tc.agent]
		if a.FromSnapshot != tc.addr || cfg.FromSnapshotAgent(a) != tc.of || cfg.ForkDependency(a) != tc.dep {
			t.Errorf("agent.%s: from_snapshot %q of %q, waits for %q; want %q of %q, waits for %q",
				tc.agent, a.FromSnapshot, cfg.FromSnapshotAgent(a), cfg.ForkDependency(a), tc.addr, tc.of, tc.dep)
		}
	}
	scope, diags := cfg.NewScope(nil)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	v, diags := scope.EvalAgent(cfg.Agents["coder"])
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	if got := v.SnapshotPolicy.MaxTotalSize; got != 3<<29 {
		t.Errorf("max_total_size = %d bytes, want %d", got, 3<<29)
	}
	if v, _ := scope.EvalAgent(cfg.Agents["reviewer"]); !v.Workload.GetAttr("image").IsNull() {
		t.Errorf("a fork without image has image %#v", v.Workload.GetAttr("image"))
	}
}

// TestFromSnapshotJSON: in JSON, from_snapshot is a string either way.
func TestFromSnapshotJSON(t *testing.T) {
	_, cfg := load(t, map[string]string{"proj/main.bottle.json": `{
  "agent": {
    "coder": {"image": "alpine:3"},
    "bisect": {"from_snapshot": "agent.coder.snapshot.7"},
    "reviewer": {"from_snapshot": "snapshot.reviewed"}
  },
  "snapshot": {"reviewed": {"agent": "agent.coder"}}
}`})
	if got := cfg.Agents["bisect"].FromSnapshot; got != "agent.coder.snapshot.7" {
		t.Errorf("bisect: %q", got)
	}
	if got := cfg.Agents["reviewer"].FromSnapshot; got != "snapshot.reviewed" {
		t.Errorf("reviewer: %q", got)
	}
}

// TestForkCycle: a fork that its source refers to is a cycle through the
// snapshot block.
func TestForkCycle(t *testing.T) {
	fsys := fstest.MapFS{"proj/Bottlefile": {Data: []byte(`
agent "coder" {
  image = "alpine:3"
  env   = { REVIEWER = agent.reviewer.id }
}
snapshot "reviewed" {
  agent = agent.coder
}
agent "reviewer" {
  from_snapshot = snapshot.reviewed
}
`)}}
	_, diags := NewParserFS(fsys).LoadDir("proj")
	if len(diags) != 1 || diags[0].Summary != "Reference cycle" || !strings.Contains(diags[0].Detail, "agent.reviewer → snapshot.reviewed → agent.coder") {
		t.Errorf("diagnostics: %v", diags)
	}
}
