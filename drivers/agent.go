package drivers

import (
	"errors"
	"fmt"
	"time"

	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"

	"github.com/bottlefile/bottlefile/workloadattr"
)

// AgentSpec is one evaluated agent block. Values are cty values so that
// unknowns (known after apply) and sensitive marks survive the boundary;
// drivers copy them into Object.Attrs (WorkloadAttrs) and decode them once
// (DecodeWorkload).
type AgentSpec struct {
	Addr string // "agent.coder"
	Name string // "coder"; for an instance its addrs.SafeName, "coder__frontend"

	// Workload is what runs and how: an object of WorkloadType, checked by
	// the configuration language (memory is a number of bytes, a build
	// context an absolute path).
	Workload cty.Value
	// Driver is the agent's driver block decoded against the driver's
	// Schema.Agent; cty.NilVal when the driver declares no per-agent
	// settings.
	Driver cty.Value
	// Sidecars are helper workloads in the agent's bottle, reachable from
	// the agent by name, in declaration order.
	Sidecars []SidecarSpec
	// Workspace are the absolute paths that are the agent's work: what
	// a replacement booting a new image gets carried over (Carry).
	Workspace []string
	// EgressCeiling is the effective egress ceiling of the agent's
	// runtime, rules in canonical form: the operator's policy, or the
	// runtime's egress_ceiling within it. The core has checked every
	// allow rule against it; a driver that runs a gateway gives it the
	// ceiling too, so that the gateway refuses what lies outside whatever
	// its rules file says. nil when there is none; empty allows nothing.
	EgressCeiling []string
}

// SidecarSpec is one evaluated sidecar block; its address is
// "agent.AGENT.sidecar.NAME". Workload means what it means on AgentSpec.
type SidecarSpec struct {
	Addr, Name string
	Workload   cty.Value
}

// WorkloadType is the type of AgentSpec.Workload and SidecarSpec.Workload:
// one attribute per row of workloadAttrs, each null when the configuration
// leaves it out.
var WorkloadType = func() cty.Type {
	types := map[string]cty.Type{}
	for _, r := range workloadattr.Rows {
		types[r.Name] = r.Type
	}
	for name, ty := range workloadBlockTypes {
		types[name] = ty
	}
	return cty.Object(types)
}()

// workloadBlockTypes are the workload's nested blocks, as drivers receive
// them; the plain attributes are workloadattr's rows.
var workloadBlockTypes = map[string]cty.Type{
	"build":       buildType,
	"egress":      cty.List(cty.String),
	"healthcheck": HealthcheckType,
	"credentials": cty.List(CredentialType),
}

// workloadAttrs are how DecodeWorkload decodes each attribute of a
// workload object into Workload (the value unmarked); the types are
// WorkloadType's.
var workloadAttrs = []struct {
	name   string
	decode func(w *Workload, v cty.Value) error
}{
	{"image", func(w *Workload, v cty.Value) (err error) { w.Image, err = String(v); return }}, // or null when build is set
	{"build", func(w *Workload, v cty.Value) (err error) { w.Build, err = DecodeBuild(v); return }},
	{"command", func(w *Workload, v cty.Value) (err error) { w.Command, err = Strings(v); return }},
	{"entrypoint", func(w *Workload, v cty.Value) (err error) { w.Entrypoint, err = stringsOrEmpty(v); return }},
	{"env", func(w *Workload, v cty.Value) (err error) { w.Env, err = StringMap(v); return }},
	{"workdir", func(w *Workload, v cty.Value) (err error) { w.Workdir, err = String(v); return }},
	{"user", func(w *Workload, v cty.Value) (err error) { w.User, err = String(v); return }},
	{"cpus", func(w *Workload, v cty.Value) (err error) { w.CPUs, err = Float(v); return }},
	{"memory", func(w *Workload, v cty.Value) (err error) { w.Memory, err = Int(v); return }}, // bytes
	{"pids", func(w *Workload, v cty.Value) (err error) { w.Pids, err = Int(v); return }},
	{"labels", func(w *Workload, v cty.Value) (err error) { w.Labels, err = StringMap(v); return }},
	{"egress", func(w *Workload, v cty.Value) (err error) { w.Egress, err = stringsOrEmpty(v); return }},
	{"healthcheck", func(w *Workload, v cty.Value) (err error) { w.Healthcheck, err = DecodeHealthcheck(v); return }},
	{"credentials", func(w *Workload, v cty.Value) (err error) { w.Credentials, err = DecodeCredentials(v); return }},
}

