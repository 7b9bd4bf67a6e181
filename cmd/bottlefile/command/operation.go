package command

import (
	"context"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/bottlefile/bottlefile/lang"
	"github.com/bottlefile/bottlefile/operations"
	"github.com/bottlefile/bottlefile/planner"
	"github.com/bottlefile/bottlefile/state"
)

// operation is operations.Operation under the names plan, apply, graph,
// output and logs still use; new commands use operations directly, and
// this goes once those have moved onto it.
type operation struct {
	op       *operations.Operation
	dir      string
	parser   *lang.Parser
	config   *lang.Config
	scope    *lang.Scope
	store    *state.Store
	runtimes planner.Runtimes
	vars     map[string]cty.Value
	planner  *planner.Planner
}

// open loads the Bottlefile in the working directory, opens the state
// (read-only, or locked for writing) and configures the runtimes.
func (m *Meta) open(ctx context.Context, readOnly bool, lockTimeout time.Duration, in inputs) (*operations.Operation, hcl.Diagnostics) {
	dir, err := m.dir()
	if err != nil {
		return nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Cannot find the working directory", Detail: err.Error()}}
	}
	return operations.Open(ctx, operations.Request{
		Dir: dir, LoadDir: m.loadDir(), ReadOnly: readOnly, LockTimeout: lockTimeout,
		Registry: m.Registry, Log: m.Log,
		Values: func(p *lang.Parser, cfg *lang.Config) (map[string]cty.Value, hcl.Diagnostics) {
			return variableValues(p, cfg, in)
		},
	})
}

// openOperation is open for the commands not yet on operations.
func (m *Meta) openOperation(ctx context.Context, readOnly bool, lockTimeout time.Duration, in inputs) (*operation, hcl.Diagnostics) {
	o, diags := m.open(ctx, readOnly, lockTimeout, in)
	if o == nil {
		return nil, diags
	}
	return &operation{
		op: o, dir: o.Dir, parser: o.Parser, config: o.Config, scope: o.Scope,
		store: o.Store, runtimes: o.Runtimes, vars: o.Vars,
	}, diags
}

func (op *operation) plan(ctx context.Context, m *Meta, opts planner.Options) (*planner.Plan, hcl.Diagnostics) {
	p, diags := op.op.Plan(ctx, opts)
	op.planner = op.op.Planner
	return p, diags
}

// close releases what is still open: logs closes the store early, to
// release the lock while it follows.
func (op *operation) close() {
	if op == nil {
		return
	}
	op.runtimes.Close()
	if op.store != nil {
		op.store.Close()
	}
}

func (op *operation) files() map[string]*hcl.File {
	if op == nil {
		return nil
	}
	return op.op.Files()
}

func (op *operation) configHashes() map[string]string { return op.op.ConfigHashes() }
