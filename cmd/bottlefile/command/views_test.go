package command

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/bottlefile/bottlefile/drivers/drivertest"
	"github.com/bottlefile/bottlefile/planner"
)

// runColored runs a command as a terminal that wants color would.
func (w *workspace) runColored(name string, args ...string) string {
	w.t.Helper()
	var out, errb bytes.Buffer
	m := &Meta{
		Stdout: &out, Stderr: &errb, Stdin: strings.NewReader(""), Log: hclog.NewNullLogger(),
		Registry: w.registry(), Ctx: context.Background(), Abandon: context.Background(),
		Dir: w.dir, Color: true,
	}
	c, _ := Commands(m)[name]()
	if code := c.Run(args); code != 0 {
		w.t.Fatalf("%s %v: exit %d\n%s%s", name, args, code, out.String(), errb.String())
	}
	return out.String()
}

// TestPlanColor: on a terminal the plan colors its symbols; -no-color
// (like NO_COLOR and a stdout that is no terminal, which main folds into
// Meta.Color) prints no escape code at all.
func TestPlanColor(t *testing.T) {
	w := newWorkspace(t)
	w.write(sprintf(savedAgents, 600))
	colored := w.runColored("plan")
	if !strings.Contains(colored, ansiGreen+"+"+ansiReset) {
		t.Errorf("a colored plan lacks a green +:\n%q", colored)
	}
	if plain := w.runColored("plan", "-no-color"); strings.Contains(plain, "\x1b[") {
		t.Errorf("plan -no-color printed escape codes:\n%q", plain)
	}
	if plain := w.must("plan"); strings.Contains(plain, "\x1b[") {
		t.Errorf("plan without a terminal printed escape codes:\n%q", plain)
	}
}

// TestPlanJSONSummaryCountsMigrations: the JSON summary counts what the
// Plan: line counts, migrations included.
func TestPlanJSONSummaryCountsMigrations(t *testing.T) {
	w := newWorkspace(t)
	w.extra = map[string]*drivertest.Fake{"smolvm": {DriverName: "smolvm"}}
	w.write(fmt.Sprintf(twoRuntimes, "here"))
	w.must("apply", "-auto-approve")
	w.write(fmt.Sprintf(twoRuntimes, "there"))
	var doc struct {
		Summary map[string]int `json:"summary"`
	}
	if err := json.Unmarshal([]byte(w.must("plan", "-json")), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Summary["migrate"] != 1 {
		t.Errorf("the JSON summary counts %d migrations, want 1: %v", doc.Summary["migrate"], doc.Summary)
	}
}

// TestApplySummarySingular: one snapshot taken is said in the singular.
func TestApplySummarySingular(t *testing.T) {
	w := newWorkspace(t)
	w.write(`
agent "coder" {
  image = "busybox:1"
}

snapshot "base" {
  agent = agent.coder
}
`)
	out := w.must("apply", "-auto-approve")
	if !strings.Contains(out, "2 added, 0 changed, 0 destroyed, 1 snapshot taken.") {
		t.Errorf("apply's closing line is not as expected:\n%s", out)
	}
}

// TestPlanColorGolden: a colored plan as a terminal receives it, escape
// codes and all (testdata/color/plan.txt): "+" green, "-" red, "~"
// yellow, reasons dimmed, addresses and the closing line bold; and the
// apply's closing line green. show -no-color of it prints no escape code.
func TestPlanColorGolden(t *testing.T) {
	w := newWorkspace(t)
	w.write(`
agent "coder" {
  image  = "busybox:1"
  memory = "256MiB"
}

agent "reviewer" {
  image = "busybox:1"
}

agent "tester" {
  image = "busybox:1"
}
`)
	w.must("apply", "-auto-approve")
	w.write(`
agent "coder" {
  image  = "busybox:1"
  memory = "512MiB"
}

agent "tester" {
  image = "busybox:1"
}

agent "writer" {
  image = "busybox:1"
}
`)
	w.fake.Stop(w.lineage(), "agent.tester")
	colored := w.runColored("plan", "-out="+w.dir+"/saved.plan")
	golden(t, "testdata/color/plan.txt", w.normalize(colored))
	for _, want := range []string{
		ansiGreen + "+" + ansiReset, ansiRed + "-" + ansiReset, ansiYellow + "~" + ansiReset,
		ansiDim + "# (because it was stopped outside bottlefile",
	} {
		if !strings.Contains(colored, want) {
			t.Errorf("the colored plan lacks %q", want)
		}
	}
	if plain := w.runColored("show", "-no-color", w.dir+"/saved.plan"); strings.Contains(plain, "\x1b[") {
		t.Errorf("show -no-color printed escape codes:\n%q", plain)
	}
	if out := w.runColored("apply", w.dir+"/saved.plan"); !strings.Contains(out, ansiBold+ansiGreen+"Apply complete!"+ansiReset) {
		t.Errorf("apply's closing line is not green:\n%q", out)
	}
}

// TestRenderChangeSensitiveValue: a change hidden by redaction, both sides
// reading "(sensitive value)", says that a sensitive value changed, in
// place as when it forces replacement; a visible change says nothing more.
func TestRenderChangeSensitiveValue(t *testing.T) {
	creds := func(v string) json.RawMessage {
		return json.RawMessage(`[{"name":"anthropic","header":"x-api-key","value":` + v + `}]`)
	}
	for _, tc := range []struct {
		name   string
		change planner.Change
		want   string
	}{
		{"in place", planner.Change{Addr: "agent.claude.gateway", Kind: "gateway", Action: planner.Update, Changed: []string{"credentials"},
			Before: map[string]json.RawMessage{"credentials": creds(`"(sensitive value)"`)},
			After:  map[string]json.RawMessage{"credentials": creds(`"(sensitive value)"`)}},
			`value = (sensitive value) }] # a sensitive value changed` + "\n"},
		{"forcing", planner.Change{Addr: "agent.coder", Kind: "container", Action: planner.Replace, Changed: []string{"env"}, Forcing: []string{"env"},
			Before: map[string]json.RawMessage{"env": json.RawMessage(`{"TOKEN":"(sensitive value)"}`)},
			After:  map[string]json.RawMessage{"env": json.RawMessage(`{"TOKEN":"(sensitive value)"}`)}},
			`-> { TOKEN = (sensitive value) } # a sensitive value changed: forces replacement` + "\n"},
		{"visible", planner.Change{Addr: "agent.coder", Kind: "container", Action: planner.Update, Changed: []string{"cpus"},
			Before: map[string]json.RawMessage{"cpus": json.RawMessage(`1`)},
			After:  map[string]json.RawMessage{"cpus": json.RawMessage(`2`)}},
			"~ cpus = 1 -> 2\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			renderChange(&buf, &tc.change, false)
			if !strings.Contains(buf.String(), tc.want) {
				t.Errorf("want %q in:\n%s", tc.want, buf.String())
			}
			if tc.name == "visible" && strings.Contains(buf.String(), "sensitive") {
				t.Errorf("a visible change is said to be a sensitive one:\n%s", buf.String())
			}
		})
	}
}
