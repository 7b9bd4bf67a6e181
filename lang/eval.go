package lang

import (
	"fmt"
	"math"
	"math/big"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/ext/typeexpr"
	"github.com/hashicorp/hcl/v2/hcldec"
	"github.com/zclconf/go-cty/cty"

	"github.com/bottlefile/bottlefile/units"
	"github.com/zclconf/go-cty/cty/convert"
)

// AgentValue is an agent evaluated. Values may be unknown (they depend on
// something known only after apply) and keep their Sensitive marks.
type AgentValue struct {
	// Workload is an object with one attribute per row of the workload
	// schema (workload.go), each converted to its type and checked, null
	// when absent: memory is a number of bytes; build is null or an object
	// with an absolute context and a dockerfile ("Dockerfile" by default);
	// egress is the allow list, null without an egress block (the agent
	// reaches nothing outside its bottle, as with an empty list).
	Workload cty.Value

	Sidecars       []SidecarValue       // in declaration order
	SnapshotPolicy *SnapshotPolicyValue // nil without a snapshot_policy block
	Idle           *IdleValue           // nil without an idle block
	Resume         bool                 // boot a re-created agent from its newest snapshot; default true
	// Workspace are the paths that are the agent's work (absolute, clean,
	// each once): when its image changes, the new image boots with them
	// carried over. Known at plan time; nil when not declared.
	Workspace []string
}

// SidecarValue is a sidecar evaluated, like AgentValue.
type SidecarValue struct {
	Name     string
	Workload cty.Value
}

// SnapshotPolicyValue is a snapshot_policy block evaluated. Its values are
// known at plan time.
type SnapshotPolicyValue struct {
	Before   []string      // agent actions preceded by a snapshot: "replace", "destroy", "migrate"
	KeepLast int           // keep this many policy snapshots; 0 keeps all
	MaxAge   time.Duration // prune policy snapshots older than this; 0 keeps them
	// MaxTotalSize prunes the oldest policy snapshots until the sizes of
	// those kept add up to no more than this many bytes; 0 has no limit.
	MaxTotalSize int64
	// Every takes a snapshot this long after the last one (bottlefile
	// tick); 0 takes none on time.
	Every time.Duration
}

// IdleValue is an idle block evaluated: how long an agent may go unused
// before bottlefile tick stops it, and before it archives it. 0 is never.
type IdleValue struct {
	StopAfter, ArchiveAfter time.Duration
}

// SnapshotValue is a snapshot block evaluated.
type SnapshotValue struct {
	Description cty.Value // string, or null
	Triggers    cty.Value // map(string), or null
}

// SnapshotActions are the agent actions snapshot_policy.before may name.
var SnapshotActions = []string{"replace", "destroy", "migrate"}

var listOfString = cty.List(cty.String)
var mapOfString = cty.Map(cty.String)

// EvalAgent evaluates an agent's expressions and checks their values.
func (s *Scope) EvalAgent(a *Agent) (AgentValue, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	s.mu.Lock()
	defer s.mu.Unlock()

	ctx, moreDiags := s.evalContext(a.refs(), nil)
	diags = append(diags, moreDiags...)
	a.instanceVars(ctx)

	w, moreDiags := s.evalWorkload(ctx, &a.Workload)
	diags = append(diags, moreDiags...)
	av := AgentValue{Workload: w, Resume: true}
	for _, sc := range a.Sidecars {
		w, moreDiags := s.evalWorkload(ctx, &sc.Workload)
		diags = append(diags, moreDiags...)
		av.Sidecars = append(av.Sidecars, SidecarValue{Name: sc.Name, Workload: w})
	}

	if a.Resume != nil {
		v, ok, moreDiags := s.evalKnown(ctx, a.Resume, "resume", cty.Bool)
		diags = append(diags, moreDiags...)
		if ok {
			av.Resume = v.True()
		}
		if !av.Resume && a.FromSnapshot != "" {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Conflicting resume and from_snapshot",
				Detail:   "from_snapshot pins the snapshot the agent boots from, but resume = false says it never boots from one. Remove one of them.",
				Subject:  a.Resume.Range().Ptr(),
			})
		}
	}
	if a.Workspace != nil {
		ws, moreDiags := s.evalWorkspace(ctx, a.Workspace)
		diags = append(diags, moreDiags...)
		av.Workspace = ws
	}
	if a.SnapshotPolicy != nil {
		p, moreDiags := s.evalSnapshotPolicy(ctx, a.SnapshotPolicy)
		diags = append(diags, moreDiags...)
		av.SnapshotPolicy = p
	}
	if a.Idle != nil {
		iv := &IdleValue{}
		var moreDiags hcl.Diagnostics
		iv.StopAfter, moreDiags = s.evalDuration(ctx, a.Idle.StopAfter, "stop_after", "how long the agent may go unused before bottlefile tick stops it")
		diags = append(diags, moreDiags...)
		iv.ArchiveAfter, moreDiags = s.evalDuration(ctx, a.Idle.ArchiveAfter, "archive_after", "how long the agent may go unused before bottlefile tick archives it")
		diags = append(diags, moreDiags...)
		av.Idle = iv
	}
	return av, s.redact.redact(diags)
}

