package lang

import (
	"fmt"
	"sync"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"
)

// Scope evaluates a configuration's expressions: it holds the values of the
// input variables, evaluates locals on demand, and knows the values of the
// agents and snapshots that exist (SetAgent, SetSnapshot); the others are
// unknown, "known after apply". A Scope is safe for concurrent use.
type Scope struct {
	cfg        *Config
	validating bool // every input variable is unknown: LoadDir's validation pass
	// unset names the required variables a partial scope left unknown
	// (NewPartialScope).
	unset  []string
	vars   map[string]cty.Value
	varObj cty.Value
	funcs  map[string]function.Function

	mu        sync.Mutex // guards agents, snapshots, locals and redact
	agents    map[string]cty.Value
	snapshots map[string]cty.Value
	locals    map[string]cty.Value // evaluated locals; cleared when an agent or snapshot value is set
	// instances are the instances of each agent block with for_each or
	// count, by block name, once expanded (expand).
	instances map[string][]*Agent
	redact    redactor
}

// Object types of the values references evaluate to.
var (
	// workloadObjectType is the value of a running workload: agent.X
	// without its sidecars, and agent.X.sidecar.Y.
	workloadObjectType = cty.Object(map[string]cty.Type{
		"id":    cty.String, // the driver's id: a container id, a VM name
		"name":  cty.String, // the name on the runtime
		"image": cty.String, // the id of the image it runs
	})
	// SnapshotObjectType is the value of snapshot.X.
	SnapshotObjectType = cty.Object(map[string]cty.Type{
		"id":    cty.String, // the driver's id of the snapshot
		"image": cty.String, // the image reference (docker) or .smolmachine path (smolvm) to boot from
	})
	runtimeObjectType = cty.Object(map[string]cty.Type{
		"name":   cty.String,
		"driver": cty.String,
	})
)

// ObjectType is the type of agent.NAME in expressions: an object with id,
// name and image (strings) and sidecar, an object with one attribute per
// sidecar, each an object with id, name and image.
func (a *Agent) ObjectType() cty.Type {
	sidecars := map[string]cty.Type{}
	for _, s := range a.Sidecars {
		sidecars[s.Name] = workloadObjectType
	}
	attrs := map[string]cty.Type{"sidecar": cty.Object(sidecars)}
	for name, ty := range workloadObjectType.AttributeTypes() {
		attrs[name] = ty
	}
	return cty.Object(attrs)
}

// NewScope makes a scope with the given values for input variables (nil for
// none): it converts them to the variables' types, applies defaults, marks
// the values of sensitive variables, checks validation rules, and
// evaluates the locals. Missing required variables, values for undeclared
// ones, and values that fail validation are errors.
func (c *Config) NewScope(vars map[string]cty.Value) (*Scope, hcl.Diagnostics) {
	return c.newScopeWith(vars, false)
}

// NewPartialScope is NewScope for a command that only looks at what runs
// (status, logs, exec): a required variable with no value is unknown
// rather than an error, so that a sensitive key need not be at hand to read
// a log. A runtime block that needs one says so when evaluated
// (EvalRuntime); so does anything else that must be known.
func (c *Config) NewPartialScope(vars map[string]cty.Value) (*Scope, hcl.Diagnostics) {
	return c.newScopeWith(vars, true)
}

