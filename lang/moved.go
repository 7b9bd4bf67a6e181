package lang

import (
	"fmt"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"

	"github.com/bottlefile/bottlefile/addrs"
)

// Moved is a `moved { from = agent.old  to = agent.new }` block: the agent
// recorded at From, with everything it owns (sidecars, gateway, network,
// images, policy snapshots), is now the agent at To. It has Terraform's
// semantics: the plan moves the records instead of destroying one bottle
// and creating another; once done it is a no-op, so it may stay in the
// configuration; moves chain (a -> b, b -> c moves a to c).
type Moved struct {
	From, To addrs.Addr

	FromRange, ToRange hcl.Range
	DeclRange          hcl.Range
}

var movedSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "from", Required: true},
		{Name: "to", Required: true},
	},
}

// decodeMovedBlock reads one moved block. Both ends must be agent
// addresses written as plain references, not strings or expressions.
func decodeMovedBlock(block *hcl.Block) (*Moved, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	content, moreDiags := block.Body.Content(movedSchema)
	diags = append(diags, moreDiags...)
	if content == nil {
		return nil, diags
	}
	m := &Moved{DeclRange: block.DefRange}
	ok := true
	for _, end := range []struct {
		name string
		addr *addrs.Addr
		rng  *hcl.Range
	}{{"from", &m.From, &m.FromRange}, {"to", &m.To, &m.ToRange}} {
		attr, present := content.Attributes[end.name]
		if !present {
			ok = false
			continue
		}
		*end.rng = attr.Expr.Range()
		addr, d := movedAddr(end.name, attr.Expr)
		if d != nil {
			diags = append(diags, d)
			ok = false
			continue
		}
		*end.addr = addr
	}
	if !ok {
		return nil, diags
	}
	if m.From == m.To {
		diags = append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Redundant move",
			Detail:   fmt.Sprintf("This moved block moves %s to itself; remove it, or name the address it was moved from.", m.From),
			Subject:  hcl.RangeBetween(m.FromRange, m.ToRange).Ptr(),
		})
		return nil, diags
	}
	return m, diags
}

// movedAddr reads one end of a moved block: agent.NAME, nothing more.
func movedAddr(name string, expr hcl.Expression) (addrs.Addr, *hcl.Diagnostic) {
	bad := func(detail string) (addrs.Addr, *hcl.Diagnostic) {
		return addrs.Addr{}, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Invalid move address",
			Detail:   fmt.Sprintf("The %s of a moved block %s; write agent.NAME, e.g. %s = agent.coder.", name, detail, name),
			Subject:  expr.Range().Ptr(),
		}
	}
	trav, diags := hcl.AbsTraversalForExpr(expr)
	if diags.HasErrors() {
		return bad("must be a plain reference, not a string or an expression")
	}
	var parts []string
	for _, step := range trav {
		switch s := step.(type) {
		case hcl.TraverseRoot:
			parts = append(parts, s.Name)
		case hcl.TraverseAttr:
			parts = append(parts, s.Name)
		case hcl.TraverseIndex:
			// agent.coder["a"], agent.coder[0]: an instance of an agent
			// with for_each or count.
			key, why := instanceKey(s.Key)
			if why != "" || len(parts) != 2 {
				return bad("has an index that is no instance key; write agent.NAME, agent.NAME[\"KEY\"] or agent.NAME[N]")
			}
			parts[1] += key.String()
		default:
			return bad("must be a plain reference")
		}
	}
	text := strings.Join(parts, ".")
	addr, err := addrs.Parse(text)
	if err != nil || !addr.IsAgent() {
		return bad(fmt.Sprintf("is %s, which is not an agent: only agents move, with everything they own", text))
	}
	return addr, nil
}

// checkMoved refuses moved blocks that cannot all hold: a move from an
// agent that is still declared, two moves from one address, and moves
// that come back to where they started. Each error is on the block's
// narrowest range. (A move to an address the state already records is
// refused by the planner, which reads the state.)
func (c *Config) checkMoved() hcl.Diagnostics {
	var diags hcl.Diagnostics
	from := map[addrs.Addr]*Moved{}
	for _, m := range c.Moved {
		// Moving agent.coder to agent.coder["a"] adopts the single
		// agent into the block's for_each: the block is declared, not
		// its former single self.
		if a, ok := c.Agents[m.From.Name()]; ok && !a.Repeats() {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Moved object still exists",
				Detail:   fmt.Sprintf("This moved block moves %s to %s, but %s is still declared at %s. Remove or rename that block, or remove this moved block.", m.From, m.To, m.From, a.DeclRange),
				Subject:  m.FromRange.Ptr(),
			})
		}
		if prev, ok := from[m.From]; ok {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Ambiguous move statements",
				Detail:   fmt.Sprintf("%s is moved to %s here and to %s at %s; an object can move to one address only.", m.From, m.To, prev.To, prev.DeclRange),
				Subject:  m.FromRange.Ptr(),
			})
			continue
		}
		from[m.From] = m
	}
	// A chain that comes back to an address it passed is a cycle.
	reported := map[addrs.Addr]bool{}
	for _, m := range c.Moved {
		seen := []addrs.Addr{m.From}
		for next, ok := from[m.To]; ok; next, ok = from[next.To] {
			if !slices.Contains(seen, next.From) {
				seen = append(seen, next.From)
				continue
			}
			if !reported[m.From] {
				for _, a := range seen {
					reported[a] = true
				}
				chain := make([]string, 0, len(seen)+1)
				for _, a := range seen {
					chain = append(chain, a.String())
				}
				chain = append(chain, m.From.String())
				diags = append(diags, &hcl.Diagnostic{
					Severity: hcl.DiagError,
					Summary:  "Cyclic dependency in move statements",
					Detail:   fmt.Sprintf("These moved blocks go round in a circle: %s. Remove one of them.", strings.Join(chain, " -> ")),
					Subject:  m.DeclRange.Ptr(),
				})
			}
			break
		}
	}
	return diags
}

// MoveTarget is where the moved blocks take an agent recorded at addr,
// following chains (a -> b, b -> c gives c for a and for b); addr itself
// when no move starts there. The blocks are checked (no cycles) first.
func (c *Config) MoveTarget(addr addrs.Addr) (addrs.Addr, *Moved) {
	var last *Moved
	for range len(c.Moved) + 1 {
		var next *Moved
		for _, m := range c.Moved {
			if m.From == addr {
				next = m
				break
			}
		}
		if next == nil {
			break
		}
		addr, last = next.To, next
	}
	return addr, last
}
