package lang

import (
	"fmt"
	"math/big"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hcldec"
	"github.com/zclconf/go-cty/cty"

	"github.com/bottlefile/bottlefile/workloadattr"
)

// The workload schema: what agents and sidecars share, what runs and how.
// Each attribute and nested block is one row below, with its type and the
// check that runs on its decoded value. WorkloadSpec, the block schemas,
// lifecycle.ignore_changes's names and the evaluated value are all made
// from these rows: adding an attribute is adding a row (and teaching the
// drivers, which receive the evaluated object, what to do with it).

// workloadCheck checks an attribute's decoded value and may normalise it
// (memory becomes a number of bytes). expr is the attribute's expression,
// nil when the attribute is absent; diagnostics point into it.
type workloadCheck func(s *Scope, v cty.Value, expr hcl.Expression) (cty.Value, hcl.Diagnostics)

// workloadField is one attribute: its name, its type as written (what
// hcldec converts to), and its check (nil for none). A check that changes
// the type names the type it gives (checked; ty when unset).
type workloadField struct {
	name     string
	ty       cty.Type
	checked  cty.Type
	required bool
	check    workloadCheck
}

// workloadBlock is a nested block, at most one of each: its attributes,
// and its value in the evaluated workload, made from their checked values
// (present is false without the block).
type workloadBlock struct {
	name   string
	fields []workloadField
	value  func(attrs map[string]cty.Value, present bool) cty.Value
}

// workloadFieldChecks are how lang decodes and checks the plain
// attributes that need more than their row's type (workloadattr.Rows):
// the type as written and the check. workloadFields has one field per
// row, in the rows' order; a row with no entry here is decoded as its
// type, unchecked.
var workloadFieldChecks = []workloadField{
	{name: "image", ty: cty.String, check: checkStringAttr("image", func(s string) string {
		if strings.TrimSpace(s) == "" || strings.ContainsAny(s, " \t\n") {
			return "An image is a reference like \"alpine:3.20\" or \"ghcr.io/acme/agent@sha256:...\", without spaces."
		}
		return ""
	})},
	{name: "command", ty: listOfString, check: checkElementsAttr("command", nil)},
	{name: "entrypoint", ty: listOfString, check: checkElementsAttr("entrypoint", nil)},
	{name: "env", ty: mapOfString, check: checkElementsAttr("env", func(k string) string {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return "Environment variable names cannot be empty or contain \"=\"."
		}
		return ""
	})},
	{name: "workdir", ty: cty.String, check: checkStringAttr("workdir", func(s string) string {
		if !strings.HasPrefix(s, "/") {
			return "The working directory must be an absolute path inside the workload, like \"/workspace\"."
		}
		return ""
	})},
	{name: "user", ty: cty.String},
	{name: "cpus", ty: cty.Number, check: checkCPUs},
	// A size string or a number of bytes; evaluated, a number of bytes.
	{name: "memory", ty: cty.DynamicPseudoType, checked: cty.Number, check: checkMemory},
	// How many processes (threads included) may run at once: a fork bomb
	// in the agent stops there.
	{name: "pids", ty: cty.Number, check: checkPids},
	{name: "labels", ty: mapOfString, check: checkElementsAttr("labels", func(k string) string {
		if k == "" {
			return "Label names cannot be empty."
		}
		return ""
	})},
}

// workloadFields are the plain attributes: one per workloadattr row.
var workloadFields = func() []workloadField {
	var out []workloadField
	for _, r := range workloadattr.Rows {
		i := slices.IndexFunc(workloadFieldChecks, func(f workloadField) bool { return f.name == r.Name })
		if i < 0 {
			out = append(out, workloadField{name: r.Name, ty: r.Type})
			continue
		}
		out = append(out, workloadFieldChecks[i])
	}
	return out
}()