func (c *Config) newScopeWith(vars map[string]cty.Value, partial bool) (*Scope, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	s := c.newScope()
	for _, name := range sortedKeys(vars) {
		if _, ok := c.Variables[name]; !ok {
			diags = append(diags, undeclaredVariable(c, name, "", nil))
		}
	}
	for _, name := range c.VariableNames() {
		v := c.Variables[name]
		given, ok := vars[name]
		var val cty.Value
		switch {
		case ok && given != cty.NilVal && !given.IsNull():
			cv, err := v.convert(given)
			if err != nil {
				diags = append(diags, &hcl.Diagnostic{
					Severity: hcl.DiagError,
					Summary:  "Invalid value for input variable",
					Detail:   fmt.Sprintf("The value given for var.%s does not match its type %s: %s.", name, typeString(v.Type), convertErrText(err)),
					Subject:  v.DeclRange.Ptr(),
				})
				cv = cty.UnknownVal(v.Type)
			}
			val = cv
		case !v.Required():
			val = v.Default
		case partial:
			val = cty.UnknownVal(v.Type)
			s.unset = append(s.unset, name)
		default:
			detail := fmt.Sprintf("The variable %q has no default, so it needs a value: -var '%s=...', a -var-file, or the environment variable %s%s.",
				name, name, EnvVarPrefix, name)
			if v.Sensitive {
				// A -var value is in the process list for every user of
				// the machine, and in shell history and CI logs.
				detail = fmt.Sprintf("The variable %q is sensitive and has no default, so it needs a value: set the environment variable %s%s, or put it in a -var-file kept out of version control. -var '%s=...' works too, but puts the value on the command line, where other users of the machine (ps), shell history and CI logs see it.",
					name, EnvVarPrefix, name, name)
			}
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "No value for required variable",
				Detail:   detail,
				Subject:  v.DeclRange.Ptr(),
			})
			val = cty.UnknownVal(v.Type)
		}
		if v.Sensitive || c.Backend.refersTo(name) {
			// A backend's connection string may hold a password,
			// whatever its variable says: shown nowhere, in no plan file.
			val = val.Mark(Sensitive)
		}
		s.vars[name] = val
		s.redact.add(val)
	}
	s.varObj = cty.ObjectVal(s.vars)
	if diags.HasErrors() {
		return s, s.redact.redact(diags)
	}
	for _, name := range c.VariableNames() {
		v := c.Variables[name]
		subject := hcl.Range{}
		if _, given := vars[name]; !given && !v.Required() {
			subject = v.DefaultRange
		}
		diags = append(diags, s.checkValidations(v, s.vars[name], subject, "Invalid value for variable")...)
	}
	if diags.HasErrors() {
		return s, s.redact.redact(diags)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	diags = append(diags, s.expand()...)
	if diags.HasErrors() {
		return s, s.redact.redact(diags)
	}
	for _, name := range sortedKeys(c.Locals) {
		_, moreDiags := s.local(name, nil)
		diags = append(diags, moreDiags...)
	}
	return s, s.redact.redact(diags)
}

func (c *Config) newScope() *Scope {
	s := &Scope{
		cfg:       c,
		vars:      map[string]cty.Value{},
		funcs:     c.Functions(),
		agents:    map[string]cty.Value{},
		snapshots: map[string]cty.Value{},
		locals:    map[string]cty.Value{},
	}
	s.redact.names = functionNames(s.funcs)
	return s
}

// functionNames is the names of funcs and of their parameters.
func functionNames(funcs map[string]function.Function) map[string]bool {
	names := map[string]bool{}
	for name, f := range funcs {
		names[name] = true
		for _, p := range f.Params() {
			names[p.Name] = true
		}
		if p := f.VarParam(); p != nil {
			names[p.Name] = true
		}
	}
	return names
}

// validationScope is a scope where every input variable is unknown (of its
// type), for checking everything that does not depend on their values.
func (c *Config) validationScope() *Scope {
	s := c.newScope()
	s.validating = true
	for name, v := range c.Variables {
		val := cty.UnknownVal(v.Type)
		if v.Sensitive || c.Backend.refersTo(name) {
			// A backend's connection string may hold a password,
			// whatever its variable says: shown nowhere, in no plan file.
			val = val.Mark(Sensitive)
		}
		s.vars[name] = val
	}
	s.varObj = cty.ObjectVal(s.vars)
	return s
}

// Variables returns the values of the input variables, sensitive ones
// marked.
func (s *Scope) Variables() map[string]cty.Value {
	out := make(map[string]cty.Value, len(s.vars))
	for k, v := range s.vars {
		out[k] = v
	}
	return out
}

// instancesValue is the value of agent.NAME for a block with for_each
// (an object of its instances by key) or count (a tuple of them), each
// instance's value as agent.NAME has without instances; unknown before
// the keys are (validation). False for a block without instances. s.mu
// is held.
func (s *Scope) instancesValue(name string) (cty.Value, bool) {
	blocks := s.cfg.agentBlocks
	if blocks == nil {
		blocks = s.cfg.Agents
	}
	a, ok := blocks[name]
	if !ok || !a.Repeats() {
		return cty.NilVal, false
	}
	insts, expanded := s.instances[name]
	if !expanded {
		return cty.DynamicVal, true
	}
	value := func(inst *Agent) cty.Value {
		if v, ok := s.agents[inst.Name]; ok {
			return v
		}
		return cty.UnknownVal(inst.ObjectType())
	}
	if a.Count != nil {
		vals := make([]cty.Value, len(insts))
		for _, inst := range insts {
			vals[inst.Key.Int()] = value(inst)
		}
		if len(vals) == 0 {
			return cty.EmptyTupleVal, true
		}
		return cty.TupleVal(vals), true
	}
	vals := map[string]cty.Value{}
	for _, inst := range insts {
		vals[inst.Key.Str()] = value(inst)
	}
	return objectVal(vals), true
}

