package command

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const savedAgents = `
agent "coder" {
  image   = "busybox:1"
  command = ["sleep", "%d"]
}

agent "reviewer" {
  image = "busybox:1"
}
`

// TestSavedPlan: apply FILE performs exactly the saved plan, and refuses
// it, naming the cause, when the state, the configuration or what is live
// changed since.
func TestSavedPlan(t *testing.T) {
	cases := []struct {
		name   string
		change func(w *workspace)
		want   string // in the refusal; "" means the plan applies
	}{
		{name: "applies", want: ""},
		{name: "state changed", change: func(w *workspace) {
			// Another apply, of a drifted agent, writes the state.
			w.fake.Stop(w.lineage(), "agent.reviewer")
			w.must("apply", "-auto-approve", "-target=agent.reviewer")
		}, want: "the state was written since the plan was made"},
		{name: "config changed", change: func(w *workspace) {
			w.write(sprintf(savedAgents, 900))
		}, want: "Bottlefile changed"},
		{name: "config file added", change: func(w *workspace) {
			os.WriteFile(filepath.Join(w.dir, "extra.bottle.hcl"), []byte("\n"), 0o644)
		}, want: "extra.bottle.hcl was added to the configuration"},
		{name: "container removed", change: func(w *workspace) {
			w.fake.Remove(w.lineage(), "agent.coder")
		}, want: "agent.coder (container fake-"},
		{name: "container stopped", change: func(w *workspace) {
			w.fake.Stop(w.lineage(), "agent.reviewer")
		}, want: "agent.reviewer was stopped since the plan"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorkspace(t)
			w.write(sprintf(savedAgents, 600))
			w.must("apply", "-auto-approve")
			w.write(sprintf(savedAgents, 700))
			planFile := filepath.Join(w.dir, "coder.plan")
			out := w.must("plan", "-out="+planFile)
			if !strings.Contains(out, "bottlefile apply "+planFile) {
				t.Errorf("plan -out does not say how to apply it:\n%s", out)
			}
			if tc.change != nil {
				tc.change(w)
			}
			before := w.fake.ApplyCalls
			code, out, errs := w.run("apply", planFile)
			if tc.want == "" {
				if code != 0 {
					t.Fatalf("apply FILE: exit %d\n%s%s", code, out, errs)
				}
				if got := w.fake.ApplyCalls - before; got != 2 {
					t.Errorf("apply FILE made %d driver calls, want 2 (delete and create of agent.coder)", got)
				}
				if out := w.must("plan"); !strings.Contains(out, "No changes.") {
					t.Errorf("after apply FILE, plan is not empty:\n%s", out)
				}
				return
			}
			if code != 1 || !strings.Contains(errs, "Saved plan is stale") || !strings.Contains(errs, tc.want) {
				t.Fatalf("apply of a stale plan: want exit 1 naming %q, got %d:\n%s%s", tc.want, code, out, errs)
			}
			if w.fake.ApplyCalls != before {
				t.Errorf("a refused plan still called the driver")
			}
		})
	}
}

func TestSavedPlanUnreadable(t *testing.T) {
	w := newWorkspace(t)
	w.write(sprintf(savedAgents, 600))
	for name, content := range map[string]string{
		"garbage":   "not json",
		"version":   `{"format_version": 99, "config": {"Bottlefile": "x"}, "lineage": "", "serial": 0, "options": {}, "changes": []}`,
		"action":    `{"format_version": 1, "config": {"Bottlefile": "x"}, "lineage": "", "serial": 0, "options": {}, "changes": [{"address": "agent.x", "action": "explode"}]}`,
		"truncated": `{"format_version": 1, "config": {"Bottle`,
	} {
		path := filepath.Join(w.dir, name+".plan")
		os.WriteFile(path, []byte(content), 0o600)
		code, _, errs := w.run("apply", path)
		if code != 1 || !strings.Contains(errs, "is not a usable plan file") {
			t.Errorf("%s: want a clear refusal, got exit %d:\n%s", name, code, errs)
		}
	}
	if code, _, errs := w.run("apply", filepath.Join(w.dir, "missing.plan")); code != 1 || !strings.Contains(errs, "no such file") {
		t.Errorf("a missing plan file: exit %d\n%s", code, errs)
	}
}