var workloadBlocks = []workloadBlock{
	{
		// An image built from a local context directory. Evaluated: an
		// object with the absolute context and the dockerfile's name.
		name: "build",
		fields: []workloadField{
			{name: "context", ty: cty.String, required: true, check: checkBuildPath("context", "Invalid build context",
				"The build context is a directory, like \"./agent\"; it cannot be empty.")},
			{name: "dockerfile", ty: cty.String, check: checkBuildPath("dockerfile", "Invalid dockerfile",
				"dockerfile is a file name relative to the build context, like \"Dockerfile.agent\"; it cannot be empty.")},
		},
		value: func(attrs map[string]cty.Value, present bool) cty.Value {
			if !present {
				return cty.NullVal(buildType)
			}
			if attrs["dockerfile"].IsNull() {
				attrs["dockerfile"] = cty.StringVal("Dockerfile")
			}
			return cty.ObjectVal(attrs)
		},
	},
	{
		// The destinations the workload may reach. Evaluated: the allow
		// list; null without the block (the workload reaches nothing
		// outside its bottle), empty for a block without allow.
		name:   "egress",
		fields: []workloadField{{name: "allow", ty: listOfString, check: checkAllow}},
		value: func(attrs map[string]cty.Value, present bool) cty.Value {
			switch {
			case !present:
				return cty.NullVal(listOfString)
			case attrs["allow"].IsNull():
				return cty.ListValEmpty(cty.String)
			}
			return attrs["allow"]
		},
	},
	healthcheckBlock,
}

var buildType = workloadattr.BuildType

// healthcheckBlock is how the workload tells it is ready: a command run
// in it every interval, healthy when it exits 0. Evaluated: an object
// with every attribute set (the defaults below filled in), its durations
// in Go's canonical form ("1m30s"), so that "90s" and "1m30s" are the
// same configuration; null without the block.
var healthcheckBlock = workloadBlock{
	name: "healthcheck",
	fields: []workloadField{
		{name: "command", ty: listOfString, required: true, check: checkHealthCommand},
		{name: "interval", ty: cty.String, checked: cty.String, check: checkHealthDuration("interval", false)},
		{name: "timeout", ty: cty.String, checked: cty.String, check: checkHealthDuration("timeout", false)},
		{name: "retries", ty: cty.Number, checked: cty.Number, check: checkHealthRetries},
		{name: "start_period", ty: cty.String, checked: cty.String, check: checkHealthDuration("start_period", true)},
	},
	value: func(attrs map[string]cty.Value, present bool) cty.Value {
		if !present {
			return cty.NullVal(HealthcheckType)
		}
		for name, def := range healthcheckDefaults {
			if v, _ := attrs[name].Unmark(); v.IsNull() {
				attrs[name] = def
			}
		}
		return cty.ObjectVal(attrs)
	},
}

// HealthcheckType is the type of an evaluated healthcheck block.
var HealthcheckType = workloadattr.HealthcheckType

// healthcheckDefaults are the values of the attributes a healthcheck
// block leaves out. The interval is short (docker's own default is 30s,
// and its first check runs one interval after the start): what waits
// for the workload waits about that long once it is ready.
var healthcheckDefaults = map[string]cty.Value{
	"interval":     cty.StringVal("2s"),
	"timeout":      cty.StringVal("5s"),
	"retries":      cty.NumberIntVal(3),
	"start_period": cty.StringVal("0s"),
}

// WorkloadSpec decodes a workload's attributes and blocks. Scope.EvalAgent
// decodes each agent and sidecar with it once, in the agent's evaluation
// context, and then runs the checks.
var WorkloadSpec = func() hcldec.ObjectSpec {
	spec := hcldec.ObjectSpec{}
	attrs := func(fields []workloadField) hcldec.ObjectSpec {
		out := hcldec.ObjectSpec{}
		for _, f := range fields {
			out[f.name] = &hcldec.AttrSpec{Name: f.name, Type: f.ty, Required: f.required}
		}
		return out
	}
	for k, v := range attrs(workloadFields) {
		spec[k] = v
	}
	for _, b := range workloadBlocks {
		spec[b.name] = &hcldec.BlockSpec{TypeName: b.name, Nested: attrs(b.fields)}
	}
	return spec
}()