// SetAgent sets the value of agent.NAME, known once the agent exists: an
// object with any of the attributes id, name, image (strings) and sidecar
// (an object of sidecar objects with the same attributes). Attributes left
// out stay unknown. Locals that depend on it are evaluated again.
func (s *Scope) SetAgent(name string, v cty.Value) {
	a, ok := s.cfg.Agents[name]
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.agents[name] = fillObject(a.ObjectType(), v)
	s.locals = map[string]cty.Value{}
}

// SetSnapshot sets the value of snapshot.NAME, known once it is taken: an
// object with id and image. Attributes left out stay unknown.
func (s *Scope) SetSnapshot(name string, v cty.Value) {
	if _, ok := s.cfg.Snapshots[name]; !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.snapshots[name] = fillObject(SnapshotObjectType, v)
	s.locals = map[string]cty.Value{}
}

// fillObject converts v to the object type ty, taking the attributes v has
// and leaving the others unknown. Attributes ty does not have are kept.
func fillObject(ty cty.Type, v cty.Value) cty.Value {
	if v == cty.NilVal || v.IsNull() || !v.IsKnown() || !(v.Type().IsObjectType() || v.Type().IsMapType()) {
		return cty.UnknownVal(ty)
	}
	v, marks := v.Unmark()
	given := map[string]cty.Value{}
	for it := v.ElementIterator(); it.Next(); {
		k, e := it.Element()
		given[k.AsString()] = e
	}
	attrs := map[string]cty.Value{}
	for name, aty := range ty.AttributeTypes() {
		e, ok := given[name]
		if !ok {
			attrs[name] = cty.UnknownVal(aty)
			continue
		}
		if aty.IsObjectType() {
			attrs[name] = fillNested(aty, e)
			continue
		}
		if cv, err := convertValue(e, aty); err == nil {
			attrs[name] = cv
		} else {
			attrs[name] = cty.UnknownVal(aty)
		}
	}
	for name, e := range given {
		if _, ok := attrs[name]; !ok {
			attrs[name] = e
		}
	}
	return cty.ObjectVal(attrs).WithMarks(marks)
}

// fillNested fills an object whose attributes are themselves objects (the
// sidecars of an agent).
func fillNested(ty cty.Type, v cty.Value) cty.Value {
	if v.IsNull() || !v.IsKnown() || !(v.Type().IsObjectType() || v.Type().IsMapType()) {
		return cty.UnknownVal(ty)
	}
	v, marks := v.Unmark()
	given := map[string]cty.Value{}
	for it := v.ElementIterator(); it.Next(); {
		k, e := it.Element()
		given[k.AsString()] = e
	}
	attrs := map[string]cty.Value{}
	for name, aty := range ty.AttributeTypes() {
		if e, ok := given[name]; ok {
			attrs[name] = fillObject(aty, e)
		} else {
			attrs[name] = cty.UnknownVal(aty)
		}
	}
	if len(attrs) == 0 {
		return cty.EmptyObjectVal.WithMarks(marks)
	}
	return cty.ObjectVal(attrs).WithMarks(marks)
}

// local evaluates local.NAME, memoized. visiting guards against cycles,
// which CheckCycles reports; a local in one is unknown. s.mu is held.
func (s *Scope) local(name string, visiting map[string]bool) (cty.Value, hcl.Diagnostics) {
	if v, ok := s.locals[name]; ok {
		return v, nil
	}
	l, ok := s.cfg.Locals[name]
	if !ok {
		return cty.DynamicVal, nil
	}
	if visiting[name] || s.cfg.invalid[l.Expr.Range()] {
		return cty.DynamicVal, nil
	}
	if visiting == nil {
		visiting = map[string]bool{}
	}
	visiting[name] = true
	defer delete(visiting, name)

	var diags hcl.Diagnostics
	ctx, moreDiags := s.evalContext(exprRefs(l.Expr), visiting)
	diags = append(diags, moreDiags...)
	v, moreDiags := l.Expr.Value(ctx)
	diags = append(diags, moreDiags...)
	if moreDiags.HasErrors() {
		v = cty.DynamicVal
	}
	s.locals[name] = v
	s.redact.add(v)
	return v, s.redact.redact(diags)
}

