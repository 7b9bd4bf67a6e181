package planner_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/lang"
	"github.com/bottlefile/bottlefile/planner"
	"github.com/bottlefile/bottlefile/state"
)

// downDriver is a driver whose engine cannot be reached: Read and Plan
// fail as the docker driver does when no engine answers.
type downDriver struct {
	drivers.Driver
	calls int
}

func (d *downDriver) down() error {
	d.calls++
	return &drivers.UnreachableError{Runtime: "default", Address: "DOCKER_HOST=tcp://127.0.0.1:1", Err: errors.New("connection refused")}
}

func (d *downDriver) Read(context.Context, drivers.ReadRequest) (drivers.ReadResponse, error) {
	return drivers.ReadResponse{}, d.down()
}

func (d *downDriver) Plan(context.Context, drivers.PlanRequest) (drivers.PlanResponse, error) {
	return drivers.PlanResponse{}, d.down()
}

// TestUnreachableRuntimeOneError: a runtime that cannot be reached is one
// error naming the runtime and where it was looked for, however many
// agents run on it, with no source block for the implicit runtime, and
// once it is reported nothing more is asked of it. Before this, the
// refresh and every agent's plan each gave the same error.
func TestUnreachableRuntimeOneError(t *testing.T) {
	b := newBench(t)
	b.write(`
agent "a" {
  image = "x:1"
}
agent "b" {
  image = "x:1"
}
agent "c" {
  image = "x:1"
}
`)
	b.apply(planner.Options{}) // a lineage, so the plan refreshes too

	for _, tc := range []struct {
		name    string
		refresh bool
	}{{"with a state", true}, {"fresh", false}} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, diags := lang.NewParser().LoadDir(b.dir)
			if diags.HasErrors() {
				t.Fatal(diags.Error())
			}
			scope, diags := cfg.NewScope(nil)
			if diags.HasErrors() {
				t.Fatal(diags.Error())
			}
			down := &downDriver{}
			factory := func(log hclog.Logger) (drivers.Driver, error) {
				inner, err := b.fake.Factory()(log)
				down.Driver = inner
				return down, err
			}
			rts, diags := planner.ConfigureRuntimes(context.Background(), cfg, scope, drivers.Registry{"docker": factory}, b.dir, nil)
			if diags.HasErrors() {
				t.Fatal(diags.Error())
			}
			store := b.open(true)
			defer store.Close()
			var st planner.StateReader = store
			if !tc.refresh {
				st = emptyState{}
			}
			p := &planner.Planner{Config: cfg, Scope: scope, Runtimes: rts, State: st}
			_, diags = p.Plan(context.Background())
			if len(diags) != 1 || !diags.HasErrors() {
				t.Fatalf("%d diagnostics, want exactly one error:\n%s", len(diags), diags.Error())
			}
			d := diags[0]
			if d.Summary != `Cannot reach runtime "default"` || !strings.Contains(d.Detail, "DOCKER_HOST=tcp://127.0.0.1:1") || d.Subject != nil {
				t.Errorf("diagnostic = %q / %q, subject %v; want one naming the runtime and its address, with no source", d.Summary, d.Detail, d.Subject)
			}
			if down.calls != 1 {
				t.Errorf("the runtime was asked %d times after it could not be reached, want once", down.calls)
			}
		})
	}
}

// emptyState is a state never applied: no lineage, no records.
type emptyState struct{}

func (emptyState) Lineage() string                  { return "" }
func (emptyState) Serial() uint64                   { return 0 }
func (emptyState) Records() ([]state.Record, error) { return nil, nil }
