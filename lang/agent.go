package lang

import (
	"fmt"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/bottlefile/bottlefile/addrs"
)

// Agent is an `agent "NAME"` block: one bottle, the agent workload plus
// everything it owns (sidecars, network, egress gateway, policy snapshots).
type Agent struct {
	// Name is the instance name: the block's label, or for an instance of
	// a block with for_each or count (once NewScope expanded it) the label
	// with the key, coder["frontend"] or coder[0] (addrs.Agent reads it).
	Name string
	// Instances says whether and how the block repeats: for_each or count
	// as written (expansion.go). An expanded instance keeps it, with its
	// Key.
	Instances
	RuntimeName  string    // from `runtime = runtime.X`; DefaultRuntime when omitted; "" when invalid (an error was reported)
	RuntimeRange hcl.Range // the runtime expression; the block header when omitted

	// Workload is what the agent runs, as written; Scope.EvalAgent decodes
	// and checks it. It has an image or a build block, not both (or
	// neither, with FromSnapshot).
	Workload

	DependsOn []hcl.Traversal // agent.X and snapshot.X, from depends_on

	Sidecars       []*Sidecar      // in declaration order
	SnapshotPolicy *SnapshotPolicy // nil: no automatic snapshots
	Idle           *Idle           // nil: never stopped or archived for idleness
	Lifecycle      Lifecycle       // the zero value when there is no lifecycle block
	// Driver is the agent's `driver` block: settings owned by its
	// runtime's driver (drivers.Schema.Agent, swarm's placement), decoded
	// by Scope.EvalAgentDriver once the driver is known; nil when absent.
	Driver *DriverBlock

	// Resume is a bool expression (nil for true): re-creating the agent boots
	// it from its newest snapshot when one exists.
	Resume hcl.Expression
	// Workspace is a list(string) expression (nil for none): the absolute
	// paths that are the agent's work, carried over to the new image when
	// its image changes. Not part of the workload: changing the list
	// replaces nothing.
	Workspace hcl.Expression
	// FromSnapshot is the address of the snapshot the agent boots from
	// when it is (re)created: "snapshot.NAME" (a snapshot block of any
	// agent) or "agent.NAME.snapshot.N" (a policy snapshot, checked against
	// the state when planning); "" when absent. With it, image and build
	// are optional: a fork of another agent needs neither.
	FromSnapshot      string
	FromSnapshotRange hcl.Range

	DeclRange, TypeRange hcl.Range

	// refCache is refs(), computed once when the block is decoded; nil for
	// an Agent built by hand.
	refCache []*reference
}

// Sidecar is a `sidecar "NAME"` block inside an agent: a helper workload in
// the agent's bottle, reachable from the agent by its name.
type Sidecar struct {
	Name      string
	AgentName string

	Workload // exactly one of image and build

	DeclRange hcl.Range
}

// SnapshotPolicy is a `snapshot_policy` block: when an agent is snapshotted
// automatically and how many snapshots are kept.
type SnapshotPolicy struct {
	Before   hcl.Expression // list(string) of "replace", "destroy", "migrate"; nil for none
	KeepLast hcl.Expression // number; nil for no limit
	MaxAge   hcl.Expression // duration string like "720h"; nil for no limit
	// MaxTotalSize is a size string like "20GiB": the most the agent's
	// policy snapshots may take together; nil for no limit.
	MaxTotalSize hcl.Expression
	// Every is a duration string like "1h": a snapshot is taken this long
	// after the last one (bottlefile tick, watch); nil for none.
	Every     hcl.Expression
	DeclRange hcl.Range
}

// Idle is an `idle` block: what bottlefile tick does with an agent nobody
// used for a while (no request through its gateway, no exec session, CPU
// below the driver's threshold).
type Idle struct {
	StopAfter    hcl.Expression // duration string like "30m"; nil: never stopped
	ArchiveAfter hcl.Expression // duration string like "7d"; nil: never archived
	DeclRange    hcl.Range
}

// DriverBlock is an agent's `driver` block. Its schema is the driver's,
// not lang's, so its body is kept as written.
type DriverBlock struct {
	Body      hcl.Body
	DeclRange hcl.Range
}

