package operations

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"path/filepath"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/bottlefile/bottlefile/executor"
	"github.com/bottlefile/bottlefile/lang"
	"github.com/bottlefile/bottlefile/planner"
	"github.com/bottlefile/bottlefile/policy"
	"github.com/bottlefile/bottlefile/state"
)

// Request says which configuration to open, and how.
type Request struct {
	// Dir is the Bottlefile's directory as an absolute path: the state
	// lives below it. LoadDir is the same directory as the parser is given
	// it ("." for the working directory, so diagnostics name "Bottlefile").
	Dir, LoadDir string
	// ReadOnly opens the state with a shared lock (plan); otherwise it is
	// locked for writing (apply), waiting up to LockTimeout.
	ReadOnly bool
	// Observe is for commands that only look at what runs (status, logs,
	// exec, egress denials): a required variable with no value is unknown
	// instead of an error (lang.NewPartialScope), so a sensitive key is
	// not needed to read a log. Implies ReadOnly.
	Observe     bool
	LockTimeout time.Duration
	Registry    Registry
	Log         hclog.Logger
	// Inputs give the input variables' values (-var, -var-file, a saved
	// plan's); the BOTTLEFILE_VAR_ environment is read too.
	Inputs Inputs
	// Clock is the operation's and its planner's "now" (Operation.Clock);
	// time.Now when nil.
	Clock func() time.Time
}

// Operation is a loaded configuration with its state and runtimes, ready
// to plan and, when the state is writable, to apply.
type Operation struct {
	Dir    string
	Parser *lang.Parser
	Config *lang.Config
	Scope  *lang.Scope
	Store  *state.Store
	// Runtimes are configured, not contacted: opening changes nothing.
	Runtimes planner.Runtimes
	// Vars are the input variable values given (not defaults), for -out.
	Vars map[string]cty.Value
	// Planner made the last plan; Apply asks it to resolve late values.
	Planner *planner.Planner
	// OutputChanges are how the last plan changes the outputs.
	OutputChanges []OutputChange
	Log           hclog.Logger
	// Clock is what "now" is to the operation and its planner (status's
	// denials of the last hour, a saved log's name, snapshot max_age);
	// time.Now when nil. Tests fix it.
	Clock func() time.Time

	// registry is every driver there is (Request.Registry).
	registry Registry

	// released is the lineage once ReleaseState closed the store.
	released string
}

// now is the operation's clock.
func (op *Operation) now() time.Time {
	if op.Clock != nil {
		return op.Clock()
	}
	return time.Now()
}

// Open loads the Bottlefile, opens the state and configures the runtimes.
// Nothing on any runtime changes. It returns the operation even with
// errors, so that the caller can render diagnostics against its files and
// Close it.
func Open(ctx context.Context, req Request) (*Operation, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	log := req.Log
	if log == nil {
		log = hclog.NewNullLogger()
	}
	op := &Operation{Dir: req.Dir, Parser: lang.NewParser(), Log: log, registry: req.Registry, Clock: req.Clock}
	cfg, moreDiags := op.Parser.LoadDir(req.LoadDir)
	diags = append(diags, moreDiags...)
	if diags.HasErrors() {
		return op, diags
	}
	op.Config = cfg
	vals, moreDiags := variableValues(op.Parser, cfg, req.Inputs)
	diags = append(diags, moreDiags...)
	if diags.HasErrors() {
		return op, diags
	}
	op.Vars = vals
	newScope := cfg.NewScope
	if req.Observe {
		newScope = cfg.NewPartialScope
	}
	scope, moreDiags := newScope(vals)
	diags = append(diags, moreDiags...)
	if diags.HasErrors() {
		return op, diags
	}
	op.Scope = scope

	pg, moreDiags := stateBackend(cfg, scope)
	diags = append(diags, moreDiags...)
	if diags.HasErrors() {
		return op, diags
	}
	store, err := state.Open(req.Dir, state.Options{ReadOnly: req.ReadOnly || req.Observe, LockTimeout: req.LockTimeout, PG: pg})
	if err != nil {
		return op, append(diags, errorDiag("Cannot open state", err.Error()))
	}
	op.Store = store
	for _, w := range store.Warnings() {
		diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagWarning, Summary: "State used from another directory", Detail: w})
	}

	rts, moreDiags := planner.ConfigureRuntimes(ctx, cfg, scope, req.Registry, filepath.Join(req.Dir, state.Dir), log)
	diags = append(diags, moreDiags...)
	op.Runtimes = rts
	// The operator's egress policy bounds every runtime, whatever the
	// configuration declares.
	pol, moreDiags := policy.Load()
	diags = append(diags, moreDiags...)
	diags = append(diags, planner.ApplyPolicy(cfg, rts, pol)...)
	return op, diags
}