// evalContext is an evaluation context with the values refs need: all
// variables, and the locals, agents, snapshots and runtimes referred to.
// s.mu is held.
func (s *Scope) evalContext(refs []*reference, visiting map[string]bool) (*hcl.EvalContext, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	locals := map[string]cty.Value{}
	agents := map[string]cty.Value{}
	snapshots := map[string]cty.Value{}
	runtimes := map[string]cty.Value{}
	for _, ref := range refs {
		switch ref.kind {
		case refLocal:
			if _, done := locals[ref.name]; done {
				continue
			}
			if _, ok := s.cfg.Locals[ref.name]; !ok {
				continue
			}
			v, moreDiags := s.local(ref.name, visiting)
			diags = append(diags, moreDiags...)
			locals[ref.name] = v
		case refAgent:
			if v, ok := s.instancesValue(ref.name); ok {
				agents[ref.name] = v
				continue
			}
			a, ok := s.cfg.Agents[ref.name]
			if !ok {
				continue
			}
			if v, ok := s.agents[ref.name]; ok {
				agents[ref.name] = v
			} else {
				agents[ref.name] = cty.UnknownVal(a.ObjectType())
			}
		case refSnapshot:
			if _, ok := s.cfg.Snapshots[ref.name]; !ok {
				continue
			}
			if v, ok := s.snapshots[ref.name]; ok {
				snapshots[ref.name] = v
			} else {
				snapshots[ref.name] = cty.UnknownVal(SnapshotObjectType)
			}
		case refRuntime:
			if r, ok := s.cfg.Runtimes[ref.name]; ok {
				runtimes[ref.name] = cty.ObjectVal(map[string]cty.Value{
					"name":   cty.StringVal(r.Name),
					"driver": cty.StringVal(r.Driver),
				})
			}
		}
	}
	return &hcl.EvalContext{
		Variables: map[string]cty.Value{
			refVar:      s.varObj,
			refLocal:    objectVal(locals),
			refAgent:    objectVal(agents),
			refSnapshot: objectVal(snapshots),
			refRuntime:  objectVal(runtimes),
		},
		Functions: s.funcs,
	}, diags
}

func objectVal(m map[string]cty.Value) cty.Value {
	if len(m) == 0 {
		return cty.EmptyObjectVal
	}
	return cty.ObjectVal(m)
}

// Local returns the value of local.NAME.
func (s *Scope) Local(name string) (cty.Value, hcl.Diagnostics) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.local(name, nil)
}

// EvalContext returns an evaluation context for expressions that may refer
// to anything declared: all variables, locals, runtimes, and agents and
// snapshots (unknown unless set). Use it for bodies lang does not decode
// itself; EvalAgent and the other Eval methods build narrower ones.
func (s *Scope) EvalContext() (*hcl.EvalContext, hcl.Diagnostics) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var refs []*reference
	for name := range s.cfg.Locals {
		refs = append(refs, &reference{kind: refLocal, name: name})
	}
	for name := range s.cfg.Agents {
		refs = append(refs, &reference{kind: refAgent, name: name})
	}
	for name := range s.cfg.Snapshots {
		refs = append(refs, &reference{kind: refSnapshot, name: name})
	}
	for name := range s.cfg.Runtimes {
		refs = append(refs, &reference{kind: refRuntime, name: name})
	}
	ctx, diags := s.evalContext(refs, nil)
	return ctx, s.redact.redact(diags)
}

// undeclaredVariable is the error for a value given for a variable the
// configuration does not declare. from says where the value came from
// ("" when unknown), subject where it was written (nil when nowhere).
func undeclaredVariable(c *Config, name, from string, subject *hcl.Range) *hcl.Diagnostic {
	detail := fmt.Sprintf("A value was given for the variable %q, but the configuration declares no variable of that name.", name)
	if from != "" {
		detail = fmt.Sprintf("%s gives a value for the variable %q, but the configuration declares no variable of that name.", from, name)
	}
	if s := nameSuggestion(name, c.VariableNames()); s != "" {
		detail += fmt.Sprintf(" Did you mean %q?", s)
	} else {
		detail += " Declare it with a variable block, or remove the value."
	}
	return &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  "Value for undeclared variable",
		Detail:   detail,
		Subject:  subject,
	}
}
