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