// EvalSnapshot evaluates a snapshot block's expressions.
func (s *Scope) EvalSnapshot(sn *Snapshot) (SnapshotValue, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	s.mu.Lock()
	defer s.mu.Unlock()
	ctx, moreDiags := s.evalContext(exprRefs(sn.Description, sn.Triggers), nil)
	diags = append(diags, moreDiags...)
	sn.instanceVars(ctx)
	var sv SnapshotValue
	sv.Description, moreDiags = s.evalAttr(ctx, sn.Description, "description", cty.String)
	diags = append(diags, moreDiags...)
	sv.Triggers, moreDiags = s.evalAttr(ctx, sn.Triggers, "triggers", mapOfString)
	diags = append(diags, moreDiags...)
	return sv, s.redact.redact(diags)
}

// EvalOutput evaluates an output's value. A value derived from a sensitive
// one is an error unless the output is declared sensitive; the value of a
// sensitive output is marked Sensitive as a whole.
func (s *Scope) EvalOutput(o *Output) (cty.Value, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	if o.Value == nil {
		return cty.NullVal(cty.DynamicPseudoType), nil
	}
	if s.cfg.invalid[o.Value.Range()] {
		return cty.DynamicVal, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ctx, moreDiags := s.evalContext(exprRefs(o.Value), nil)
	diags = append(diags, moreDiags...)
	v, moreDiags := o.Value.Value(ctx)
	diags = append(diags, moreDiags...)
	if moreDiags.HasErrors() {
		v = cty.DynamicVal
	}
	if unset := s.unsetIn(o.Value, map[string]bool{}); len(unset) > 0 && !moreDiags.HasErrors() && !v.IsWhollyKnown() {
		// A partial scope (output, as status): an output that needs a
		// variable given no value says which, rather than "not known yet".
		diags = append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "No value for a variable the output needs",
			Detail: fmt.Sprintf("Output %q is derived from %s, given no value; give it as for plan: -var, a -var-file, or the environment variable %s%s.",
				o.Name, strings.Join(unset, ", "), EnvVarPrefix, strings.TrimPrefix(unset[0], "var.")),
			Subject: o.Value.Range().Ptr(),
			Extra:   UnsetVariables(unset),
		})
	}
	if o.Sensitive {
		v = v.Mark(Sensitive)
	} else if IsSensitive(v) {
		diags = append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Output refers to sensitive values",
			Detail:   fmt.Sprintf("The value of output %q is derived from a sensitive value, so it would be shown in plain text. Set sensitive = true in the output block if that is intended.", o.Name),
			Subject:  o.Value.Range().Ptr(),
		})
	}
	return v, s.redact.redact(diags)
}

// UnsetVariables is the Extra of the error for an output that needs
// variables a partial scope left unknown: their addresses.
type UnsetVariables []string