// workloadSchema is WorkloadSpec's body schema, in the rows' order (so
// hcl's "Did you mean" suggestions do not depend on map order).
var workloadSchema = &hcl.BodySchema{Attributes: fieldSchemas(workloadFields), Blocks: func() []hcl.BlockHeaderSchema {
	var out []hcl.BlockHeaderSchema
	for _, b := range workloadBlocks {
		out = append(out, hcl.BlockHeaderSchema{Type: b.name})
	}
	return out
}()}

func fieldSchemas(fields []workloadField) []hcl.AttributeSchema {
	var out []hcl.AttributeSchema
	for _, f := range fields {
		out = append(out, hcl.AttributeSchema{Name: f.name, Required: f.required})
	}
	return out
}

// IgnorableAttributes are the agent attributes lifecycle.ignore_changes may
// name: the workload's, and sidecar.
var IgnorableAttributes = func() []string {
	names := []string{"sidecar"}
	for _, f := range workloadFields {
		names = append(names, f.name)
	}
	for _, b := range workloadBlocks {
		names = append(names, b.name)
	}
	slices.Sort(names)
	return names
}()

// Workload is what agents and sidecars share, as written: the attributes
// and blocks of WorkloadSpec. Its structure (unknown and missing arguments,
// duplicate blocks) is checked when the configuration is loaded;
// Scope.EvalAgent decodes and checks its values.
type Workload struct {
	body    hcl.Body                    // the agent's or sidecar's block body
	content *hcl.BodyContent            // the workload attributes, and the first block of each type
	nested  map[string]*hcl.BodyContent // the content of those blocks, by type
	creds   []credentialBlock           // the egress block's credential blocks
}

// Has reports whether the workload sets the named attribute or has the
// named block.
func (w *Workload) Has(name string) bool {
	_, ok := w.Range(name)
	return ok
}

// Range is the range of the named attribute's expression, or of the named
// block's header; false when the workload has neither.
func (w *Workload) Range(name string) (hcl.Range, bool) {
	if w.content == nil {
		return hcl.Range{}, false
	}
	if a, ok := w.content.Attributes[name]; ok {
		return a.Expr.Range(), true
	}
	if b := w.block(name); b != nil {
		return b.DefRange, true
	}
	return hcl.Range{}, false
}

func (w *Workload) block(name string) *hcl.Block {
	if w.content == nil {
		return nil
	}
	for _, b := range w.content.Blocks {
		if b.Type == name {
			return b
		}
	}
	return nil
}

// expr is the expression of an attribute of the workload (block "") or of
// one of its blocks; nil when absent.
func (w *Workload) expr(block, name string) hcl.Expression {
	c := w.content
	if block != "" {
		c = w.nested[block]
	}
	if c == nil {
		return nil
	}
	if a, ok := c.Attributes[name]; ok {
		return a.Expr
	}
	return nil
}

// exprs is every expression of the workload, in the schema's order.
func (w *Workload) exprs() []hcl.Expression {
	var out []hcl.Expression
	for _, f := range workloadFields {
		if e := w.expr("", f.name); e != nil {
			out = append(out, e)
		}
	}
	for _, b := range workloadBlocks {
		for _, f := range b.fields {
			if e := w.expr(b.name, f.name); e != nil {
				out = append(out, e)
			}
		}
	}
	return append(out, w.credentialExprs()...)
}

// references are what the workload's expressions refer to, from
// hcldec.Variables.
func (w *Workload) references() []*reference {
	if w.body == nil {
		return nil
	}
	var refs []*reference
	for _, t := range hcldec.Variables(w.body, WorkloadSpec) {
		if ref, _ := parseReference(t); ref != nil {
			refs = append(refs, ref)
		}
	}
	return append(refs, exprRefs(w.credentialExprs()...)...)
}

