package operations

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/bottlefile/bottlefile/drivers/drivertest"
	"github.com/bottlefile/bottlefile/lang"
	"github.com/bottlefile/bottlefile/planner"
)

const outputsConfig = `
variable "key" {
  type      = string
  sensitive = true
}

agent "coder" {
  image = "busybox:1"
}

output "id" {
  value = agent.coder.id
}

output "key" {
  value     = var.key
  sensitive = true
}
`

// workdir is a Bottlefile directory whose docker runtime is fake.
type workdir struct {
	t    *testing.T
	dir  string
	fake *drivertest.Fake
}

func newWorkdir(t *testing.T, src string) *workdir {
	w := &workdir{t: t, dir: t.TempDir(), fake: &drivertest.Fake{DriverName: "docker"}}
	w.write(src)
	return w
}

func (w *workdir) write(src string) {
	w.t.Helper()
	if err := os.WriteFile(filepath.Join(w.dir, "Bottlefile"), []byte(src), 0o644); err != nil {
		w.t.Fatal(err)
	}
}

// open opens the operation; the caller closes it.
func (w *workdir) open(readOnly bool, in Inputs) *Operation {
	w.t.Helper()
	op, diags := Open(context.Background(), Request{Dir: w.dir, LoadDir: w.dir, ReadOnly: readOnly, Registry: Registry{"docker": w.fake.Factory()}, Inputs: in})
	if diags.HasErrors() {
		op.Close()
		w.t.Fatal(diags)
	}
	return op
}

// apply plans and applies with the given options.
func (w *workdir) apply(in Inputs, opts planner.Options) {
	w.t.Helper()
	op := w.open(false, in)
	defer op.Close()
	p, diags := op.Plan(context.Background(), opts)
	if diags.HasErrors() {
		w.t.Fatal(diags)
	}
	if _, diags := op.Apply(context.Background(), p, ApplyOptions{}); diags.HasErrors() {
		w.t.Fatal(diags)
	}
}

// TestOutputs: outputs are evaluated against the state: unknown before an
// apply, then known; a sensitive one keeps its mark in the list and loses
// it when asked for by name; an undeclared name is an error.
func TestOutputs(t *testing.T) {
	w := newWorkdir(t, outputsConfig)
	in := Inputs{Vars: []string{"key=s3cret"}}
	op := w.open(true, in)
	if _, diags := op.Outputs(""); !diags.HasErrors() || diags[0].Summary != "Output not known yet" {
		t.Errorf("before apply: %v", diags)
	}
	op.Close()

	w.apply(in, planner.Options{})
	op = w.open(true, in)
	defer op.Close()
	outs, diags := op.Outputs("")
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	if len(outs) != 2 || outs[0].Name != "id" || outs[1].Name != "key" {
		t.Fatalf("outputs: %+v", outs)
	}
	if id := outs[0].Value; id.IsNull() || id.AsString() == "" {
		t.Errorf("id: %#v", id)
	}
	if !lang.IsSensitive(outs[1].Value) {
		t.Errorf("the sensitive output lost its mark in the list")
	}
	key, diags := op.Outputs("key")
	if diags.HasErrors() || len(key) != 1 || lang.IsSensitive(key[0].Value) || key[0].Value.AsString() != "s3cret" {
		t.Errorf("key by name: %+v %v", key, diags)
	}
	if _, diags := op.Outputs("nope"); !diags.HasErrors() || diags[0].Summary != "No such output" {
		t.Errorf("nope: %v", diags)
	}
}

// TestPlanSaved: a saved plan is planned again with its own options and
// variable values, and refused as stale once the configuration or the
// state changed.
func TestPlanSaved(t *testing.T) {
	const config = `
variable "role" {
  type = string
}

agent "coder" {
  image = "busybox:1"
  env   = { ROLE = var.role }
}
`
	w := newWorkdir(t, config)
	file := filepath.Join(t.TempDir(), "plan")
	save := func() *planner.SavedPlan {
		t.Helper()
		op := w.open(true, Inputs{Vars: []string{"role=coder"}})
		defer op.Close()
		p, diags := op.Plan(context.Background(), planner.Options{})
		if diags.HasErrors() {
			t.Fatal(diags)
		}
		if err := op.SavePlan(p, file); err != nil {
			t.Fatal(err)
		}
		saved, err := planner.ReadPlanFile(file)
		if err != nil {
			t.Fatal(err)
		}
		return saved
	}
	replan := func(saved *planner.SavedPlan) (*planner.Plan, string) {
		t.Helper()
		// No -var: the saved plan's values are what it was made with.
		op := w.open(false, Inputs{Saved: saved.Variables})
		defer op.Close()
		p, diags := op.PlanSaved(context.Background(), saved)
		if diags.HasErrors() {
			return nil, diags[len(diags)-1].Summary
		}
		return p, ""
	}

	saved := save()
	if _, ok := saved.Variables["role"]; !ok {
		t.Errorf("the plan file keeps no value of role: %v", saved.Variables)
	}
	if p, stale := replan(saved); stale != "" || !p.Applyable() {
		t.Errorf("a fresh saved plan: %v %q", p, stale)
	}

	w.apply(Inputs{Vars: []string{"role=coder"}}, planner.Options{}) // the state moves on
	if _, stale := replan(saved); stale != "Saved plan is stale" {
		t.Errorf("after the state changed: %q", stale)
	}

	saved = save()
	w.write(config + "\n# changed\n")
	if _, stale := replan(saved); stale != "Saved plan is stale" {
		t.Errorf("after the configuration changed: %q", stale)
	}
}