// unsetIn names the variables a partial scope left unknown (var.NAME,
// sorted) that expr refers to, directly or through locals.
func (s *Scope) unsetIn(expr hcl.Expression, seen map[string]bool) []string {
	if len(s.unset) == 0 {
		return nil
	}
	var out []string
	for _, ref := range exprRefs(expr) {
		if seen[ref.addr] {
			continue
		}
		seen[ref.addr] = true
		switch ref.kind {
		case refVar:
			if slices.Contains(s.unset, ref.name) {
				out = append(out, ref.addr)
			}
		case refLocal:
			if l, ok := s.cfg.Locals[ref.name]; ok {
				out = append(out, s.unsetIn(l.Expr, seen)...)
			}
		}
	}
	slices.Sort(out)
	return out
}

// EvalRuntime decodes a runtime's driver-specific attributes with the
// driver's spec. They may refer to variables and locals.
func (s *Scope) EvalRuntime(r *Runtime, spec hcldec.Spec) (cty.Value, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	s.mu.Lock()
	defer s.mu.Unlock()
	ctx, moreDiags := s.evalContext(r.refs(), nil)
	diags = append(diags, moreDiags...)
	body := r.Config
	if body == nil {
		body = hcl.EmptyBody()
	}
	v, moreDiags := hcldec.Decode(body, spec, ctx)
	diags = append(diags, moreDiags...)
	if len(s.unset) > 0 && !moreDiags.HasErrors() && !v.IsWhollyKnown() {
		names := make([]string, len(s.unset))
		for i, n := range s.unset {
			names[i] = "var." + n
		}
		diags = append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "No value for a variable the runtime needs",
			Detail: fmt.Sprintf("Runtime %q is configured from a variable that was given no value (%s); this command needs it to reach the runtime: -var, a -var-file, or the environment variable %sNAME.",
				r.Name, strings.Join(names, ", "), EnvVarPrefix),
			Subject: r.DeclRange.Ptr(),
		})
	}
	return v, s.redact.redact(diags)
}

// EvalAgentDriver decodes the agent's driver block against spec, the
// per-agent schema its runtime's driver declares (driver names it). With
// no block, the spec decodes an empty body. A driver that declares no
// per-agent settings (an empty spec) takes no driver block. offeredBy,
// when not nil, names the drivers that have a setting, so that one the
// agent's driver lacks says which runtime it needs ("placement needs a
// swarm runtime").
func (s *Scope) EvalAgentDriver(a *Agent, driver string, spec hcldec.ObjectSpec, offeredBy func(setting string) []string) (cty.Value, hcl.Diagnostics) {
	if a.Driver != nil && offeredBy != nil {
		if diags := settingsElsewhere(a, driver, spec, offeredBy); len(diags) > 0 {
			return cty.NilVal, diags
		}
	}
	if len(spec) == 0 {
		if a.Driver != nil {
			return cty.NilVal, hcl.Diagnostics{{
				Severity: hcl.DiagError,
				Summary:  "Unsupported driver block",
				Detail:   fmt.Sprintf("%s runs on runtime %q, whose %s driver has no per-agent settings; remove the driver block, or run the agent on a runtime whose driver has the settings it holds.", a.Addr(), a.RuntimeName, driver),
				Subject:  a.Driver.DeclRange.Ptr(),
			}}
		}
		return cty.NilVal, nil
	}
	var diags hcl.Diagnostics
	s.mu.Lock()
	defer s.mu.Unlock()
	ctx, moreDiags := s.evalContext(a.refs(), nil)
	diags = append(diags, moreDiags...)
	a.instanceVars(ctx)
	body := hcl.EmptyBody()
	if a.Driver != nil {
		body = a.Driver.Body
	}
	v, moreDiags := hcldec.Decode(body, spec, ctx)
	diags = append(diags, moreDiags...)
	return v, s.redact.redact(diags)
}

// settingsElsewhere reports each attribute of the agent's driver block
// that its driver lacks and other drivers have, naming them, at the
// attribute.
func settingsElsewhere(a *Agent, driver string, spec hcldec.ObjectSpec, offeredBy func(string) []string) hcl.Diagnostics {
	attrs, _ := a.Driver.Body.JustAttributes()
	names := make([]string, 0, len(attrs))
	for name := range attrs {
		names = append(names, name)
	}
	sort.Strings(names)
	var diags hcl.Diagnostics
	for _, name := range names {
		if _, ok := spec[name]; ok {
			continue
		}
		others := offeredBy(name)
		if len(others) == 0 {
			continue
		}
		diags = append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  fmt.Sprintf("%s needs a %s runtime", titleFirst(name), strings.Join(others, " or ")),
			Detail: fmt.Sprintf("%s runs on runtime %q, whose %s driver has no %s setting: it is a setting of the %s driver. Run the agent on a runtime with driver = %q, or remove %s.",
				a.Addr(), a.RuntimeName, driver, name, strings.Join(others, " and "), others[0], name),
			Subject: attrs[name].NameRange.Ptr(),
		})
	}
	return diags
}

func titleFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// resolvePath makes a path from the configuration absolute, relative to its
// directory.
func (c *Config) resolvePath(p string) string {
	if c.fsys != nil {
		if path.IsAbs(p) {
			return path.Clean(p)
		}
		return path.Join(c.baseDir, filepath.ToSlash(p))
	}
	if filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	return filepath.Join(c.baseDir, p)
}

func (s *Scope) evalSnapshotPolicy(ctx *hcl.EvalContext, p *SnapshotPolicy) (*SnapshotPolicyValue, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	pv := &SnapshotPolicyValue{}
	if p.Before != nil {
		v, moreDiags := s.evalAttr(ctx, p.Before, "before", listOfString)
		diags = append(diags, moreDiags...)
		diags = append(diags, checkElements(v, p.Before, "before", nil)...)
		v = unmarkDeep(v)
		switch {
		case moreDiags.HasErrors():
		case !v.IsWhollyKnown():
			diags = append(diags, s.mustBeKnown("before", p.Before)...)
		case !v.IsNull():
			ranges := elementRanges(p.Before, v.LengthInt())
			seen := map[string]bool{}
			for i, e := range v.AsValueSlice() {
				if e.IsNull() {
					continue
				}
				act := e.AsString()
				if !contains(SnapshotActions, act) {
					diags = append(diags, &hcl.Diagnostic{
						Severity: hcl.DiagError,
						Summary:  "Invalid snapshot_policy action",
						Detail:   fmt.Sprintf("%q is not an action a snapshot can precede; use %s.", act, quotedList(SnapshotActions)),
						Subject:  ranges[i].Ptr(),
					})
					continue
				}
				if !seen[act] {
					seen[act] = true
					pv.Before = append(pv.Before, act)
				}
			}
		}
	}
	if p.KeepLast != nil {
		v, ok, moreDiags := s.evalKnown(ctx, p.KeepLast, "keep_last", cty.Number)
		diags = append(diags, moreDiags...)
		if ok {
			bf := v.AsBigFloat()
			n, acc := bf.Int64()
			if acc != big.Exact || n < 1 || n > math.MaxInt32 {
				diags = append(diags, &hcl.Diagnostic{
					Severity: hcl.DiagError,
					Summary:  "Invalid keep_last",
					Detail:   "keep_last is how many policy snapshots to keep: a whole number, 1 or more. Leave it out to keep them all.",
					Subject:  p.KeepLast.Range().Ptr(),
				})
			} else {
				pv.KeepLast = int(n)
			}
		}
	}
	if p.MaxAge != nil {
		v, ok, moreDiags := s.evalKnown(ctx, p.MaxAge, "max_age", cty.String)
		diags = append(diags, moreDiags...)
		if ok {
			d, err := ParseDuration(v.AsString())
			if err != nil {
				diags = append(diags, &hcl.Diagnostic{
					Severity: hcl.DiagError,
					Summary:  "Invalid max_age",
					Detail:   fmt.Sprintf("%s. max_age is a duration like \"720h\", \"30d\" or \"90m\", more than zero.", err),
					Subject:  p.MaxAge.Range().Ptr(),
				})
			} else {
				pv.MaxAge = d
			}
		}
	}
	if p.MaxTotalSize != nil {
		v, ok, moreDiags := s.evalKnown(ctx, p.MaxTotalSize, "max_total_size", cty.String)
		diags = append(diags, moreDiags...)
		if ok {
			n, err := units.ParseBytes(v.AsString())
			if err != nil {
				diags = append(diags, &hcl.Diagnostic{
					Severity: hcl.DiagError,
					Summary:  "Invalid max_total_size",
					Detail:   fmt.Sprintf("%s. max_total_size is how much the agent's policy snapshots may take together: a size like \"20GiB\" or \"500MiB\" (units are binary), more than zero.", err),
					Subject:  p.MaxTotalSize.Range().Ptr(),
				})
			} else {
				pv.MaxTotalSize = n
			}
		}
	}
	every, moreDiags := s.evalDuration(ctx, p.Every, "every", "how long after the last snapshot bottlefile tick takes the next")
	diags = append(diags, moreDiags...)
	pv.Every = every
	return pv, diags
}

