package planner_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/zclconf/go-cty/cty"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/drivertest"
	"github.com/bottlefile/bottlefile/executor"
	"github.com/bottlefile/bottlefile/lang"
	"github.com/bottlefile/bottlefile/planner"
	"github.com/bottlefile/bottlefile/policy"
	"github.com/bottlefile/bottlefile/state"
)

// bench is a Bottlefile directory with its state, planned and applied in
// process against the fake driver as runtime "default".
type bench struct {
	t    *testing.T
	dir  string
	fake *drivertest.Fake
	// clock is what the fake stamps on snapshots it takes: a minute later
	// each time, from a fixed day.
	clock time.Time
	// last is the planner of the last plan, which resolves late values.
	last *planner.Planner
	// wrap, when set, wraps the fake in another driver for plans and
	// applies.
	wrap func(drivers.Driver) drivers.Driver
	// policy is the operator's egress policy plans run under; nil for none.
	policy *policy.Policy
	// now, when set, is the planner's Clock.
	now func() time.Time
}

func newBench(t *testing.T) *bench {
	b := &bench{t: t, dir: t.TempDir(), fake: &drivertest.Fake{DriverName: "docker"}, clock: time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)}
	b.fake.Now = func() time.Time { b.clock = b.clock.Add(time.Minute); return b.clock }
	return b
}

// write makes src the Bottlefile.
func (b *bench) write(src string) {
	b.t.Helper()
	if err := os.WriteFile(filepath.Join(b.dir, "Bottlefile"), []byte(src), 0o644); err != nil {
		b.t.Fatal(err)
	}
}

// plan plans the Bottlefile with opts; it fails the test on error
// diagnostics.
func (b *bench) plan(opts planner.Options) *planner.Plan {
	b.t.Helper()
	p, err := b.tryPlan(opts)
	if err != "" {
		b.t.Fatalf("plan: %s", err)
	}
	return p
}

// tryPlan plans and returns the error diagnostics as one string.
func (b *bench) tryPlan(opts planner.Options) (*planner.Plan, string) {
	b.t.Helper()
	cfg, diags := lang.NewParser().LoadDir(b.dir)
	if diags.HasErrors() {
		return nil, diags.Error()
	}
	scope, diags := cfg.NewScope(nil)
	if diags.HasErrors() {
		return nil, diags.Error()
	}
	store := b.open(true)
	defer store.Close()
	ctx := context.Background()
	factory := b.fake.Factory()
	if b.wrap != nil {
		factory = func(log hclog.Logger) (drivers.Driver, error) {
			d, err := b.fake.Factory()(log)
			if err != nil {
				return nil, err
			}
			return b.wrap(d), nil
		}
	}
	rts, diags := planner.ConfigureRuntimes(ctx, cfg, scope, drivers.Registry{"docker": factory}, b.dir, nil)
	if diags.HasErrors() {
		return nil, diags.Error()
	}
	if diags := planner.ApplyPolicy(cfg, rts, b.policy); diags.HasErrors() {
		return nil, diags.Error()
	}
	b.last = &planner.Planner{Config: cfg, Scope: scope, Runtimes: rts, State: store, Options: opts, Clock: b.now}
	p, diags := b.last.Plan(ctx)
	if diags.HasErrors() {
		return nil, diags.Error()
	}
	return p, ""
}

// apply plans with opts and applies the plan; it fails the test when
// either fails.
func (b *bench) apply(opts planner.Options) *planner.Plan {
	b.t.Helper()
	p := b.plan(opts)
	store := b.open(false)
	defer store.Close()
	lineage, err := store.Init()
	if err != nil {
		b.t.Fatal(err)
	}
	ex := &executor.Executor{State: store, Lineage: lineage, Runtimes: b.last.Runtimes, Parallelism: 10, Resolver: b.last}
	if _, diags := ex.Apply(context.Background(), p); diags.HasErrors() {
		b.t.Fatalf("apply:\n%s\n%s", p, diags.Error())
	}
	return p
}

func (b *bench) open(readOnly bool) *state.Store {
	b.t.Helper()
	s, err := state.Open(b.dir, state.Options{ReadOnly: readOnly})
	if err != nil {
		b.t.Fatal(err)
	}
	return s
}

func (b *bench) lineage() string {
	s := b.open(true)
	defer s.Close()
	return s.Lineage()
}

// records is the state's records by address.
func (b *bench) records() map[string]state.Record {
	s := b.open(true)
	defer s.Close()
	rs, err := s.Records()
	if err != nil {
		b.t.Fatal(err)
	}
	out := map[string]state.Record{}
	for _, r := range rs {
		out[r.Addr] = r
	}
	return out
}

// live is the addresses of what the fake has for this lineage, sorted.
func (b *bench) live() []string {
	var out []string
	for _, o := range b.fake.Objects(b.lineage()) {
		out = append(out, o.Addr)
	}
	return out
}

// change is the plan's change at addr, or nil.
func change(p *planner.Plan, addr string) *planner.Change {
	for _, c := range p.Changes {
		if c.Addr == addr {
			return c
		}
	}
	return nil
}

// pending is the plan's String without its no-ops.
func pending(p *planner.Plan) string {
	var lines []string
	for _, l := range strings.Split(p.String(), "\n") {
		if l != "" && !strings.HasPrefix(l, "  ") {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, "\n")
}

// ctyMap is a map(string) of key, value pairs.
func ctyMap(kv ...string) cty.Value {
	m := map[string]cty.Value{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = cty.StringVal(kv[i+1])
	}
	return cty.MapVal(m)
}