// CredentialType is one credential of an egress block: the gateway puts
// prefix+value into header of the requests to host:port, and the workload
// sees a placeholder in env (when set). value is sensitive.
var CredentialType = workloadattr.CredentialType

// Credential is one decoded credential. Value is the secret: never log it.
type Credential struct {
	Name, Host string
	Port       int
	Header     string
	Prefix     string
	Value      string
	Env        string
}

// DecodeCredentials decodes a workload's credentials attribute; null gives
// nil. Sensitive values are unmarked: never log them.
func DecodeCredentials(v cty.Value) ([]Credential, error) {
	v, _ = v.UnmarkDeep()
	if v == cty.NilVal || v.IsNull() {
		return nil, nil
	}
	if !v.IsWhollyKnown() {
		return nil, errors.New("value is not known yet")
	}
	if !v.CanIterateElements() {
		return nil, fmt.Errorf("want a list of credentials, got %s", v.Type().FriendlyName())
	}
	var out []Credential
	for it := v.ElementIterator(); it.Next(); {
		_, e := it.Element()
		if !e.Type().IsObjectType() {
			return nil, fmt.Errorf("want a credential object, got %s", e.Type().FriendlyName())
		}
		get := func(name string) string {
			if !e.Type().HasAttribute(name) || e.GetAttr(name).IsNull() || e.GetAttr(name).Type() != cty.String {
				return ""
			}
			return e.GetAttr(name).AsString()
		}
		c := Credential{Name: get("name"), Host: get("host"), Header: get("header"), Prefix: get("prefix"), Value: get("value"), Env: get("env")}
		if e.Type().HasAttribute("port") && !e.GetAttr("port").IsNull() {
			p, _ := e.GetAttr("port").AsBigFloat().Int64()
			c.Port = int(p)
		}
		if c.Port == 0 {
			c.Port = 443
		}
		if c.Name == "" || c.Host == "" || c.Header == "" || c.Value == "" {
			return nil, fmt.Errorf("credential %q: name, host, header and value are required", c.Name)
		}
		out = append(out, c)
	}
	return out, nil
}

// HealthcheckType is the type of a workload's healthcheck: the block as
// the configuration language evaluated it, every attribute set, the
// durations in Go's syntax.
var HealthcheckType = workloadattr.HealthcheckType

// Healthcheck is a workload's healthcheck decoded: Command runs in the
// workload every Interval (given Timeout to finish), the first time one
// Interval after the start; the workload is healthy once it exits 0, and
// unhealthy after Retries failures in a row, failures within StartPeriod
// of the start not counted.
type Healthcheck struct {
	Command     []string
	Interval    time.Duration
	Timeout     time.Duration
	Retries     int
	StartPeriod time.Duration
}

// DecodeHealthcheck decodes a workload's healthcheck attribute; null
// gives nil.
func DecodeHealthcheck(v cty.Value) (*Healthcheck, error) {
	v, _ = v.UnmarkDeep()
	if v.IsNull() {
		return nil, nil
	}
	if !v.IsWhollyKnown() {
		return nil, errors.New("value is not known yet")
	}
	if !v.Type().Equals(HealthcheckType) {
		return nil, fmt.Errorf("want a healthcheck object, got %s", v.Type().FriendlyName())
	}
	var out Healthcheck
	var err error
	if out.Command, err = Strings(v.GetAttr("command")); err != nil {
		return nil, fmt.Errorf("command: %w", err)
	}
	if len(out.Command) == 0 {
		return nil, errors.New("command: empty")
	}
	for name, d := range map[string]*time.Duration{"interval": &out.Interval, "timeout": &out.Timeout, "start_period": &out.StartPeriod} {
		s, err := String(v.GetAttr(name))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		if *d, err = time.ParseDuration(s); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
	}
	n, err := Int(v.GetAttr("retries"))
	if err != nil {
		return nil, fmt.Errorf("retries: %w", err)
	}
	out.Retries = int(n)
	return &out, nil
}

