package command

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

const inspectConfig = `
variable "role" {
  default = "coder"
}

agent "coder" {
  image = "busybox:1"
  env   = { ROLE = var.role }
}

agent "reviewer" {
  image      = "busybox:1"
  depends_on = [agent.coder]
}

output "coder_id" {
  value = agent.coder.id
}

output "role" {
  value = var.role
}
`

// TestGraph: the action graph in DOT, before and after a change.
func TestGraph(t *testing.T) {
	w := newWorkspace(t)
	w.write(inspectConfig)
	golden(t, filepath.Join("testdata", "graph", "create.dot"), w.must("graph"))
	planFile := filepath.Join(w.dir, "p.plan")
	w.must("plan", "-out="+planFile)
	if got := w.must("graph", "-plan="+planFile); got != w.must("graph") {
		t.Errorf("graph -plan of a saved plan differs from graph:\n%s", got)
	}
	w.must("apply", "-auto-approve")
	w.write(strings.Replace(inspectConfig, `image = "busybox:1"`, `image = "busybox:2"`, 1))
	golden(t, filepath.Join("testdata", "graph", "replace.dot"), w.must("graph"))
}

// TestStateCommands: list, show, pull and rm.
func TestStateCommands(t *testing.T) {
	w := newWorkspace(t)
	w.write(inspectConfig)
	if out := w.must("state list"); out != "" {
		t.Errorf("state list before any apply: %q", out)
	}
	w.must("apply", "-auto-approve")
	list := w.must("state list")
	want := "agent.coder\nagent.coder.network\nagent.reviewer\nagent.reviewer.network\n"
	if list != want {
		t.Errorf("state list:\n%s\nwant:\n%s", list, want)
	}
	show := w.must("state show", "agent.coder")
	for _, s := range []string{"# agent.coder (container)", "id          = fake-", `env         = { ROLE = "coder" }`, "runtime     = default"} {
		if !strings.Contains(show, s) {
			t.Errorf("state show lacks %q:\n%s", s, show)
		}
	}
	var doc stateDocument
	if err := json.Unmarshal([]byte(w.must("state pull")), &doc); err != nil {
		t.Fatalf("state pull is not JSON: %v", err)
	}
	if doc.Lineage != w.lineage() || len(doc.Objects) != 4 || doc.Serial == 0 {
		t.Errorf("state pull: lineage %q serial %d objects %d", doc.Lineage, doc.Serial, len(doc.Objects))
	}
	if code, _, errs := w.run("state show", "agent.nope"); code != 1 || !strings.Contains(errs, "no object at agent.nope") {
		t.Errorf("state show of an unknown address: exit %d\n%s", code, errs)
	}
	w.must("state rm", "agent.reviewer")
	if strings.Contains(w.must("state list"), "agent.reviewer\n") {
		t.Errorf("state rm left the record")
	}
	// The object still carries the lineage: the next plan adopts it.
	if out := w.must("plan"); !strings.Contains(out, "agent.reviewer will be adopted") {
		t.Errorf("after state rm, plan does not adopt the object:\n%s", out)
	}
}

// TestOutput: outputs evaluated against the state.
func TestOutput(t *testing.T) {
	w := newWorkspace(t)
	w.write(inspectConfig)
	if code, _, errs := w.run("output"); code != 1 || !strings.Contains(errs, "run apply first") {
		t.Errorf("output before apply: exit %d\n%s", code, errs)
	}
	w.must("apply", "-auto-approve")
	out := w.must("output")
	if !strings.Contains(out, `coder_id = "fake-`) || !strings.Contains(out, `role = "coder"`) {
		t.Errorf("output:\n%s", out)
	}
	if got := w.must("output", "role"); got != "coder\n" {
		t.Errorf("output role: %q", got)
	}
	var all map[string]any
	if err := json.Unmarshal([]byte(w.must("output", "-json")), &all); err != nil || all["role"] != "coder" {
		t.Errorf("output -json: %v %v", all, err)
	}
	if got := w.must("output", "-var", "role=reviewer", "role"); got != "reviewer\n" {
		t.Errorf("output with -var: %q", got)
	}
}

// TestShowState: show without a plan file shows the state.
func TestShowState(t *testing.T) {
	w := newWorkspace(t)
	w.write(inspectConfig)
	if out := w.must("show"); !strings.Contains(out, "The state is empty") {
		t.Errorf("show before apply: %q", out)
	}
	w.must("apply", "-auto-approve")
	if out := w.must("show"); !strings.Contains(out, "# agent.reviewer (container)") || !strings.Contains(out, "depends_on  = agent.reviewer.network") {
		t.Errorf("show:\n%s", out)
	}
}