// Lifecycle is a `lifecycle` block. Its values are constants, known when
// the configuration is loaded.
type Lifecycle struct {
	PreventDestroy   bool
	IgnoreChanges    []string // agent attribute names whose changes the plan ignores
	IgnoreAllChanges bool     // ignore_changes = all
	DeclRange        hcl.Range
}

// WorkspaceRange is the range of the workspace expression; the block
// header when there is none.
func (a *Agent) WorkspaceRange() hcl.Range {
	if a.Workspace != nil {
		return a.Workspace.Range()
	}
	return a.DeclRange
}

// Addr is "agent.NAME" (agent.NAME["KEY"] or agent.NAME[N] for an
// instance).
func (a *Agent) Addr() string { return addrs.Agent(a.Name).String() }

// BlockName is the block's label: Name without the instance key.
func (a *Agent) BlockName() string { return a.Instances.blockName(a.Name) }

// Addr is "agent.AGENT.sidecar.NAME".
func (s *Sidecar) Addr() string { return addrs.Sidecar(s.AgentName, s.Name).String() }

// Sidecar returns the agent's sidecar with the given name, or nil.
func (a *Agent) Sidecar(name string) *Sidecar {
	for _, s := range a.Sidecars {
		if s.Name == name {
			return s
		}
	}
	return nil
}

// References returns the addresses the agent refers to, through its
// expressions (sidecars included), depends_on and runtime: "agent.x",
// "snapshot.s", "runtime.r", "var.z", "local.w"; deduplicated and sorted.
// from_snapshot is not among them: a snapshot of this same agent is taken
// before the agent is re-created, so it is not a dependency;
// Config.ForkDependency gives the one a fork of another agent has.
func (a *Agent) References() []string {
	runtime := ""
	if a.RuntimeName != "" {
		runtime = addrs.Runtime(a.RuntimeName).String()
	}
	return a.expandedRefs(refAddrs(a.refs(), runtime))
}

func (a *Agent) refs() []*reference {
	if a.refCache != nil {
		return a.refCache
	}
	refs := a.Workload.references()
	for _, s := range a.Sidecars {
		refs = append(refs, s.Workload.references()...)
	}
	refs = append(refs, exprRefs(a.Resume, a.Workspace, a.ForEach, a.Count)...)
	if p := a.SnapshotPolicy; p != nil {
		refs = append(refs, exprRefs(p.Before, p.KeepLast, p.MaxAge, p.MaxTotalSize, p.Every)...)
	}
	if i := a.Idle; i != nil {
		refs = append(refs, exprRefs(i.StopAfter, i.ArchiveAfter)...)
	}
	for _, t := range a.DependsOn {
		if ref, _ := parseReference(t); ref != nil {
			refs = append(refs, ref)
		}
	}
	if a.Driver != nil {
		for _, t := range bodyVariables(a.Driver.Body) {
			if ref, _ := parseReference(t); ref != nil {
				refs = append(refs, ref)
			}
		}
	}
	return refs
}

// exprs is every expression of the agent, sidecars included.
func (a *Agent) exprs() []hcl.Expression {
	exprs := a.Workload.exprs()
	exprs = append(exprs, a.Resume, a.Workspace)
	if p := a.SnapshotPolicy; p != nil {
		exprs = append(exprs, p.Before, p.KeepLast, p.MaxAge, p.MaxTotalSize, p.Every)
	}
	if i := a.Idle; i != nil {
		exprs = append(exprs, i.StopAfter, i.ArchiveAfter)
	}
	for _, s := range a.Sidecars {
		exprs = append(exprs, s.Workload.exprs()...)
	}
	return exprs
}

var agentSchema = &hcl.BodySchema{
	Attributes: append([]hcl.AttributeSchema{
		{Name: "runtime"},
		{Name: "depends_on"},
		{Name: "resume"},
		{Name: "workspace"},
		{Name: "from_snapshot"},
		{Name: "for_each"},
		{Name: "count"},
	}, workloadSchema.Attributes...),
	Blocks: append([]hcl.BlockHeaderSchema{
		{Type: "sidecar", LabelNames: []string{"name"}},
		{Type: "snapshot_policy"},
		{Type: "idle"},
		{Type: "lifecycle"},
		{Type: "driver"},
	}, workloadSchema.Blocks...),
}

var snapshotPolicySchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "before"},
		{Name: "keep_last"},
		{Name: "max_age"},
		{Name: "max_total_size"},
		{Name: "every"},
	},
}

var idleSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "stop_after"},
		{Name: "archive_after"},
	},
}

var lifecycleSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "prevent_destroy"},
		{Name: "ignore_changes"},
	},
}

func decodeAgentBlock(block *hcl.Block) (*Agent, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	a := &Agent{
		Name:         block.Labels[0],
		RuntimeName:  DefaultRuntime,
		RuntimeRange: block.DefRange,
		DeclRange:    block.DefRange,
		TypeRange:    block.TypeRange,
	}
	diags = append(diags, checkName("agent", a.Name, labelRange(block, 0))...)

	content, moreDiags := block.Body.Content(agentSchema)
	diags = append(diags, moreDiags...)
	a.Instances, moreDiags = decodeInstances("agent", block, content)
	diags = append(diags, moreDiags...)

	_, forks := content.Attributes["from_snapshot"]
	w, moreDiags := decodeWorkload("agent", block, content, forks)
	diags = append(diags, moreDiags...)
	a.Workload = w

	if attr, ok := content.Attributes["runtime"]; ok {
		a.RuntimeRange = attr.Expr.Range()
		name, moreDiags := staticRef(attr, refRuntime)
		diags = append(diags, moreDiags...)
		a.RuntimeName = name // "" when invalid: the error is reported, and nothing more is checked
	}
	if attr, ok := content.Attributes["from_snapshot"]; ok {
		a.FromSnapshotRange = attr.Expr.Range()
		addr, moreDiags := decodeFromSnapshot(attr)
		diags = append(diags, moreDiags...)
		a.FromSnapshot = addr
	}
	a.Resume = attrExpr(content, "resume")
	a.Workspace = attrExpr(content, "workspace")
	if attr, ok := content.Attributes["depends_on"]; ok {
		deps, moreDiags := decodeDependsOn(attr)
		diags = append(diags, moreDiags...)
		a.DependsOn = deps
	}

	for _, b := range content.Blocks {
		switch b.Type {
		case "sidecar":
			s, moreDiags := decodeSidecarBlock(a.Name, b)
			diags = append(diags, moreDiags...)
			if prev := a.Sidecar(s.Name); prev != nil {
				diags = append(diags, &hcl.Diagnostic{
					Severity: hcl.DiagError,
					Summary:  fmt.Sprintf("Duplicate sidecar %q", s.Name),
					Detail:   fmt.Sprintf("The agent %q already has a sidecar named %q, at %s. Sidecar names must be unique within an agent.", a.Name, s.Name, prev.DeclRange),
					Subject:  labelRange(b, 0).Ptr(),
				})
				continue
			}
			a.Sidecars = append(a.Sidecars, s)
		case "snapshot_policy":
			if a.SnapshotPolicy != nil {
				diags = append(diags, duplicateNested("agent", b, a.SnapshotPolicy.DeclRange))
				continue
			}
			p, moreDiags := decodeSnapshotPolicyBlock(b)
			diags = append(diags, moreDiags...)
			a.SnapshotPolicy = p
		case "idle":
			if a.Idle != nil {
				diags = append(diags, duplicateNested("agent", b, a.Idle.DeclRange))
				continue
			}
			i, moreDiags := decodeIdleBlock(b)
			diags = append(diags, moreDiags...)
			a.Idle = i
		case "lifecycle":
			if a.Lifecycle.DeclRange != (hcl.Range{}) {
				diags = append(diags, duplicateNested("agent", b, a.Lifecycle.DeclRange))
				continue
			}
			l, moreDiags := decodeLifecycleBlock(b)
			diags = append(diags, moreDiags...)
			a.Lifecycle = l
		case "driver":
			if a.Driver != nil {
				diags = append(diags, duplicateNested("agent", b, a.Driver.DeclRange))
				continue
			}
			a.Driver = &DriverBlock{Body: b.Body, DeclRange: b.DefRange}
		}
	}
	a.refCache = append(make([]*reference, 0, 8), a.refs()...)
	return a, diags
}