var buildType = workloadattr.BuildType // context: absolute; dockerfile: relative to it

// Workload is a workload decoded into Go values.
type Workload struct {
	Image      string
	Build      *BuildSpec // nil without a build block
	Command    []string
	Entrypoint []string // non-nil and empty for an explicit empty list
	Env        map[string]string
	Workdir    string
	User       string
	CPUs       float64 // 0: no limit
	Memory     int64   // bytes; 0: no limit
	Pids       int64   // processes (and threads) at once; 0: no limit
	Labels     map[string]string
	// Egress is the allowlist, rule strings ("host", "host:port",
	// "*.suffix:port"); nil when there is no egress block, non-nil and
	// empty for a block that allows nothing. Both mean the workload
	// reaches nothing outside its bottle.
	Egress []string
	// Healthcheck says when the workload is ready; nil without a
	// healthcheck block.
	Healthcheck *Healthcheck
	// Credentials are the egress block's credential blocks; nil for none.
	Credentials []Credential
}

// DecodeWorkload decodes a workload object: an AgentSpec's or SidecarSpec's
// Workload, or a planned object's attributes (ObjectAttrs), where an
// attribute the object does not record decodes to its zero value. A value
// still unknown, or of the wrong type, is an error naming the attribute.
// Sensitive values are unmarked: never log them.
func DecodeWorkload(w cty.Value) (Workload, error) {
	var out Workload
	for _, a := range workloadAttrs {
		if err := a.decode(&out, WorkloadAttr(w, a.name)); err != nil {
			return out, fmt.Errorf("%s: %w", a.name, err)
		}
	}
	return out, nil
}

// stringsOrEmpty is Strings, but an empty list gives an empty slice, not
// nil.
func stringsOrEmpty(v cty.Value) ([]string, error) {
	out, err := Strings(v)
	if err == nil && out == nil && !v.IsNull() {
		out = []string{}
	}
	return out, err
}

// DecodeBuild decodes a workload's build attribute, known at plan time;
// null gives nil.
func DecodeBuild(b cty.Value) (*BuildSpec, error) {
	b, _ = b.UnmarkDeep()
	if b.IsNull() {
		return nil, nil
	}
	if !b.IsWhollyKnown() {
		return nil, errors.New("value is not known yet")
	}
	var out BuildSpec
	var err error
	if !b.Type().IsObjectType() || !b.Type().HasAttribute("context") || !b.Type().HasAttribute("dockerfile") {
		return nil, fmt.Errorf("want an object with context and dockerfile, got %s", b.Type().FriendlyName())
	}
	if out.Context, err = String(b.GetAttr("context")); err != nil {
		return nil, fmt.Errorf("context: %w", err)
	}
	if out.Dockerfile, err = String(b.GetAttr("dockerfile")); err != nil {
		return nil, fmt.Errorf("dockerfile: %w", err)
	}
	return &out, nil
}

// WorkloadAttr is one attribute of a workload object (or of its build
// object), marks and unknowns kept; a null when the object is null or has
// no such attribute.
func WorkloadAttr(w cty.Value, name string) cty.Value {
	if w == cty.NilVal {
		w = cty.NullVal(WorkloadType)
	}
	w, marks := w.Unmark()
	if w.IsNull() || !w.Type().IsObjectType() || !w.Type().HasAttribute(name) {
		if ty, ok := WorkloadType.AttributeTypes()[name]; ok {
			return cty.NullVal(ty)
		}
		return cty.NullVal(cty.DynamicPseudoType)
	}
	if !w.IsKnown() {
		return cty.UnknownVal(w.Type().AttributeType(name)).WithMarks(marks)
	}
	return w.GetAttr(name).WithMarks(marks)
}

