package command

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"github.com/zclconf/go-cty/cty"
	"path/filepath"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/bottlefile/bottlefile/lang"
	"github.com/bottlefile/bottlefile/planner"
	"github.com/bottlefile/bottlefile/state"
)

// operation is a loaded configuration with its state and runtimes, ready
// to plan and, when the state is writable, to apply.
type operation struct {
	dir      string
	parser   *lang.Parser
	config   *lang.Config
	scope    *lang.Scope
	store    *state.Store
	runtimes planner.Runtimes
	// vars are the input variable values given (not defaults), for -out.
	vars map[string]cty.Value
	// planner made the last plan; apply asks it to resolve late values.
	planner *planner.Planner
}

// openOperation loads the Bottlefile in the working directory, opens the
// state (read-only for plan, locked for apply) and configures the runtimes.
// Nothing on any runtime changes.
func (m *Meta) openOperation(ctx context.Context, readOnly bool, lockTimeout time.Duration, in inputs) (*operation, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	dir, err := m.dir()
	if err != nil {
		return nil, append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Cannot find the working directory", Detail: err.Error()})
	}
	op := &operation{dir: dir, parser: lang.NewParser()}
	cfg, moreDiags := op.parser.LoadDir(m.loadDir())
	diags = append(diags, moreDiags...)
	if diags.HasErrors() {
		return op, diags
	}
	op.config = cfg
	vals, moreDiags := variableValues(op.parser, cfg, in)
	diags = append(diags, moreDiags...)
	if diags.HasErrors() {
		return op, diags
	}
	op.vars = vals
	scope, moreDiags := cfg.NewScope(vals)
	diags = append(diags, moreDiags...)
	if diags.HasErrors() {
		return op, diags
	}
	op.scope = scope

	store, err := state.Open(dir, state.Options{ReadOnly: readOnly, LockTimeout: lockTimeout})
	if err != nil {
		return op, append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Cannot open state", Detail: err.Error()})
	}
	op.store = store

	rts, moreDiags := planner.ConfigureRuntimes(ctx, cfg, scope, m.Registry, filepath.Join(dir, state.Dir), m.Log)
	diags = append(diags, moreDiags...)
	op.runtimes = rts
	return op, diags
}

func (op *operation) plan(ctx context.Context, m *Meta, opts planner.Options) (*planner.Plan, hcl.Diagnostics) {
	op.planner = &planner.Planner{Config: op.config, Scope: op.scope, Runtimes: op.runtimes, State: op.store, Log: m.Log, Options: opts}
	return op.planner.Plan(ctx)
}

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
	if op == nil || op.parser == nil {
		return nil
	}
	return op.parser.Files()
}

// configHashes maps each configuration file's name to its content hash, so
// a saved plan can tell whether the configuration changed.
func (op *operation) configHashes() map[string]string {
	out := map[string]string{}
	for name, f := range op.parser.Files() {
		sum := sha256.Sum256(f.Bytes)
		out[filepath.Base(name)] = hex.EncodeToString(sum[:])
	}
	return out
}