// decodeWorkload takes the workload attributes and blocks out of the content
// of an agent or sidecar block (kind names it in messages), checking the
// nested blocks' structure. imageOptional allows neither image nor build:
// an agent that boots from a snapshot.
func decodeWorkload(kind string, block *hcl.Block, content *hcl.BodyContent, imageOptional bool) (Workload, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	w := Workload{
		body:    block.Body,
		content: &hcl.BodyContent{Attributes: hcl.Attributes{}, MissingItemRange: content.MissingItemRange},
		nested:  map[string]*hcl.BodyContent{},
	}
	for _, f := range workloadFields {
		if a, ok := content.Attributes[f.name]; ok {
			w.content.Attributes[f.name] = a
		}
	}
	for _, b := range content.Blocks {
		i := slices.IndexFunc(workloadBlocks, func(wb workloadBlock) bool { return wb.name == b.Type })
		if i < 0 {
			continue
		}
		if prev := w.block(b.Type); prev != nil {
			diags = append(diags, duplicateNested(kind, b, prev.DefRange))
			continue
		}
		schema := &hcl.BodySchema{Attributes: fieldSchemas(workloadBlocks[i].fields)}
		if b.Type == "egress" {
			schema = egressSchema(workloadBlocks[i].fields)
		}
		nc, moreDiags := b.Body.Content(schema)
		diags = append(diags, moreDiags...)
		if b.Type == "egress" {
			diags = append(diags, w.decodeCredentials(nc)...)
		}
		w.content.Blocks = append(w.content.Blocks, b)
		w.nested[b.Type] = nc
	}

	build := w.block("build")
	switch {
	case !w.Has("image") && build == nil && !imageOptional:
		diags = append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Missing image or build",
			Detail:   fmt.Sprintf("The %s %q needs what to run: an image attribute, like image = \"alpine:3\", or a build block%s.", kind, block.Labels[0], map[bool]string{true: ", or a from_snapshot to boot from", false: ""}[kind == "agent"]),
			Subject:  block.DefRange.Ptr(),
		})
	case w.Has("image") && build != nil:
		diags = append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Conflicting image and build",
			Detail:   fmt.Sprintf("The %s %q has both an image attribute and a build block; it takes exactly one of them.", kind, block.Labels[0]),
			Subject:  build.DefRange.Ptr(),
		})
	}
	return w, diags
}

// duplicateNested is the error for a second nested block where one is
// allowed.
func duplicateNested(kind string, b *hcl.Block, prev hcl.Range) *hcl.Diagnostic {
	return &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  fmt.Sprintf("Duplicate %s block", b.Type),
		Detail:   fmt.Sprintf("Only one %s block is allowed in %s; the first is at %s.", b.Type, article(kind), prev),
		Subject:  b.DefRange.Ptr(),
	}
}

// evalWorkload decodes a workload with WorkloadSpec in ctx and checks its
// values: an object with one attribute per row, unknowns and sensitive
// marks kept.
func (s *Scope) evalWorkload(ctx *hcl.EvalContext, w *Workload) (cty.Value, hcl.Diagnostics) {
	e := &workloadEval{scope: s, diags: map[string]hcl.Diagnostics{}}
	raw, diags := hcldec.Decode(e.body(w.content, w.nested, ""), WorkloadSpec, ctx)

	// What evaluating reported, in the rows' order, then the checks.
	for _, f := range workloadFields {
		diags = append(diags, e.diags[f.name]...)
	}
	for _, b := range workloadBlocks {
		for _, f := range b.fields {
			diags = append(diags, e.diags[b.name+"."+f.name]...)
		}
	}
	// A value whose evaluation failed is unknown, and not checked.
	check := func(key string, f workloadField, v cty.Value, expr hcl.Expression) cty.Value {
		if e.diags[key].HasErrors() && f.checked != cty.NilType {
			return cty.UnknownVal(f.checked)
		}
		if f.check == nil || e.diags[key].HasErrors() {
			return v
		}
		v, moreDiags := f.check(s, v, expr)
		diags = append(diags, moreDiags...)
		return v
	}
	vals := map[string]cty.Value{}
	for _, f := range workloadFields {
		vals[f.name] = check(f.name, f, raw.GetAttr(f.name), w.expr("", f.name))
	}
	for _, b := range workloadBlocks {
		bv := raw.GetAttr(b.name)
		attrs := map[string]cty.Value{}
		for _, f := range b.fields {
			v := cty.NullVal(f.ty)
			if !bv.IsNull() {
				v = bv.GetAttr(f.name)
			}
			attrs[f.name] = check(b.name+"."+f.name, f, v, w.expr(b.name, f.name))
		}
		vals[b.name] = b.value(attrs, w.block(b.name) != nil)
	}
	creds, moreDiags := s.evalCredentials(ctx, w, vals["egress"], vals["env"])
	diags = append(diags, moreDiags...)
	vals["credentials"] = creds
	return cty.ObjectVal(vals), diags
}