// WorkloadAttrs is the named attributes of a workload object, for a
// planned object's Attrs: each as the configuration gave it, unknowns and
// sensitive marks kept, a typed null when unset. A driver names the
// attributes its object records: adding one to a driver's list changes
// the config hash of every object it plans.
func WorkloadAttrs(w cty.Value, names ...string) map[string]cty.Value {
	attrs := make(map[string]cty.Value, len(names))
	for _, name := range names {
		attrs[name] = WorkloadAttr(w, name)
	}
	return attrs
}

// ObjectAttrs makes a planned object's attributes a workload object for
// DecodeWorkload.
func ObjectAttrs(o Object) cty.Value {
	attrs := make(map[string]cty.Value, len(o.Attrs))
	for k, v := range o.Attrs {
		if v != cty.NilVal {
			attrs[k] = v
		}
	}
	return cty.ObjectVal(attrs)
}

// NewWorkload makes a workload object of WorkloadType from the attributes
// given (converted to their types); the others are null. It is for drivers'
// tests and callers that build a spec by hand; the planner hands drivers
// what the configuration language evaluated.
func NewWorkload(attrs map[string]cty.Value) (cty.Value, error) {
	vals := map[string]cty.Value{}
	for name, ty := range WorkloadType.AttributeTypes() {
		v, ok := attrs[name]
		if !ok || v == cty.NilVal {
			vals[name] = cty.NullVal(ty)
			continue
		}
		cv, err := convert.Convert(v, ty)
		if err != nil {
			return cty.NilVal, fmt.Errorf("%s: %w", name, err)
		}
		vals[name] = cv
	}
	for name := range attrs {
		if !WorkloadType.HasAttribute(name) {
			return cty.NilVal, fmt.Errorf("%s: not a workload attribute", name)
		}
	}
	return cty.ObjectVal(vals), nil
}

// WithWorkloadAttr is the workload object w with one attribute set to v.
func WithWorkloadAttr(w cty.Value, name string, v cty.Value) cty.Value {
	attrs := map[string]cty.Value{}
	for n := range WorkloadType.AttributeTypes() {
		attrs[n] = WorkloadAttr(w, n)
	}
	if v == cty.NilVal {
		v = WorkloadAttr(cty.NilVal, name)
	}
	attrs[name] = v
	return cty.ObjectVal(attrs)
}

// MustWorkload is NewWorkload for literal attributes: it panics on an error.
func MustWorkload(attrs map[string]cty.Value) cty.Value {
	w, err := NewWorkload(attrs)
	if err != nil {
		panic(err)
	}
	return w
}

// BuildValue is the build attribute of a workload object.
func BuildValue(context, dockerfile string) cty.Value {
	return cty.ObjectVal(map[string]cty.Value{"context": cty.StringVal(context), "dockerfile": cty.StringVal(dockerfile)})
}

// StringsValue is a list of strings as an object's attribute: what Strings
// decodes, an empty list (not null) when there are none.
func StringsValue(ss []string) cty.Value {
	if len(ss) == 0 {
		return cty.ListValEmpty(cty.String)
	}
	vals := make([]cty.Value, len(ss))
	for i, s := range ss {
		vals[i] = cty.StringVal(s)
	}
	return cty.ListVal(vals)
}

// HasEgressBlock reports whether a workload object has an egress block (an
// empty one too), so the driver plans a gateway; an unknown value may be
// one.
func HasEgressBlock(w cty.Value) bool {
	v, _ := WorkloadAttr(w, "egress").UnmarkDeep()
	return !v.IsKnown() || !v.IsNull()
}

// RuleError is a driver's complaint about one egress rule, so the planner
// can point the diagnostic at that rule in the Bottlefile.
type RuleError struct {
	Index int    // position in the allow list
	Rule  string // the rule as written
	Err   error
}

