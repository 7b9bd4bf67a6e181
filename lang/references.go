package lang

import (
	"fmt"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"

	"github.com/bottlefile/bottlefile/addrs"
)

// Kinds of references, the root names an expression may start with.
const (
	refVar      = "var"
	refLocal    = "local"
	refAgent    = "agent"
	refSnapshot = "snapshot"
	refRuntime  = "runtime"
)

var refNouns = map[string]string{
	refVar:      "input variable",
	refLocal:    "local value",
	refAgent:    "agent",
	refSnapshot: "snapshot",
	refRuntime:  "runtime",
	refEach:     "for_each instance",
	refCount:    "count instance",
}

// reference is one traversal in an expression, resolved to the block it
// names: var.x, local.x, agent.x (from agent.x.id), snapshot.x, runtime.x.
type reference struct {
	kind, name string
	addr       string // kind.name
	rng        hcl.Range
	traversal  hcl.Traversal
}

// parseReference resolves a traversal's first two steps. Unknown roots and
// a root with no name after it are errors.
func parseReference(t hcl.Traversal) (*reference, hcl.Diagnostics) {
	root := t.RootName()
	if _, ok := refNouns[root]; !ok {
		return nil, hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Unknown variable",
			Detail:   fmt.Sprintf("There is no variable named %q. A reference starts with var., local., agent., snapshot. or runtime. (each. and count. in a block with for_each or count).", root),
			Subject:  t[0].SourceRange().Ptr(),
		}}
	}
	if len(t) < 2 {
		return nil, hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Invalid reference",
			Detail:   fmt.Sprintf("A reference to %s must name one, like %s.NAME.", article(refNouns[root]), root),
			Subject:  t.SourceRange().Ptr(),
		}}
	}
	attr, ok := t[1].(hcl.TraverseAttr)
	if !ok {
		return nil, hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Invalid reference",
			Detail:   fmt.Sprintf("A reference to %s must name one with an attribute, like %s.NAME; an index cannot select it.", article(refNouns[root]), root),
			Subject:  hcl.RangeBetween(t[0].SourceRange(), t[1].SourceRange()).Ptr(),
		}}
	}
	return &reference{
		kind:      root,
		name:      attr.Name,
		addr:      root + "." + attr.Name,
		rng:       hcl.RangeBetween(t[0].SourceRange(), t[1].SourceRange()),
		traversal: t,
	}, nil
}

func article(noun string) string {
	switch noun[0] {
	case 'a', 'e', 'i', 'o', 'u':
		return "an " + noun
	}
	return "a " + noun
}

// exprRefs collects the references of expressions, silently skipping
// traversals that do not resolve (checkReferences reports those).
func exprRefs(exprs ...hcl.Expression) []*reference {
	var refs []*reference
	for _, expr := range exprs {
		if expr == nil {
			continue
		}
		for _, t := range expr.Variables() {
			if ref, _ := parseReference(t); ref != nil {
				refs = append(refs, ref)
			}
		}
	}
	return refs
}

// refAddrs is the sorted, deduplicated addresses of refs.
func refAddrs(refs []*reference, extra ...string) []string {
	seen := map[string]bool{}
	var out []string
	for _, r := range refs {
		if !seen[r.addr] {
			seen[r.addr] = true
			out = append(out, r.addr)
		}
	}
	for _, a := range extra {
		if a != "" && !seen[a] {
			seen[a] = true
			out = append(out, a)
		}
	}
	sort.Strings(out)
	return out
}

// checkRefs reports references in exprs that name something undeclared or
// of a kind not allowed in this place ("in a runtime block").
func (c *Config) checkRefs(where string, allowed []string, exprs ...hcl.Expression) hcl.Diagnostics {
	var diags hcl.Diagnostics
	for _, expr := range exprs {
		if expr == nil {
			continue
		}
		var exprDiags hcl.Diagnostics
		for _, t := range expr.Variables() {
			ref, moreDiags := parseReference(t)
			exprDiags = append(exprDiags, moreDiags...)
			if ref == nil {
				continue
			}
			exprDiags = append(exprDiags, c.checkRef(where, allowed, ref)...)
		}
		if exprDiags.HasErrors() {
			c.invalid[expr.Range()] = true
		}
		diags = append(diags, exprDiags...)
	}
	return diags
}