// workloadEval is one decoding of a workload. hcldec.Decode reads the
// workload's body through loadedBody, which gives it the content checked
// when the configuration was loaded (so nothing structural is reported
// twice) with each expression evaluated as Scope.evalAttr does: an
// expression with an invalid reference is unknown, a wrong type names the
// path inside the value. What evaluating reports is kept by attribute
// (hcldec decodes in map order) and put in the rows' order.
type workloadEval struct {
	scope *Scope
	diags map[string]hcl.Diagnostics // by "name" or "block.name"
}

func (e *workloadEval) body(content *hcl.BodyContent, nested map[string]*hcl.BodyContent, block string) hcl.Body {
	return &loadedBody{e: e, content: content, nested: nested, block: block}
}

type loadedBody struct {
	e       *workloadEval
	content *hcl.BodyContent
	nested  map[string]*hcl.BodyContent
	block   string // "" for the workload, or the nested block's type
}

var _ hcl.Body = (*loadedBody)(nil)

func (b *loadedBody) Content(schema *hcl.BodySchema) (*hcl.BodyContent, hcl.Diagnostics) {
	c, _, diags := b.PartialContent(schema)
	return c, diags
}

func (b *loadedBody) PartialContent(schema *hcl.BodySchema) (*hcl.BodyContent, hcl.Body, hcl.Diagnostics) {
	out := &hcl.BodyContent{Attributes: hcl.Attributes{}}
	if b.content == nil {
		return out, hcl.EmptyBody(), nil
	}
	out.MissingItemRange = b.content.MissingItemRange
	fields := workloadFields
	if b.block != "" {
		fields = workloadBlocks[slices.IndexFunc(workloadBlocks, func(wb workloadBlock) bool { return wb.name == b.block })].fields
	}
	for _, as := range schema.Attributes {
		a, ok := b.content.Attributes[as.Name]
		i := slices.IndexFunc(fields, func(f workloadField) bool { return f.name == as.Name })
		if !ok || i < 0 {
			continue
		}
		key := as.Name
		if b.block != "" {
			key = b.block + "." + as.Name
		}
		cp := *a
		cp.Expr = &evalExpr{Expression: a.Expr, e: b.e, key: key, name: as.Name, ty: fields[i].ty}
		out.Attributes[as.Name] = &cp
	}
	for _, bs := range schema.Blocks {
		for _, blk := range b.content.Blocks {
			if blk.Type != bs.Type || b.nested[blk.Type] == nil {
				continue
			}
			cp := *blk
			cp.Body = b.e.body(b.nested[blk.Type], nil, blk.Type)
			out.Blocks = append(out.Blocks, &cp)
		}
	}
	return out, hcl.EmptyBody(), nil
}

func (b *loadedBody) JustAttributes() (hcl.Attributes, hcl.Diagnostics) {
	c, _, diags := b.PartialContent(&hcl.BodySchema{Attributes: fieldSchemas(workloadFields)})
	return c.Attributes, diags
}

func (b *loadedBody) MissingItemRange() hcl.Range {
	if b.content == nil {
		return hcl.Range{}
	}
	return b.content.MissingItemRange
}

// evalExpr is an attribute's expression evaluated and converted to its
// row's type as Scope.evalAttr does, its diagnostics kept aside.
type evalExpr struct {
	hcl.Expression
	e    *workloadEval
	key  string
	name string
	ty   cty.Type
}

