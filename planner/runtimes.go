package planner

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/egress"
	"github.com/bottlefile/bottlefile/lang"
	"github.com/bottlefile/bottlefile/policy"
)

// Runtime is one configured runtime block and the driver instance serving it.
type Runtime struct {
	Name   string
	Driver drivers.Driver
	// Ceiling is the runtime's egress_ceiling, a list of egress rules, or
	// null: no agent on the runtime may allow beyond it.
	Ceiling cty.Value
	// Policy is the operator's egress policy (ApplyPolicy), nil for none:
	// it bounds the runtime's ceiling and every agent on it.
	Policy *policy.Policy
	// Engine is the identity of the engine the runtime reaches
	// (drivers.EngineIdentifier), once a plan has asked; "" when unknown.
	// Read it through EngineIdentity: a refresh may go on without it.
	Engine string
	// engineDone, when not nil, is closed once a refresh that did not
	// wait for Engine has set it.
	engineDone chan struct{}
}

// EngineIdentity is Engine, waiting for a refresh that went on without it.
func (r *Runtime) EngineIdentity() string {
	if r.engineDone != nil {
		<-r.engineDone
	}
	return r.Engine
}

// identifyLater asks the runtime's driver for its engine's identity in
// the background; EngineIdentity waits for the answer.
func (r *Runtime) identifyLater(ctx context.Context, log hclog.Logger) {
	r.EngineIdentity() // an earlier refresh's, before Engine is written again
	id, ok := drivers.As[drivers.EngineIdentifier](r.Driver)
	if !ok {
		r.Engine, r.engineDone = "", nil
		return
	}
	done := make(chan struct{})
	r.engineDone = done
	go func() {
		defer close(done)
		r.Engine = ""
		if e, err := id.EngineID(ctx); err == nil {
			r.Engine = e
		} else if log != nil {
			log.Debug("cannot tell the runtime's engine", "runtime", r.Name, "error", err)
		}
	}()
}

// EffectiveCeiling is the ceiling the runtime's agents' gateways get, in
// canonical form: the runtime's egress_ceiling (which ApplyPolicy checked
// lies within the policy), else the policy's; nil for none.
func (r *Runtime) EffectiveCeiling() []string {
	if c, _ := r.Ceiling.UnmarkDeep(); c != cty.NilVal && !c.IsNull() && c.IsWhollyKnown() {
		if strs, err := drivers.Strings(c); err == nil {
			if rules, err := egress.ParseRules(strs); err == nil {
				out := make([]string, len(rules))
				for i, r := range rules {
					out[i] = r.String()
				}
				return out
			}
		}
	}
	return r.Policy.CeilingStrings()
}

// ApplyPolicy puts every configured runtime under the operator's egress
// policy pol (nil: none), declared now or later: a runtime's
// egress_ceiling may only narrow it. A ceiling rule the policy does not
// cover is an error on that rule, naming the policy's file.
func ApplyPolicy(cfg *lang.Config, rts Runtimes, pol *policy.Policy) hcl.Diagnostics {
	var diags hcl.Diagnostics
	for _, name := range cfg.RuntimeNames() {
		rt, ok := rts[name]
		if !ok {
			continue
		}
		rt.Policy = pol
		diags = append(diags, CheckRuntimeCeiling(cfg.Runtimes[name], rt.Ceiling, pol)...)
	}
	return diags
}

// CheckRuntimeCeiling refuses each rule of a runtime's evaluated
// egress_ceiling that the operator's policy does not cover: a runtime can
// narrow the policy, never widen it.
func CheckRuntimeCeiling(rt *lang.Runtime, ceiling cty.Value, pol *policy.Policy) hcl.Diagnostics {
	if !pol.HasCeiling() || ceiling == cty.NilVal || rt.EgressCeiling == nil {
		return nil
	}
	c, _ := ceiling.UnmarkDeep()
	if c.IsNull() || !c.IsWhollyKnown() {
		return nil
	}
	strs, err := drivers.Strings(c)
	if err != nil {
		return nil
	}
	exprs, moreDiags := hcl.ExprList(rt.EgressCeiling.Expr)
	var diags hcl.Diagnostics
	for i, s := range strs {
		r, err := egress.ParseRule(s)
		if err != nil || egress.Covered(pol.Ceiling, r) {
			continue
		}
		subject := rt.EgressCeiling.Expr.Range()
		if !moreDiags.HasErrors() && len(exprs) == len(strs) {
			subject = exprs[i].Range()
		}
		diags = append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Runtime ceiling wider than the operator's egress policy",
			Detail:   fmt.Sprintf("Runtime %q: egress_ceiling rule %q lies outside the egress policy the operator set in %s (%s). A runtime's egress_ceiling can only narrow that policy; remove the rule or narrow it.", rt.Name, s, pol.Source, strings.Join(pol.CeilingStrings(), ", ")),
			Subject:  subject.Ptr(),
		})
	}
	return diags
}