func (c *Config) checkRef(where string, allowed []string, ref *reference) hcl.Diagnostics {
	if ref.kind == refEach || ref.kind == refCount {
		return checkInstanceRef(allowed, ref)
	}
	ok := false
	for _, k := range allowed {
		if k == ref.kind {
			ok = true
		}
	}
	if !ok {
		return hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Invalid reference",
			Detail:   fmt.Sprintf("%s cannot refer to %s here (%s).", ref.addr, article(refNouns[ref.kind]), where),
			Subject:  ref.rng.Ptr(),
		}}
	}
	if c.declared(ref.kind, ref.name) {
		return c.checkRefAttr(ref)
	}
	noun := refNouns[ref.kind]
	detail := fmt.Sprintf("There is no %s named %q.", noun, ref.name)
	if s := c.suggest(ref.kind, ref.name); s != "" {
		detail += fmt.Sprintf(" Did you mean %q?", s)
	} else if ref.kind == refVar || ref.kind == refLocal || ref.kind == refRuntime {
		detail += fmt.Sprintf(" Declare it with a %s block.", map[string]string{refVar: "variable", refLocal: "locals", refRuntime: "runtime"}[ref.kind])
	}
	return hcl.Diagnostics{{
		Severity: hcl.DiagError,
		Summary:  fmt.Sprintf("Reference to undeclared %s", noun),
		Detail:   detail,
		Subject:  ref.rng.Ptr(),
	}}
}

func (c *Config) declared(kind, name string) bool {
	switch kind {
	case refVar:
		_, ok := c.Variables[name]
		return ok
	case refLocal:
		_, ok := c.Locals[name]
		return ok
	case refAgent:
		_, ok := c.Agents[name]
		return ok
	case refSnapshot:
		_, ok := c.Snapshots[name]
		return ok
	case refRuntime:
		_, ok := c.Runtimes[name]
		return ok
	}
	return false
}

// suggest is a declared name of kind close to name, or "".
func (c *Config) suggest(kind, name string) string {
	var names []string
	switch kind {
	case refVar:
		names = sortedKeys(c.Variables)
	case refLocal:
		names = sortedKeys(c.Locals)
	case refAgent:
		names = sortedKeys(c.Agents)
	case refSnapshot:
		names = sortedKeys(c.Snapshots)
	case refRuntime:
		names = sortedKeys(c.Runtimes)
	}
	return nameSuggestion(name, names)
}

// nameSuggestion returns the candidate within edit distance 2 of given, the
// closest first, or "".
func nameSuggestion(given string, candidates []string) string {
	best, bestDist := "", 3
	for _, c := range candidates {
		if d := addrs.EditDistance(given, c); d < bestDist {
			best, bestDist = c, d
		}
	}
	return best
}

// checkRefAttr checks the attribute a reference to an agent or a snapshot
// takes, so that a misspelling is reported with what there is to choose.
func (c *Config) checkRefAttr(ref *reference) hcl.Diagnostics {
	if len(ref.traversal) < 3 {
		return nil
	}
	attr, ok := ref.traversal[2].(hcl.TraverseAttr)
	if !ok {
		return nil
	}
	var names []string
	switch ref.kind {
	case refAgent:
		names = []string{"id", "image", "name", "sidecar"}
	case refSnapshot:
		names = sortedKeys(SnapshotObjectType.AttributeTypes())
	case refRuntime:
		names = sortedKeys(runtimeObjectType.AttributeTypes())
	default:
		return nil
	}
	if !contains(names, attr.Name) {
		detail := fmt.Sprintf("%s has no attribute %q; it has %s.", ref.addr, attr.Name, strings.Join(names, ", "))
		if s := nameSuggestion(attr.Name, names); s != "" {
			detail += fmt.Sprintf(" Did you mean %q?", s)
		}
		return hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Unsupported attribute",
			Detail:   detail,
			Subject:  hcl.RangeBetween(ref.rng, attr.SrcRange).Ptr(),
		}}
	}
	if ref.kind != refAgent || attr.Name != "sidecar" || len(ref.traversal) < 4 {
		return nil
	}
	sc, ok := ref.traversal[3].(hcl.TraverseAttr)
	if !ok {
		return nil
	}
	a := c.Agents[ref.name]
	if a.Sidecar(sc.Name) != nil {
		return nil
	}
	var sidecars []string
	for _, s := range a.Sidecars {
		sidecars = append(sidecars, s.Name)
	}
	detail := fmt.Sprintf("The agent %q has no sidecar named %q.", ref.name, sc.Name)
	if s := nameSuggestion(sc.Name, sidecars); s != "" {
		detail += fmt.Sprintf(" Did you mean %q?", s)
	}
	return hcl.Diagnostics{{
		Severity: hcl.DiagError,
		Summary:  "Reference to undeclared sidecar",
		Detail:   detail,
		Subject:  hcl.RangeBetween(ref.rng, sc.SrcRange).Ptr(),
	}}
}
