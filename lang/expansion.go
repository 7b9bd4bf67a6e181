package lang

import (
	"fmt"
	"math/big"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"

	"github.com/bottlefile/bottlefile/addrs"
)

// for_each and count, as Terraform has them: an agent or snapshot block
// with either stands for one instance per key, each with the address
// NAME["KEY"] (for_each) or NAME[N] (count), and its expressions see
// each.key and each.value, or count.index. The keys must be known when the
// configuration is evaluated (NewScope): they may come from variables and
// locals, not from what only apply knows.

// References to the instance being evaluated.
const (
	refEach  = "each"
	refCount = "count"
)

// Instances says whether and how a block repeats. The zero value is a
// block without for_each and count.
type Instances struct {
	ForEach hcl.Expression // a map, or a set of strings; nil when absent
	Count   hcl.Expression // a whole number; nil when absent

	// Key is the instance's key once expanded; addrs.NoKey for the block
	// itself.
	Key addrs.InstanceKey
	// EachValue is each.value of a for_each instance: the map's element,
	// or the key for a set.
	EachValue cty.Value

	// expanded maps the address of each block with instances to its
	// instances' addresses, sorted; set on every block NewScope expanded,
	// so that References gives the instances a reference to the block
	// depends on. nil before.
	expanded map[string][]string
}

// Repeats reports whether the block has for_each or count.
func (in Instances) Repeats() bool { return in.ForEach != nil || in.Count != nil }

func (in Instances) blockName(name string) string {
	if in.Key.IsNone() {
		return name
	}
	block, _, _ := addrs.ParseInstanceName(name)
	return block
}

// refKinds are the references the block's expressions may make: all
// blocks, plus each with for_each and count with count.
func (in Instances) refKinds() []string {
	switch {
	case in.ForEach != nil:
		return append(slices.Clone(allKinds), refEach)
	case in.Count != nil:
		return append(slices.Clone(allKinds), refCount)
	}
	return allKinds
}

// decodeInstances reads for_each and count. Both at once is an error at
// count; so is a block name its instances' engine names would blur.
func decodeInstances(kind string, block *hcl.Block, content *hcl.BodyContent) (Instances, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	var in Instances
	forEach, hasForEach := content.Attributes["for_each"]
	count, hasCount := content.Attributes["count"]
	if hasForEach && hasCount {
		diags = append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  `Invalid combination of "count" and "for_each"`,
			Detail:   fmt.Sprintf(`The "count" and "for_each" meta-arguments are mutually exclusive: %s %q repeats by one of them only. Keep for_each for instances with names, count for numbered ones.`, article(kind), block.Labels[0]),
			Subject:  count.NameRange.Ptr(),
		})
		hasCount = false
	}
	if hasForEach {
		in.ForEach = forEach.Expr
	}
	if hasCount {
		in.Count = count.Expr
	}
	if in.Repeats() {
		if why := addrs.CheckInstancedName(block.Labels[0]); why != "" && ValidName(block.Labels[0]) {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  fmt.Sprintf("Invalid %s name for instances", kind),
				Detail:   fmt.Sprintf("%q: %s.", block.Labels[0], why),
				Subject:  labelRange(block, 0).Ptr(),
			})
		}
	}
	return in, diags
}

// agentRef decodes a snapshot block's agent: agent.NAME, agent.NAME["KEY"]
// or agent.NAME[N]; in a block with instances also agent.NAME[EXPR], the
// key evaluated per instance (each.key, count.index). It returns the
// instance name (the block's name when the key is an expression) and the
// key expression (nil when static).
func agentRef(attr *hcl.Attribute, in Instances) (string, hcl.Expression, hcl.Diagnostics) {
	bad := hcl.Diagnostics{{
		Severity: hcl.DiagError,
		Summary:  "Invalid agent reference",
		Detail:   "The agent attribute takes a reference to an agent, like agent = agent.NAME, or one instance of an agent with for_each or count, like agent.NAME[\"KEY\"] or agent.NAME[each.key], written without quotes.",
		Subject:  attr.Expr.Range().Ptr(),
	}}
	if ix, ok := attr.Expr.(*hclsyntax.IndexExpr); ok && in.Repeats() {
		t, diags := hcl.AbsTraversalForExpr(ix.Collection)
		if diags.HasErrors() || len(t) != 2 || t.RootName() != refAgent {
			return "", nil, bad
		}
		step, ok := t[1].(hcl.TraverseAttr)
		if !ok {
			return "", nil, bad
		}
		return step.Name, ix.Key, nil
	}
	t, diags := hcl.AbsTraversalForExpr(attr.Expr)
	if diags.HasErrors() || (len(t) != 2 && len(t) != 3) || t.RootName() != refAgent {
		return "", nil, bad
	}
	step, ok := t[1].(hcl.TraverseAttr)
	if !ok {
		return "", nil, bad
	}
	if len(t) == 2 {
		return step.Name, nil, nil
	}
	ix, ok := t[2].(hcl.TraverseIndex)
	if !ok {
		return "", nil, bad
	}
	key, why := instanceKey(ix.Key)
	if why != "" {
		return "", nil, hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Invalid instance key",
			Detail:   why,
			Subject:  ix.SrcRange.Ptr(),
		}}
	}
	return step.Name + key.String(), nil, nil
}