func (e *RuleError) Error() string { return fmt.Sprintf("egress rule %q: %v", e.Rule, e.Err) }
func (e *RuleError) Unwrap() error { return e.Err }

// BuildSpec is an image built from a local context directory. The driver
// hashes the context at plan time, so a change in it shows up in the plan.
type BuildSpec struct {
	Context    string // absolute path
	Dockerfile string // relative to Context; "Dockerfile" when empty
}

// Strings decodes a list of strings. Null gives nil.
func Strings(v cty.Value) ([]string, error) {
	v, ok, err := decodable(v, cty.Value.CanIterateElements, "a list of strings")
	if !ok {
		return nil, err
	}
	var out []string
	for it := v.ElementIterator(); it.Next(); {
		_, e := it.Element()
		if e.IsNull() || e.Type() != cty.String {
			return nil, fmt.Errorf("want a list of strings")
		}
		out = append(out, e.AsString())
	}
	return out, nil
}

// StringMap decodes a map of strings. Null gives nil.
func StringMap(v cty.Value) (map[string]string, error) {
	v, ok, err := decodable(v, cty.Value.CanIterateElements, "a map of strings")
	if !ok {
		return nil, err
	}
	out := map[string]string{}
	for it := v.ElementIterator(); it.Next(); {
		k, e := it.Element()
		if e.IsNull() || e.Type() != cty.String {
			return nil, fmt.Errorf("want a map of strings")
		}
		out[k.AsString()] = e.AsString()
	}
	return out, nil
}

// String decodes a string. Null gives "".
func String(v cty.Value) (string, error) {
	v, ok, err := decodable(v, ofType(cty.String), "a string")
	if !ok {
		return "", err
	}
	return v.AsString(), nil
}

// Int decodes a whole number. Null gives 0.
func Int(v cty.Value) (int64, error) {
	v, ok, err := decodable(v, ofType(cty.Number), "a number")
	if !ok {
		return 0, err
	}
	i, acc := v.AsBigFloat().Int64()
	if acc != 0 {
		return 0, fmt.Errorf("want a whole number")
	}
	return i, nil
}

// Float decodes a number. Null gives 0.
func Float(v cty.Value) (float64, error) {
	v, ok, err := decodable(v, ofType(cty.Number), "a number")
	if !ok {
		return 0, err
	}
	f, _ := v.AsBigFloat().Float64()
	return f, nil
}

// decodable unmarks v for a decoder and checks it. ok is false for null
// (the decoder's zero value, no error), and, with an error, for a value
// not known yet or one it does not take (want says what it takes).
func decodable(v cty.Value, is func(cty.Value) bool, want string) (cty.Value, bool, error) {
	v, _ = v.UnmarkDeep()
	switch {
	case v.IsNull():
		return v, false, nil
	case !v.IsKnown():
		return v, false, errors.New("value is not known yet")
	case !is(v):
		return v, false, fmt.Errorf("want %s, got %s", want, v.Type().FriendlyName())
	case !v.IsWhollyKnown():
		// A known list or map with unknown elements.
		return v, false, errors.New("value is not known yet")
	}
	return v, true, nil
}

// ofType is a decodable check that a value is of type ty.
func ofType(ty cty.Type) func(cty.Value) bool {
	return func(v cty.Value) bool { return v.Type() == ty }
}

// ConfigString reads an optional string attribute of a decoded runtime
// block (ConfigureRequest.Config); a null block or attribute gives "".
func ConfigString(cfg cty.Value, name string) (string, error) {
	if cfg == cty.NilVal || cfg.IsNull() {
		return "", nil
	}
	if !cfg.IsKnown() {
		return "", errors.New("the runtime block is not known yet")
	}
	if !cfg.Type().IsObjectType() || !cfg.Type().HasAttribute(name) {
		return "", nil
	}
	return String(cfg.GetAttr(name))
}