// Plan plans with the given options against the configuration, the state
// and what is live.
// It sets OutputChanges.
func (op *Operation) Plan(ctx context.Context, opts planner.Options) (*planner.Plan, hcl.Diagnostics) {
	var before map[string]cty.Value
	if op.Config != nil && len(op.Config.Outputs) > 0 && op.Store != nil {
		if records, err := op.Store.Records(); err == nil {
			planner.SetKnown(op.Scope, records)
			before = op.outputValues()
		}
	}
	op.Planner = &planner.Planner{Config: op.Config, Scope: op.Scope, Runtimes: op.Runtimes, State: op.Store, Log: op.Log, Options: opts, Registry: op.registry, Clock: op.Clock}
	p, diags := op.Planner.Plan(ctx)
	if p != nil && before != nil {
		op.OutputChanges = outputChanges(op.Config.OutputNames(), before, op.outputValues(), opts.Destroy)
	}
	if p != nil && !diags.HasErrors() && !opts.NoRefresh {
		op.whatIf(ctx, p)
	}
	return p, withSuggestions(diags)
}

// ApplyOptions tune Apply.
type ApplyOptions struct {
	// Parallelism caps the actions run at once; 0 is the executor's default.
	Parallelism int
	// Hook observes each step (progress output).
	Hook executor.Hook
	// Abandon, when done, gives up steps already running (a second Ctrl-C).
	Abandon context.Context
	// Wait is how long a workload is watched for an early exit after it is
	// started (DefaultWait when zero; negative: not at all).
	Wait time.Duration
}

// DefaultWait is how long apply watches a workload it started for
// an early exit, when -wait is not given, counted from the engine's own
// time of the start. Long enough for what fails at once, short enough not
// to be a flat cost on every apply: the last workload started is watched
// after everything else is done, so this is added to an apply's time (at
// 10 bottles, 3 s here made apply 1.8 times the docker CLI's, and 500 ms
// was a quarter of what remained, issue 28).
//
// bench/early-exit.sh measured it on a 2-core machine at load 22-26: a
// command that is not there (127 through tini), sh -c 'exit 3' and a
// shell entrypoint failing at its first check show on the engine a median
// 43-52 ms after StartedAt, 217 ms at worst of 90; of applies of each,
// -wait=150ms and -wait=250ms caught 90 of 90 and 126 of 126, while 100ms
// missed 2 of 36 and 50ms 2 of 36. A workload that needs longer to prove
// itself declares a healthcheck, which apply waits for whatever this is.
const DefaultWait = 250 * time.Millisecond

// Apply performs a plan made by Plan, recording each step in the state.
// Once ctx is done no new step starts.
func (op *Operation) Apply(ctx context.Context, p *planner.Plan, o ApplyOptions) (executor.Result, hcl.Diagnostics) {
	lineage, err := op.Store.Init()
	if err != nil {
		return executor.Result{}, hcl.Diagnostics{errorDiag("Cannot write state", err.Error())}
	}
	var hook executor.Hook = executor.NilHook{}
	if o.Hook != nil {
		hook = o.Hook
	}
	ex := &executor.Executor{
		State: op.Store, Lineage: lineage, Runtimes: op.Runtimes,
		// Each workload's log is saved before it is removed.
		Parallelism: o.Parallelism, Hook: logSaver{Hook: hook, op: op, lineage: lineage}, Log: op.Log, Abandon: o.Abandon,
		Resolver: op.Planner, Wait: o.Wait, Clock: op.Clock,
	}
	if ex.Wait == 0 {
		ex.Wait = DefaultWait
	}
	res, diags := ex.Apply(ctx, p)
	diags = append(diags, op.forgetGoneBottles(lineage, p)...)
	return res, diags
}

// Close releases the state lock and the runtimes. It may be called on a
// nil or half-opened operation.
func (op *Operation) Close() {
	if op == nil {
		return
	}
	op.Runtimes.Close()
	if op.Store != nil {
		op.Store.Close()
	}
}

// Files are the configuration's files, for diagnostics with snippets.
func (op *Operation) Files() map[string]*hcl.File {
	if op == nil || op.Parser == nil {
		return nil
	}
	return op.Parser.Files()
}

// ConfigHashes maps each configuration file's name to its content hash, so
// a saved plan can tell whether the configuration changed.
func (op *Operation) ConfigHashes() map[string]string {
	out := map[string]string{}
	for name, f := range op.Parser.Files() {
		sum := sha256.Sum256(f.Bytes)
		out[filepath.Base(name)] = hex.EncodeToString(sum[:])
	}
	return out
}

func errorDiag(summary, detail string) *hcl.Diagnostic {
	return &hcl.Diagnostic{Severity: hcl.DiagError, Summary: summary, Detail: detail}
}