func decodeSidecarBlock(agent string, block *hcl.Block) (*Sidecar, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	s := &Sidecar{Name: block.Labels[0], AgentName: agent, DeclRange: block.DefRange}
	diags = append(diags, checkName("sidecar", s.Name, labelRange(block, 0))...)
	content, moreDiags := block.Body.Content(workloadSchema)
	diags = append(diags, moreDiags...)
	w, moreDiags := decodeWorkload("sidecar", block, content, false)
	diags = append(diags, moreDiags...)
	s.Workload = w
	return s, diags
}

func decodeSnapshotPolicyBlock(block *hcl.Block) (*SnapshotPolicy, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	p := &SnapshotPolicy{DeclRange: block.DefRange}
	content, moreDiags := block.Body.Content(snapshotPolicySchema)
	diags = append(diags, moreDiags...)
	p.Before = attrExpr(content, "before")
	p.KeepLast = attrExpr(content, "keep_last")
	p.MaxAge = attrExpr(content, "max_age")
	p.MaxTotalSize = attrExpr(content, "max_total_size")
	p.Every = attrExpr(content, "every")
	return p, diags
}

// attrExpr is the expression of the named attribute of content; nil, as
// the block's field is when it is left out, when absent.
func attrExpr(content *hcl.BodyContent, name string) hcl.Expression {
	if attr, ok := content.Attributes[name]; ok {
		return attr.Expr
	}
	return nil
}

func decodeIdleBlock(block *hcl.Block) (*Idle, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	i := &Idle{DeclRange: block.DefRange}
	content, moreDiags := block.Body.Content(idleSchema)
	diags = append(diags, moreDiags...)
	i.StopAfter = attrExpr(content, "stop_after")
	i.ArchiveAfter = attrExpr(content, "archive_after")
	if i.StopAfter == nil && i.ArchiveAfter == nil && !moreDiags.HasErrors() {
		diags = append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Empty idle block",
			Detail:   "An idle block says what to do with an agent nobody uses: stop_after = \"30m\", archive_after = \"7d\", or both.",
			Subject:  block.DefRange.Ptr(),
		})
	}
	return i, diags
}

func decodeLifecycleBlock(block *hcl.Block) (Lifecycle, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	l := Lifecycle{DeclRange: block.DefRange}
	content, moreDiags := block.Body.Content(lifecycleSchema)
	diags = append(diags, moreDiags...)
	if attr, ok := content.Attributes["prevent_destroy"]; ok {
		b, moreDiags := staticBool(attr)
		diags = append(diags, moreDiags...)
		l.PreventDestroy = b
	}
	if attr, ok := content.Attributes["ignore_changes"]; ok {
		if hcl.ExprAsKeyword(attr.Expr) == "all" {
			l.IgnoreAllChanges = true
			return l, diags
		}
		exprs, moreDiags := hcl.ExprList(attr.Expr)
		if moreDiags.HasErrors() {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Invalid ignore_changes",
				Detail:   "ignore_changes takes a list of agent attribute names, like [image, env], or the keyword all.",
				Subject:  attr.Expr.Range().Ptr(),
			})
			return l, diags
		}
		seen := map[string]bool{}
		for _, e := range exprs {
			name := hcl.ExprAsKeyword(e)
			if name == "" || !contains(IgnorableAttributes, name) {
				diags = append(diags, &hcl.Diagnostic{
					Severity: hcl.DiagError,
					Summary:  "Invalid ignore_changes attribute",
					Detail:   fmt.Sprintf("ignore_changes takes the names of agent attributes, written bare: one of %s.", strings.Join(IgnorableAttributes, ", ")),
					Subject:  e.Range().Ptr(),
				})
				continue
			}
			if !seen[name] {
				seen[name] = true
				l.IgnoreChanges = append(l.IgnoreChanges, name)
			}
		}
	}
	return l, diags
}

// staticRef decodes an attribute that must be a static reference to a block
// of kind, like runtime.NAME, and returns the name ("" on error).
func staticRef(attr *hcl.Attribute, kind string) (string, hcl.Diagnostics) {
	bad := hcl.Diagnostics{{
		Severity: hcl.DiagError,
		Summary:  fmt.Sprintf("Invalid %s reference", refNouns[kind]),
		Detail:   fmt.Sprintf("The %s attribute takes a reference to %s, like %s = %s.NAME, written without quotes.", attr.Name, article(refNouns[kind]), attr.Name, kind),
		Subject:  attr.Expr.Range().Ptr(),
	}}
	t, diags := hcl.AbsTraversalForExpr(attr.Expr)
	if diags.HasErrors() || len(t) != 2 || t.RootName() != kind {
		return "", bad
	}
	step, ok := t[1].(hcl.TraverseAttr)
	if !ok {
		return "", bad
	}
	return step.Name, nil
}

