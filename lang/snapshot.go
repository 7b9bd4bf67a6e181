package lang

import (
	"github.com/hashicorp/hcl/v2"

	"github.com/bottlefile/bottlefile/addrs"
)

// Snapshot is a `snapshot "NAME"` block: a manual commit of an agent's
// state, taken once and kept while the block exists.
type Snapshot struct {
	Name        string
	AgentName   string         // from `agent = agent.X`
	AgentRange  hcl.Range      // the agent expression
	Description hcl.Expression // string; nil when absent
	// Triggers is a map(string); when a value changes, the snapshot is taken
	// again. nil when absent.
	Triggers  hcl.Expression
	DependsOn []hcl.Traversal

	DeclRange, TypeRange hcl.Range
}

// Addr is "snapshot.NAME".
func (s *Snapshot) Addr() string { return addrs.Snapshot(s.Name).String() }

// References returns the addresses the snapshot refers to: its agent, the
// references of its expressions and depends_on; deduplicated and sorted.
func (s *Snapshot) References() []string {
	agent := ""
	if s.AgentName != "" {
		agent = addrs.Agent(s.AgentName).String()
	}
	return refAddrs(s.refs(), agent)
}

func (s *Snapshot) refs() []*reference {
	refs := exprRefs(s.Description, s.Triggers)
	for _, t := range s.DependsOn {
		if ref, _ := parseReference(t); ref != nil {
			refs = append(refs, ref)
		}
	}
	return refs
}

var snapshotSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "agent", Required: true},
		{Name: "description"},
		{Name: "triggers"},
		{Name: "depends_on"},
	},
}

func decodeSnapshotBlock(block *hcl.Block) (*Snapshot, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	s := &Snapshot{Name: block.Labels[0], DeclRange: block.DefRange, TypeRange: block.TypeRange, AgentRange: block.DefRange}
	diags = append(diags, checkName("snapshot", s.Name, labelRange(block, 0))...)
	content, moreDiags := block.Body.Content(snapshotSchema)
	diags = append(diags, moreDiags...)
	if attr, ok := content.Attributes["agent"]; ok {
		s.AgentRange = attr.Expr.Range()
		name, moreDiags := staticRef(attr, refAgent)
		diags = append(diags, moreDiags...)
		s.AgentName = name
	}
	if attr, ok := content.Attributes["description"]; ok {
		s.Description = attr.Expr
	}
	if attr, ok := content.Attributes["triggers"]; ok {
		s.Triggers = attr.Expr
	}
	if attr, ok := content.Attributes["depends_on"]; ok {
		deps, moreDiags := decodeDependsOn(attr)
		diags = append(diags, moreDiags...)
		s.DependsOn = deps
	}
	return s, diags
}
