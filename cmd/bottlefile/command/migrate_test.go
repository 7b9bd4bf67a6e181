package command

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/drivertest"
)

const twoRuntimes = `
runtime "here" {
  driver = "docker"
}

runtime "there" {
  driver = "smolvm"
}

agent "coder" {
  runtime = runtime.%s
  image   = "busybox:1"
  command = ["sleep", "600"]
}
`

// TestMigrate: changing an agent's runtime plans "=> migrate": a snapshot
// on the old runtime moves to the new one, the workload is created there
// from it, and only then removed from the old runtime.
func TestMigrate(t *testing.T) {
	w := newWorkspace(t)
	there := &drivertest.Fake{DriverName: "smolvm"}
	w.extra = map[string]*drivertest.Fake{"smolvm": there}
	w.write(fmt.Sprintf(twoRuntimes, "here"))
	w.must("apply", "-auto-approve")
	lineage := w.lineage()
	w.fake.WriteFile(lineage, "agent.coder", "/workspace/progress.md")

	w.write(fmt.Sprintf(twoRuntimes, "there"))
	out := w.must("plan")
	for _, want := range []string{
		"=> agent.coder (container)",
		`its runtime changes from "here" to "there"`,
		"@ agent.coder.snapshot.1 (snapshot)",
		`committed on runtime "here" and moved to "there"`,
		"Plan: 1 to add, 0 to change, 1 to destroy, 1 to snapshot, 1 to migrate.",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("migration plan lacks %q:\n%s", want, out)
		}
	}
	golden(t, "testdata/plans/migrate.txt", w.normalize(out))
	var mu sync.Mutex
	var order []string
	for name, f := range map[string]*drivertest.Fake{"here": w.fake, "there": there} {
		f.BeforeApply = func(_ context.Context, r drivers.ApplyRequest) error {
			mu.Lock()
			defer mu.Unlock()
			order = append(order, name+": "+string(r.Op)+" "+r.Object.Addr)
			return nil
		}
	}
	w.must("apply", "-auto-approve")
	created, deleted := slices.Index(order, "there: create agent.coder"), slices.Index(order, "here: delete agent.coder")
	if created < 0 || deleted < 0 || deleted < created {
		t.Errorf("want the new workload created before the old one is deleted: %v", order)
	}

	if got := there.Files(lineage, "agent.coder"); !slices.Contains(got, "/workspace/progress.md") {
		t.Errorf("the migrated workload lacks the file: %v", got)
	}
	for _, o := range w.fake.Objects(lineage) {
		t.Errorf("left on the old runtime: %s %s", o.Kind, o.Addr)
	}
	out = w.must("state show", "agent.coder")
	if !strings.Contains(out, "runtime     = there") {
		t.Errorf("state does not point at the new runtime:\n%s", out)
	}
	if out := w.must("plan"); !strings.Contains(out, "No changes.") {
		t.Errorf("not converged after the migration:\n%s", out)
	}
}