// evalDuration evaluates a duration attribute known at plan time ("30m",
// "1h", "7d"); what says what it is, for the error. A nil expression is 0.
func (s *Scope) evalDuration(ctx *hcl.EvalContext, expr hcl.Expression, name, what string) (time.Duration, hcl.Diagnostics) {
	v, ok, diags := s.evalKnown(ctx, expr, name, cty.String)
	if !ok {
		return 0, diags
	}
	d, err := ParseDuration(v.AsString())
	if err != nil {
		return 0, append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Invalid " + name,
			Detail:   fmt.Sprintf("%s. %s is %s: a duration like \"30s\", \"90m\", \"1h\" or \"7d\", more than zero.", err, name, what),
			Subject:  expr.Range().Ptr(),
		})
	}
	return d, diags
}

// evalKnown evaluates an attribute that must be known when the plan is
// made, unmarked. ok says there is a value to use: not when the attribute
// is absent or null, fails, or is unknown (an error unless validating).
func (s *Scope) evalKnown(ctx *hcl.EvalContext, expr hcl.Expression, name string, ty cty.Type) (cty.Value, bool, hcl.Diagnostics) {
	v, diags := s.evalAttr(ctx, expr, name, ty)
	v = unmarkDeep(v)
	switch {
	case diags.HasErrors():
		return v, false, diags
	case !v.IsWhollyKnown():
		return v, false, append(diags, s.mustBeKnown(name, expr)...)
	}
	return v, !v.IsNull(), diags
}

// evalAttr evaluates an attribute's expression and converts it to ty. A nil
// expression is null; an expression that fails is unknown.
func (s *Scope) evalAttr(ctx *hcl.EvalContext, expr hcl.Expression, name string, ty cty.Type) (cty.Value, hcl.Diagnostics) {
	if expr == nil {
		return cty.NullVal(ty), nil
	}
	if s.cfg.invalid[expr.Range()] {
		return cty.UnknownVal(ty), nil
	}
	v, diags := expr.Value(ctx)
	diags = withExpr(diags, expr, ctx)
	if diags.HasErrors() {
		return cty.UnknownVal(ty), diags
	}
	cv, err := convertValue(v, ty)
	if err != nil {
		diags = append(diags, &hcl.Diagnostic{
			Severity:    hcl.DiagError,
			Summary:     "Incorrect attribute value type",
			Detail:      fmt.Sprintf("Inappropriate value for attribute %q: %s.", name, convertErrText(err)),
			Subject:     expr.Range().Ptr(),
			Expression:  expr,
			EvalContext: ctx,
		})
		return cty.UnknownVal(ty), diags
	}
	return cv, diags
}

// withExpr attaches the expression and context to diagnostics that have
// none, so renderers can show the values involved (never sensitive ones).
func withExpr(diags hcl.Diagnostics, expr hcl.Expression, ctx *hcl.EvalContext) hcl.Diagnostics {
	for _, d := range diags {
		if d.Expression == nil && d.Subject != nil && expr.Range().Overlaps(*d.Subject) {
			d.Expression, d.EvalContext = expr, ctx
		}
	}
	return diags
}

// mustBeKnown is the error for a value that must be known at plan time but
// depends on something known only after apply. While validating, variables
// are unknown too, so it is not an error then.
func (s *Scope) mustBeKnown(name string, expr hcl.Expression) hcl.Diagnostics {
	if s.validating {
		return nil
	}
	return hcl.Diagnostics{{
		Severity: hcl.DiagError,
		Summary:  fmt.Sprintf("Value of %s not known at plan time", name),
		Detail:   fmt.Sprintf("%s must be known when the plan is made, but it depends on a value that is known only after apply, such as an agent's id.", name),
		Subject:  expr.Range().Ptr(),
	}}
}