func (x *evalExpr) Value(ctx *hcl.EvalContext) (cty.Value, hcl.Diagnostics) {
	v, diags := x.e.scope.evalAttr(ctx, x.Expression, x.name, x.ty)
	x.e.diags[x.key] = append(x.e.diags[x.key], diags...)
	return v, nil
}

// The checks of the rows.

func checkStringAttr(name string, check func(string) string) workloadCheck {
	return func(_ *Scope, v cty.Value, expr hcl.Expression) (cty.Value, hcl.Diagnostics) {
		return v, checkString(v, expr, name, check)
	}
}

func checkElementsAttr(name string, checkKey func(string) string) workloadCheck {
	return func(_ *Scope, v cty.Value, expr hcl.Expression) (cty.Value, hcl.Diagnostics) {
		return v, checkElements(v, expr, name, checkKey)
	}
}

func checkCPUs(_ *Scope, v cty.Value, expr hcl.Expression) (cty.Value, hcl.Diagnostics) {
	if u, _ := v.Unmark(); expr != nil && u.IsKnown() && !u.IsNull() && u.LessThanOrEqualTo(cty.Zero).True() {
		return v, hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Invalid cpus value",
			Detail:   "cpus is the number of CPUs the workload may use, like 2 or 0.5; it must be more than zero.",
			Subject:  expr.Range().Ptr(),
		}}
	}
	return v, nil
}

func checkPids(_ *Scope, v cty.Value, expr hcl.Expression) (cty.Value, hcl.Diagnostics) {
	u, _ := v.Unmark()
	if expr == nil || !u.IsKnown() || u.IsNull() {
		return v, nil
	}
	if bf := u.AsBigFloat(); !bf.IsInt() || bf.Sign() <= 0 || bf.Cmp(big.NewFloat(1<<22)) > 0 {
		return v, hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Invalid pids value",
			Detail:   "pids is how many processes (threads included) the workload may run at once, a whole number from 1 to 4194304, like 512.",
			Subject:  expr.Range().Ptr(),
		}}
	}
	return v, nil
}

func checkMemory(_ *Scope, v cty.Value, expr hcl.Expression) (cty.Value, hcl.Diagnostics) {
	if expr == nil {
		return cty.NullVal(cty.Number), nil
	}
	return memoryValue(v, expr)
}

func checkAllow(_ *Scope, v cty.Value, expr hcl.Expression) (cty.Value, hcl.Diagnostics) {
	diags := checkElements(v, expr, "allow", nil)
	if expr != nil {
		diags = append(diags, checkEgressRules(v, expr)...)
	}
	return v, diags
}

// checkBuildPath checks a build block's path, which must be known when the
// plan is made (the driver hashes the context then): a non-empty string.
// A context is made absolute, relative to the configuration's directory.
// Evaluated, it is unmarked.
func checkBuildPath(name, summary, detail string) workloadCheck {
	return func(s *Scope, v cty.Value, expr hcl.Expression) (cty.Value, hcl.Diagnostics) {
		v = unmarkDeep(v)
		switch {
		case expr == nil:
			return cty.NullVal(cty.String), nil
		case !v.IsKnown():
			return v, s.mustBeKnown(name, expr)
		case v.IsNull() || v.AsString() == "":
			return cty.UnknownVal(cty.String), hcl.Diagnostics{{
				Severity: hcl.DiagError,
				Summary:  summary,
				Detail:   detail,
				Subject:  expr.Range().Ptr(),
			}}
		case name == "context":
			return cty.StringVal(s.cfg.resolvePath(v.AsString())), nil
		}
		return v, nil
	}
}

// healthcheckHelp is how a healthcheck command is written.
const healthcheckHelp = `healthcheck.command is the command run in the workload, as a list and without a shell, like ["pg_isready", "-U", "postgres"]; the workload is healthy when it exits 0. For a shell, write ["sh", "-c", "test -f /ready"].`