// decodeFromSnapshot decodes from_snapshot: snapshot.NAME, or a policy
// snapshot's address agent.NAME.snapshot.N, written bare or quoted. It
// returns the address ("" on error). The expression is never evaluated: a
// policy snapshot is not a block, so agent.NAME.snapshot.N could not be.
func decodeFromSnapshot(attr *hcl.Attribute) (string, hcl.Diagnostics) {
	bad := hcl.Diagnostics{{
		Severity: hcl.DiagError,
		Summary:  "Invalid from_snapshot",
		Detail:   "from_snapshot takes the snapshot to boot from: a snapshot block, like snapshot.NAME, or a policy snapshot's address, like agent.NAME.snapshot.3 (bottlefile snapshot list shows them).",
		Subject:  attr.Expr.Range().Ptr(),
	}}
	var steps []string
	if t, diags := hcl.AbsTraversalForExpr(attr.Expr); !diags.HasErrors() {
		steps = traversalSteps(t)
	} else if v, diags := attr.Expr.Value(nil); !diags.HasErrors() && v.Type() == cty.String && v.IsKnown() && !v.IsNull() {
		steps = strings.Split(v.AsString(), ".") // a quoted address
	}
	addr, ok := snapshotAddr(steps)
	if !ok {
		return "", bad
	}
	return addr, nil
}

// traversalSteps spells a traversal's steps; agent.coder.snapshot.3 parses
// with 3 as an index. nil when a step is of another kind.
func traversalSteps(t hcl.Traversal) []string {
	var steps []string
	for _, step := range t {
		switch s := step.(type) {
		case hcl.TraverseRoot:
			steps = append(steps, s.Name)
		case hcl.TraverseAttr:
			steps = append(steps, s.Name)
		case hcl.TraverseIndex:
			if s.Key.Type() != cty.Number || !s.Key.IsKnown() {
				return nil
			}
			steps = append(steps, s.Key.AsBigFloat().Text('f', -1))
		default:
			return nil
		}
	}
	return steps
}

// snapshotAddr is the address steps name when they name a snapshot:
// snapshot.NAME or agent.NAME.snapshot.N.
func snapshotAddr(steps []string) (string, bool) {
	a, err := addrs.Parse(strings.Join(steps, "."))
	if err != nil || !a.IsSnapshot() || !ValidName(a.Name()) {
		return "", false
	}
	return a.String(), true
}

// decodeDependsOn decodes depends_on: a list of agent.NAME and
// snapshot.NAME references.
func decodeDependsOn(attr *hcl.Attribute) ([]hcl.Traversal, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	exprs, moreDiags := hcl.ExprList(attr.Expr)
	if moreDiags.HasErrors() {
		return nil, hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Invalid depends_on",
			Detail:   "depends_on takes a list of references to agents and snapshots, like [agent.db, snapshot.seed].",
			Subject:  attr.Expr.Range().Ptr(),
		}}
	}
	var deps []hcl.Traversal
	for _, e := range exprs {
		t, moreDiags := hcl.AbsTraversalForExpr(e)
		ok := !moreDiags.HasErrors() && len(t) == 2 && (t.RootName() == refAgent || t.RootName() == refSnapshot)
		if ok {
			_, ok = t[1].(hcl.TraverseAttr)
		}
		if !ok {
			detail := "Each depends_on element is a whole agent or snapshot, like agent.NAME or snapshot.NAME."
			if !moreDiags.HasErrors() && len(t) > 2 && (t.RootName() == refAgent || t.RootName() == refSnapshot) {
				detail += fmt.Sprintf(" Depend on %s rather than on one of its attributes.", traversalString(t[:2]))
			}
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Invalid depends_on reference",
				Detail:   detail,
				Subject:  e.Range().Ptr(),
			})
			continue
		}
		deps = append(deps, t)
	}
	return deps, diags
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