// instanceKey is the key a known value names: a string for for_each, a
// whole number for count. The reason is "" when it is one.
func instanceKey(v cty.Value) (addrs.InstanceKey, string) {
	v, _ = v.Unmark()
	switch {
	case v.IsNull() || !v.IsKnown():
		return addrs.NoKey, "an instance key must be known: a string (for_each) or a whole number (count)"
	case v.Type() == cty.String:
		if why := addrs.CheckStringKey(v.AsString()); why != "" {
			return addrs.NoKey, fmt.Sprintf("the key %q is no instance key: %s", v.AsString(), why)
		}
		return addrs.StringKey(v.AsString()), ""
	case v.Type() == cty.Number:
		bf := v.AsBigFloat()
		n, acc := bf.Int64()
		if acc != big.Exact || n < 0 || n > maxCount {
			return addrs.NoKey, fmt.Sprintf("the index %s is no instance key: a count index is a whole number from 0", bf.Text('f', -1))
		}
		return addrs.IntKey(int(n)), ""
	}
	return addrs.NoKey, fmt.Sprintf("an instance key is a string (for_each) or a whole number (count), not %s", typeString(v.Type()))
}

// maxCount bounds count: more bottles than this is a mistake, not a fleet.
const maxCount = 1000

// instance is one key of a block and its each.value.
type instance struct {
	key   addrs.InstanceKey
	value cty.Value
}

// keys evaluates for_each or count of a block. Unknown, sensitive, null,
// wrongly typed and duplicate keys are errors on the expression. ctx
// holds what the expression refers to.
func (in Instances) keys(kind, name string, ctx *hcl.EvalContext) ([]instance, hcl.Diagnostics) {
	expr, attr := in.ForEach, "for_each"
	if expr == nil {
		expr, attr = in.Count, "count"
	}
	fail := func(detail string) hcl.Diagnostics {
		return hcl.Diagnostics{{
			Severity:    hcl.DiagError,
			Summary:     fmt.Sprintf("Invalid %s argument", attr),
			Detail:      fmt.Sprintf("%s of %s %q: %s", attr, kind, name, detail),
			Subject:     expr.Range().Ptr(),
			Expression:  expr,
			EvalContext: ctx,
		}}
	}
	v, diags := expr.Value(ctx)
	if diags.HasErrors() {
		return nil, diags
	}
	if v.HasMark(Sensitive) || v.ContainsMarked() {
		return nil, fail("the value is sensitive, and keys become addresses and engine names that every plan and label shows. Use a value that is not sensitive (nonsensitive(...) when you are sure).")
	}
	if !v.IsWhollyKnown() {
		return nil, fail("the value depends on something known only after apply (or on a variable not given). The instances must be known when planning: use variables and locals, not agents' or snapshots' attributes.")
	}
	if v.IsNull() {
		return nil, fail("the value is null; use an empty map or set for no instances.")
	}
	if in.Count != nil {
		k, why := instanceKey(v)
		if why != "" || !k.IsInt() {
			return nil, fail(fmt.Sprintf("count takes a whole number from 0 to %d, not %s.", maxCount, valueText(v)))
		}
		out := make([]instance, k.Int())
		for i := range out {
			out[i] = instance{key: addrs.IntKey(i), value: cty.NilVal}
		}
		return out, nil
	}
	ty := v.Type()
	var out []instance
	seen := map[string]bool{}
	add := func(k cty.Value, e cty.Value) hcl.Diagnostics {
		if k.Type() != cty.String {
			return fail(fmt.Sprintf("the keys are %s; for_each takes a map, or a set of strings.", typeString(k.Type())))
		}
		key, why := instanceKey(k)
		if why != "" {
			return fail(why + ".")
		}
		if seen[key.Str()] {
			return fail(fmt.Sprintf("the key %q comes twice; each instance needs its own key.", key.Str()))
		}
		seen[key.Str()] = true
		out = append(out, instance{key: key, value: e})
		return nil
	}
	switch {
	case ty.IsMapType() || ty.IsObjectType():
		for it := v.ElementIterator(); it.Next(); {
			k, e := it.Element()
			if d := add(k, e); d != nil {
				return nil, d
			}
		}
	case ty.IsSetType():
		if !ty.ElementType().Equals(cty.String) {
			return nil, fail(fmt.Sprintf("a set of %s; for_each takes a set of strings (toset([...])) or a map.", typeString(ty.ElementType())))
		}
		for it := v.ElementIterator(); it.Next(); {
			_, e := it.Element()
			if d := add(e, e); d != nil {
				return nil, d
			}
		}
	case ty.IsTupleType() || ty.IsListType():
		// Terraform refuses lists, whose order would make keys of
		// indices; so do we, but it says what to write.
		return nil, fail("a list has no keys; write toset([...]) for a set of strings, or a map.")
	default:
		return nil, fail(fmt.Sprintf("for_each takes a map, or a set of strings, not %s.", typeString(ty)))
	}
	return out, nil
}

