package lang

import (
	"github.com/hashicorp/hcl/v2"

	"github.com/bottlefile/bottlefile/addrs"
)

// Snapshot is a `snapshot "NAME"` block: a manual commit of an agent's
// state, taken once and kept while the block exists.
type Snapshot struct {
	// Name is the instance name, as Agent.Name.
	Name string
	// Instances: for_each or count, as on an agent (expansion.go).
	Instances
	// AgentName is the instance name of the agent, from `agent = agent.X`
	// or agent.X["KEY"]; in a block with for_each or count,
	// agent.X[each.key] or agent.X[count.index] (AgentKey), resolved per
	// instance when NewScope expands it.
	AgentName string
	// AgentKey is EXPR of agent = agent.X[EXPR] in a block with instances
	// before NewScope expands it; nil otherwise.
	AgentKey    hcl.Expression
	AgentRange  hcl.Range      // the agent expression
	Description hcl.Expression // string; nil when absent
	// Triggers is a map(string); when a value changes, the snapshot is taken
	// again. nil when absent.
	Triggers  hcl.Expression
	DependsOn []hcl.Traversal

	DeclRange, TypeRange hcl.Range
}

// Addr is "snapshot.NAME" (snapshot.NAME["KEY"] for an instance).
func (s *Snapshot) Addr() string { return addrs.Snapshot(s.Name).String() }

// BlockName is the block's label: Name without the instance key.
func (s *Snapshot) BlockName() string { return s.Instances.blockName(s.Name) }

// References returns the addresses the snapshot refers to: its agent, the
// references of its expressions and depends_on; deduplicated and sorted.
func (s *Snapshot) References() []string {
	agent := ""
	if s.AgentName != "" {
		agent = addrs.Agent(s.AgentName).String()
	}
	return s.expandedRefs(refAddrs(s.refs(), agent))
}

func (s *Snapshot) refs() []*reference {
	refs := exprRefs(s.Description, s.Triggers, s.ForEach, s.Count, s.AgentKey)
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
		{Name: "for_each"},
		{Name: "count"},
	},
}

func decodeSnapshotBlock(block *hcl.Block) (*Snapshot, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	s := &Snapshot{Name: block.Labels[0], DeclRange: block.DefRange, TypeRange: block.TypeRange, AgentRange: block.DefRange}
	diags = append(diags, checkName("snapshot", s.Name, labelRange(block, 0))...)
	content, moreDiags := block.Body.Content(snapshotSchema)
	diags = append(diags, moreDiags...)
	s.Instances, moreDiags = decodeInstances("snapshot", block, content)
	diags = append(diags, moreDiags...)
	if attr, ok := content.Attributes["agent"]; ok {
		s.AgentRange = attr.Expr.Range()
		name, key, moreDiags := agentRef(attr, s.Instances)
		diags = append(diags, moreDiags...)
		s.AgentName, s.AgentKey = name, key
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