func convertValue(v cty.Value, ty cty.Type) (cty.Value, error) {
	return convert.Convert(v, ty)
}

func typeString(ty cty.Type) string {
	if ty == cty.DynamicPseudoType {
		return "any"
	}
	return typeexpr.TypeString(ty)
}

// checkString runs check on a known string value; a non-empty result is an
// error about the attribute.
func checkString(v cty.Value, expr hcl.Expression, name string, check func(string) string) hcl.Diagnostics {
	sensitive := IsSensitive(v)
	v = unmarkDeep(v)
	if expr == nil || !v.IsKnown() || v.IsNull() {
		return nil
	}
	if msg := check(v.AsString()); msg != "" {
		detail := msg
		if !sensitive {
			detail = fmt.Sprintf("%q is not a valid %s. %s", v.AsString(), name, msg)
		}
		return hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  fmt.Sprintf("Invalid %s", name),
			Detail:   detail,
			Subject:  expr.Range().Ptr(),
		}}
	}
	return nil
}

// checkElements reports null elements of a list or map, and, for a map,
// keys that checkKey rejects.
func checkElements(v cty.Value, expr hcl.Expression, name string, checkKey func(string) string) hcl.Diagnostics {
	var diags hcl.Diagnostics
	sensitive := IsSensitive(v)
	v = unmarkDeep(v)
	if expr == nil || !v.IsKnown() || v.IsNull() {
		return nil
	}
	isList := v.Type().IsListType()
	var ranges []hcl.Range
	if isList {
		ranges = elementRanges(expr, v.LengthInt())
	}
	i := 0
	for it := v.ElementIterator(); it.Next(); i++ {
		k, e := it.Element()
		subject := expr.Range()
		if isList {
			subject = ranges[i]
		}
		if !isList && checkKey != nil && k.IsKnown() {
			if msg := checkKey(k.AsString()); msg != "" {
				detail := msg
				if !sensitive {
					detail = fmt.Sprintf("%q is not a valid key in %s. %s", k.AsString(), name, msg)
				}
				diags = append(diags, &hcl.Diagnostic{
					Severity: hcl.DiagError,
					Summary:  fmt.Sprintf("Invalid %s key", name),
					Detail:   detail,
					Subject:  subject.Ptr(),
				})
			}
		}
		if e.IsKnown() && e.IsNull() {
			where := fmt.Sprintf("element %d", i)
			if !isList && !sensitive {
				where = fmt.Sprintf("the value of %q", k.AsString())
			} else if !isList {
				where = "a value"
			}
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  fmt.Sprintf("Null value in %s", name),
				Detail:   fmt.Sprintf("In %s, %s is null; every value must be a string.", name, where),
				Subject:  subject.Ptr(),
			})
		}
	}
	return diags
}

// elementRanges is the range of each of n elements when expr is a literal
// list of n elements, and expr's own range for each otherwise.
func elementRanges(expr hcl.Expression, n int) []hcl.Range {
	ranges := make([]hcl.Range, n)
	if exprs, diags := hcl.ExprList(expr); !diags.HasErrors() && len(exprs) == n {
		for i, e := range exprs {
			ranges[i] = e.Range()
		}
		return ranges
	}
	for i := range ranges {
		ranges[i] = expr.Range()
	}
	return ranges
}