// valueText is a short spelling of a known value for a message.
func valueText(v cty.Value) string {
	switch {
	case v.Type() == cty.Number:
		return v.AsBigFloat().Text('g', -1)
	case v.Type() == cty.String:
		return fmt.Sprintf("%q", v.AsString())
	}
	return typeString(v.Type())
}

// instanceVars adds each or count to ctx for the instance in is, or
// unknowns of their types for the block itself (validation, before the
// keys are known).
func (in Instances) instanceVars(ctx *hcl.EvalContext) {
	switch {
	case in.ForEach != nil:
		key, value := cty.UnknownVal(cty.String), cty.DynamicVal
		if in.Key.IsString() {
			key, value = cty.StringVal(in.Key.Str()), in.EachValue
		}
		ctx.Variables[refEach] = cty.ObjectVal(map[string]cty.Value{"key": key, "value": value})
	case in.Count != nil:
		index := cty.UnknownVal(cty.Number)
		if in.Key.IsInt() {
			index = cty.NumberIntVal(int64(in.Key.Int()))
		}
		ctx.Variables[refCount] = cty.ObjectVal(map[string]cty.Value{"index": index})
	}
}

// expandedRefs replaces the address of a block with instances by its
// instances' addresses: a reference to agent.coder depends on every
// coder. References to each and count are no blocks and left out.
func (in Instances) expandedRefs(refs []string) []string {
	out := refs[:0:0]
	for _, r := range refs {
		if strings.HasPrefix(r, refEach+".") || strings.HasPrefix(r, refCount+".") {
			continue
		}
		if insts, ok := in.expanded[r]; ok {
			out = append(out, insts...)
			continue
		}
		out = append(out, r)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// expand replaces every agent and snapshot block with for_each or count
// by its instances, named NAME["KEY"] or NAME[N], in c.Agents and
// c.Snapshots; the blocks as declared stay in c.agentBlocks and
// c.snapshotBlocks. A scope made after another expands again from the
// blocks. s.mu is held.
func (s *Scope) expand() hcl.Diagnostics {
	var diags hcl.Diagnostics
	c := s.cfg
	if c.agentBlocks == nil {
		c.agentBlocks, c.snapshotBlocks = c.Agents, c.Snapshots
	}
	agents := map[string]*Agent{}
	snapshots := map[string]*Snapshot{}
	expanded := map[string][]string{}
	instances := map[string][]*Agent{}
	for _, name := range sortedKeys(c.agentBlocks) {
		a := c.agentBlocks[name]
		if !a.Repeats() {
			b := *a
			agents[name] = &b
			continue
		}
		ctx, moreDiags := s.evalContext(exprRefs(a.ForEach, a.Count), nil)
		diags = append(diags, moreDiags...)
		keys, moreDiags := a.keys("agent", name, ctx)
		diags = append(diags, moreDiags...)
		expanded[a.Addr()] = []string{}
		for _, k := range keys {
			inst := a.instance(k)
			agents[inst.Name] = inst
			instances[name] = append(instances[name], inst)
			expanded[a.Addr()] = append(expanded[a.Addr()], inst.Addr())
		}
	}
	for _, name := range sortedKeys(c.snapshotBlocks) {
		sn := c.snapshotBlocks[name]
		if !sn.Repeats() {
			b := *sn
			snapshots[name] = &b
			continue
		}
		ctx, moreDiags := s.evalContext(exprRefs(sn.ForEach, sn.Count), nil)
		diags = append(diags, moreDiags...)
		keys, moreDiags := sn.keys("snapshot", name, ctx)
		diags = append(diags, moreDiags...)
		expanded[sn.Addr()] = []string{}
		for _, k := range keys {
			inst, moreDiags := s.snapshotInstance(sn, k, agents)
			diags = append(diags, moreDiags...)
			if inst != nil {
				snapshots[inst.Name] = inst
				expanded[sn.Addr()] = append(expanded[sn.Addr()], inst.Addr())
			}
		}
	}
	for _, a := range agents {
		a.expanded = expanded
	}
	for _, sn := range snapshots {
		sn.expanded = expanded
		if !agentDeclared(agents, sn.AgentName) && sn.AgentName != "" && agentDeclared(c.agentBlocks, sn.AgentName) {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Reference to an agent instance that does not exist",
				Detail:   fmt.Sprintf("%s snapshots agent.%s, which its agent block's for_each or count does not make.", sn.Addr(), sn.AgentName),
				Subject:  sn.AgentRange.Ptr(),
			})
		}
	}
	c.Agents, c.Snapshots = agents, snapshots
	s.instances = instances
	s.locals = map[string]cty.Value{}
	return diags
}