// Runtimes are the configured runtimes by name.
type Runtimes map[string]*Runtime

// Close releases every driver that holds connections.
func (rs Runtimes) Close() {
	for _, r := range rs {
		if c, ok := drivers.As[drivers.Closer](r.Driver); ok {
			c.Close()
		}
	}
}

// ConfigureRuntimes makes and configures one driver per runtime block,
// decoding each block's driver-specific attributes against the schema the
// driver declares. It changes nothing on any runtime.
func ConfigureRuntimes(ctx context.Context, cfg *lang.Config, scope *lang.Scope, reg drivers.Registry, stateDir string, log hclog.Logger) (Runtimes, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	out := Runtimes{}
	names := make([]string, 0, len(cfg.Runtimes))
	for name := range cfg.Runtimes {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		rt := cfg.Runtimes[name]
		factory, ok := reg[rt.Driver]
		if !ok {
			diags = append(diags, UnknownDriver(rt, reg))
			continue
		}
		d, err := factory(log)
		if err != nil {
			diags = append(diags, errorDiag(fmt.Sprintf("Cannot start the %s driver", rt.Driver), err.Error(), rt.DeclRange.Ptr()))
			continue
		}
		val, moreDiags := scope.EvalRuntime(rt, d.Declare().Schema.Runtime)
		diags = append(diags, moreDiags...)
		ceiling, ceilDiags := scope.EvalEgressCeiling(rt)
		diags = append(diags, ceilDiags...)
		if moreDiags.HasErrors() || ceilDiags.HasErrors() {
			continue
		}
		req := drivers.ConfigureRequest{Runtime: name, Config: val, StateDir: stateDir, Dir: cfg.BaseDir()}
		if moreDiags := CheckRuntime(rt, d.Declare().Schema, req); moreDiags.HasErrors() {
			diags = append(diags, moreDiags...)
			continue
		}
		if err := d.Configure(ctx, req); err != nil {
			summary := fmt.Sprintf("Cannot configure runtime %q", name)
			subject := runtimeRange(cfg, name)
			var ue *drivers.UnreachableError
			var ae *drivers.AttributeError
			switch {
			case errors.As(err, &ue):
				summary = fmt.Sprintf("Cannot reach runtime %q", name)
			case errors.As(err, &ae):
				if r, ok := rt.AttrRange(ae.Attribute); ok {
					subject = r.Ptr()
				}
			}
			diags = append(diags, errorDiag(summary, err.Error(), subject))
			continue
		}
		out[name] = &Runtime{Name: name, Driver: d, Ceiling: ceiling}
	}
	return out, diags
}

// CheckRuntime runs the driver's own check of a decoded runtime block
// (Schema.CheckRuntime), which contacts nothing: one error per attribute
// it refuses, on that attribute.
func CheckRuntime(rt *lang.Runtime, schema drivers.Schema, req drivers.ConfigureRequest) hcl.Diagnostics {
	if schema.CheckRuntime == nil {
		return nil
	}
	var diags hcl.Diagnostics
	for _, ae := range schema.CheckRuntime(req) {
		subject := rt.DeclRange.Ptr()
		if r, ok := rt.AttrRange(ae.Attribute); ok {
			subject = r.Ptr()
		}
		if rt.Implicit {
			subject = nil
		}
		diags = append(diags, errorDiag(fmt.Sprintf("Invalid %s", ae.Attribute), fmt.Sprintf("Runtime %q: %s.", rt.Name, ae), subject))
	}
	return diags
}

// UnknownDriver is the error for a runtime whose driver is not in the
// registry, on its driver attribute.
func UnknownDriver(rt *lang.Runtime, reg drivers.Registry) *hcl.Diagnostic {
	subject := rt.DriverRange
	if subject.Filename == "" {
		subject = rt.DeclRange
	}
	return &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  "Unknown driver",
		Detail:   fmt.Sprintf("Runtime %q uses driver %q; the drivers are %s.", rt.Name, rt.Driver, driverNames(reg)),
		Subject:  subject.Ptr(),
	}
}

func driverNames(reg drivers.Registry) string {
	names := make([]string, 0, len(reg))
	for n := range reg {
		names = append(names, fmt.Sprintf("%q", n))
	}
	sort.Strings(names)
	if len(names) == 0 {
		return "none"
	}
	s := names[0]
	for _, n := range names[1:] {
		s += ", " + n
	}
	return s
}

func errorDiag(summary, detail string, subject *hcl.Range) *hcl.Diagnostic {
	return &hcl.Diagnostic{Severity: hcl.DiagError, Summary: summary, Detail: detail, Subject: subject}
}