// checkHealthCommand checks a healthcheck's command: a non-empty list of
// strings whose first is a program. Docker's HEALTHCHECK forms ("CMD",
// "CMD-SHELL", "NONE" first) are refused, so the list means one thing.
func checkHealthCommand(_ *Scope, v cty.Value, expr hcl.Expression) (cty.Value, hcl.Diagnostics) {
	diags := checkElements(v, expr, "healthcheck.command", nil)
	u := unmarkDeep(v)
	if expr == nil || diags.HasErrors() || !u.IsKnown() || u.IsNull() {
		return v, diags
	}
	bad := func(summary, detail string, subject hcl.Range) (cty.Value, hcl.Diagnostics) {
		return v, append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  summary,
			Detail:   detail,
			Subject:  subject.Ptr(),
		})
	}
	if u.LengthInt() == 0 {
		return bad("Empty healthcheck command", "The healthcheck has no command. "+healthcheckHelp, expr.Range())
	}
	first := u.Index(cty.NumberIntVal(0))
	if !first.IsKnown() {
		return v, diags
	}
	at := elementRanges(expr, u.LengthInt())[0]
	switch s := first.AsString(); {
	case strings.TrimSpace(s) == "":
		return bad("Invalid healthcheck command", "The healthcheck command's first element, the program, is empty. "+healthcheckHelp, at)
	case s == "CMD" || s == "CMD-SHELL" || s == "NONE":
		return bad("Invalid healthcheck command", fmt.Sprintf("The healthcheck command starts with %q, as docker's HEALTHCHECK does; here the list is the command itself. %s", s, healthcheckHelp), at)
	}
	return v, diags
}

// checkHealthDuration checks one of a healthcheck's durations: Go's
// syntax ("2s", "500ms", "1m30s"), more than zero (or zero, for
// start_period), and at least a millisecond, the engine's finest. It is
// normalised to Go's canonical form; absent, it is null (the block's
// value gives its default).
func checkHealthDuration(name string, zeroOK bool) workloadCheck {
	return func(_ *Scope, v cty.Value, expr hcl.Expression) (cty.Value, hcl.Diagnostics) {
		u, marks := v.Unmark()
		if expr == nil {
			return cty.NullVal(cty.String), nil
		}
		if !u.IsKnown() || u.IsNull() {
			return v, nil
		}
		d, err := time.ParseDuration(u.AsString())
		msg := ""
		switch {
		case err != nil:
			msg = "is not a duration"
		case d < 0:
			msg = "is negative"
		case d == 0 && !zeroOK:
			msg = "is zero; it must be more than zero"
		case d > 0 && d < time.Millisecond:
			msg = "is less than a millisecond, the shortest the runtimes take"
		}
		if msg == "" {
			return cty.StringVal(d.String()).WithMarks(marks), nil
		}
		detail := fmt.Sprintf("healthcheck.%s %q %s. Write a duration like \"2s\", \"500ms\" or \"1m30s\".", name, u.AsString(), msg)
		if len(marks) > 0 {
			detail = fmt.Sprintf("healthcheck.%s is sensitive, so it is not shown; it %s. Write a duration like \"2s\", \"500ms\" or \"1m30s\".", name, msg)
		}
		return cty.UnknownVal(cty.String).WithMarks(marks), hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Invalid healthcheck " + name,
			Detail:   detail,
			Subject:  expr.Range().Ptr(),
		}}
	}
}

// checkHealthRetries checks how many failed checks in a row make the
// workload unhealthy: a whole number, at least 1.
func checkHealthRetries(_ *Scope, v cty.Value, expr hcl.Expression) (cty.Value, hcl.Diagnostics) {
	u, marks := v.Unmark()
	if expr == nil {
		return cty.NullVal(cty.Number), nil
	}
	if !u.IsKnown() || u.IsNull() {
		return v, nil
	}
	if n, acc := u.AsBigFloat().Int64(); acc == big.Exact && n >= 1 && n <= 1<<31-1 {
		return v, nil
	}
	return cty.UnknownVal(cty.Number).WithMarks(marks), hcl.Diagnostics{{
		Severity: hcl.DiagError,
		Summary:  "Invalid healthcheck retries",
		Detail:   "healthcheck.retries is how many failed checks in a row make the workload unhealthy: a whole number, at least 1, like 3.",
		Subject:  expr.Range().Ptr(),
	}}
}