// memoryValue converts a memory attribute's value, a size string or a
// number of bytes, to a number of bytes, keeping its marks.
func memoryValue(v cty.Value, expr hcl.Expression) (cty.Value, hcl.Diagnostics) {
	v, marks := v.Unmark()
	bad := func(detail string) (cty.Value, hcl.Diagnostics) {
		if len(marks) > 0 {
			detail = "The value is sensitive, so it is not shown. " + memoryHelp
		}
		return cty.UnknownVal(cty.Number).WithMarks(marks), hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Invalid memory size",
			Detail:   detail,
			Subject:  expr.Range().Ptr(),
		}}
	}
	switch {
	case v.IsNull():
		return cty.NullVal(cty.Number).WithMarks(marks), nil
	case !v.IsKnown():
		return cty.UnknownVal(cty.Number).WithMarks(marks), nil
	case v.Type() == cty.String:
		n, err := units.ParseBytes(v.AsString())
		if err != nil {
			return bad(fmt.Sprintf("%s. %s", err, memoryHelp))
		}
		return cty.NumberIntVal(n).WithMarks(marks), nil
	case v.Type() == cty.Number:
		n, acc := v.AsBigFloat().Int64()
		if acc != big.Exact || n < 1 {
			return bad("A number for memory is a whole number of bytes, more than zero. " + memoryHelp)
		}
		return cty.NumberIntVal(n).WithMarks(marks), nil
	}
	return bad(fmt.Sprintf("memory must be a string or a number, not %s. %s", v.Type().FriendlyName(), memoryHelp))
}

const memoryHelp = `Write a size like "512MiB", "4GiB" or "1g" (units are binary, as in docker), or a number of bytes.`

var daysRe = regexp.MustCompile(`^([0-9]+)d$`)

// ParseDuration parses a duration: Go's syntax ("720h", "1h30m"), or a
// whole number of days ("30d"). It must be more than zero.
func ParseDuration(s string) (time.Duration, error) {
	var d time.Duration
	if m := daysRe.FindStringSubmatch(s); m != nil {
		n, err := strconv.ParseInt(m[1], 10, 32)
		if err != nil {
			return 0, fmt.Errorf("%q is out of range", s)
		}
		d = time.Duration(n) * 24 * time.Hour
	} else {
		var err error
		d, err = time.ParseDuration(s)
		if err != nil {
			return 0, fmt.Errorf("%q is not a duration", s)
		}
	}
	if d <= 0 {
		return 0, fmt.Errorf("%q is not more than zero", s)
	}
	return d, nil
}

func quotedList(items []string) string {
	q := make([]string, len(items))
	for i, s := range items {
		q[i] = strconv.Quote(s)
	}
	if len(q) < 2 {
		return strings.Join(q, "")
	}
	return strings.Join(q[:len(q)-1], ", ") + " or " + q[len(q)-1]
}

// checkValidations evaluates a variable's validation rules for val. The
// error points at subject when it is set (the default, when that is where
// the value came from), and at the failing condition otherwise.
func (s *Scope) checkValidations(v *Variable, val cty.Value, subject hcl.Range, summary string) hcl.Diagnostics {
	var diags hcl.Diagnostics
	ctx := &hcl.EvalContext{
		Variables: map[string]cty.Value{refVar: cty.ObjectVal(map[string]cty.Value{v.Name: val})},
		Functions: s.funcs,
	}
	for _, vv := range v.Validations {
		if vv.Condition == nil || vv.ErrorMessage == nil {
			continue
		}
		cond, moreDiags := vv.Condition.Value(ctx)
		diags = append(diags, withExpr(moreDiags, vv.Condition, ctx)...)
		if moreDiags.HasErrors() {
			continue
		}
		cond = unmarkDeep(cond)
		if !cond.IsKnown() {
			continue
		}
		cond, err := convert.Convert(cond, cty.Bool)
		if err != nil || cond.IsNull() {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Invalid validation result",
				Detail:   "The condition of a validation rule must be true or false.",
				Subject:  vv.Condition.Range().Ptr(),
			})
			continue
		}
		if cond.True() {
			continue
		}
		msg := "The value is not valid."
		mv, moreDiags := vv.ErrorMessage.Value(ctx)
		diags = append(diags, moreDiags...)
		switch {
		case moreDiags.HasErrors():
		case IsSensitive(mv):
			msg = "The error message would show a sensitive value, so it is not shown."
		default:
			if sv, err := convert.Convert(mv, cty.String); err == nil && sv.IsKnown() && !sv.IsNull() {
				msg = sv.AsString()
			}
		}
		subj := subject
		if subj == (hcl.Range{}) {
			subj = vv.Condition.Range()
		}
		diags = append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  summary,
			Detail:   fmt.Sprintf("%s\n\nThis was checked by the validation rule for var.%s at %s.", msg, v.Name, vv.DeclRange),
			Subject:  subj.Ptr(),
		})
	}
	return diags
}