// checkKeys checks for_each or count as far as it is known with the
// variables unknown (validation): a sensitive value, a value of the wrong
// type, a duplicate or invalid key. An unknown value is for NewScope.
func (s *Scope) checkKeys(kind, name string, in Instances) hcl.Diagnostics {
	if !in.Repeats() {
		return nil
	}
	expr := in.ForEach
	if expr == nil {
		expr = in.Count
	}
	if s.cfg.invalid[expr.Range()] {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ctx, diags := s.evalContext(exprRefs(expr), nil)
	v, moreDiags := expr.Value(ctx)
	if moreDiags.HasErrors() {
		return append(diags, moreDiags...)
	}
	if !v.IsWhollyKnown() && !v.ContainsMarked() {
		return diags
	}
	_, moreDiags = in.keys(kind, name, ctx)
	return append(diags, moreDiags...)
}

// agentDeclared reports whether the instance name is an agent of agents,
// or (for the blocks) whether its block is.
func agentDeclared(agents map[string]*Agent, name string) bool {
	if _, ok := agents[name]; ok {
		return true
	}
	block, key, why := addrs.ParseInstanceName(name)
	if why != "" || key.IsNone() {
		return false
	}
	a, ok := agents[block]
	return ok && a.Repeats()
}

// instance is the agent's instance with key k: a copy named for it, its
// sidecars copied to belong to it.
func (a *Agent) instance(k instance) *Agent {
	inst := *a
	inst.Name = a.Name + k.key.String()
	inst.Key, inst.EachValue = k.key, k.value
	inst.Sidecars = make([]*Sidecar, len(a.Sidecars))
	for i, sc := range a.Sidecars {
		c := *sc
		c.AgentName = inst.Name
		inst.Sidecars[i] = &c
	}
	return &inst
}

// snapshotInstance is the snapshot block's instance with key k, its agent
// resolved (agent.X[each.key]).
func (s *Scope) snapshotInstance(sn *Snapshot, k instance, agents map[string]*Agent) (*Snapshot, hcl.Diagnostics) {
	inst := *sn
	inst.Name = sn.Name + k.key.String()
	inst.Key, inst.EachValue = k.key, k.value
	if sn.AgentKey == nil {
		return &inst, nil
	}
	ctx, diags := s.evalContext(exprRefs(sn.AgentKey), nil)
	inst.instanceVars(ctx)
	v, moreDiags := sn.AgentKey.Value(ctx)
	diags = append(diags, moreDiags...)
	if diags.HasErrors() {
		return nil, diags
	}
	key, why := instanceKey(v)
	if why != "" {
		return nil, append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Invalid instance key",
			Detail:   fmt.Sprintf("%s: %s.", inst.Addr(), why),
			Subject:  sn.AgentKey.Range().Ptr(),
		})
	}
	inst.AgentName = sn.AgentName + key.String()
	inst.AgentKey = nil
	return &inst, diags
}

// checkInstanceRef checks each.key, each.value and count.index: known
// attributes, and only in a block with for_each (each) or count (count).
func checkInstanceRef(allowed []string, ref *reference) hcl.Diagnostics {
	attrs := map[string][]string{refEach: {"key", "value"}, refCount: {"index"}}[ref.kind]
	meta := map[string]string{refEach: "for_each", refCount: "count"}[ref.kind]
	if !slices.Contains(allowed, ref.kind) {
		return hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  fmt.Sprintf("Reference to %q in context without %s", ref.addr, meta),
			Detail:   fmt.Sprintf("%s is only available in an agent or snapshot block with %s, where it names the instance being made.", ref.addr, meta),
			Subject:  ref.rng.Ptr(),
		}}
	}
	if !slices.Contains(attrs, ref.name) {
		return hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Unsupported attribute",
			Detail:   fmt.Sprintf("%s has no attribute %q; it has %s.", ref.kind, ref.name, strings.Join(attrs, " and ")),
			Subject:  ref.rng.Ptr(),
		}}
	}
	return nil
}
