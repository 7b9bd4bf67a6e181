package lang

import (
	"fmt"

	"github.com/hashicorp/hcl/v2"
)

// Build is a `build` block: an image built from a local context directory.
type Build struct {
	Context    hcl.Expression // string, a directory; relative to the Bottlefile's directory
	Dockerfile hcl.Expression // string, relative to Context; nil for "Dockerfile"
	DeclRange  hcl.Range
}

// Egress is an `egress` block: the destinations a workload may reach.
// Without one, a workload reaches nothing outside its bottle.
type Egress struct {
	Allow     hcl.Expression // list(string) of rules: host, host:port, *.suffix:port; nil for none
	DeclRange hcl.Range
}

// workload is what agents and sidecars share: what runs, and how.
type workload struct {
	Image, Command, Entrypoint, Env, Workdir, User, CPUs, Memory, Labels hcl.Expression
	Build                                                                *Build
	Egress                                                               *Egress
}

func (w workload) exprs() []hcl.Expression {
	exprs := []hcl.Expression{w.Image, w.Command, w.Entrypoint, w.Env, w.Workdir, w.User, w.CPUs, w.Memory, w.Labels}
	if w.Build != nil {
		exprs = append(exprs, w.Build.Context, w.Build.Dockerfile)
	}
	if w.Egress != nil {
		exprs = append(exprs, w.Egress.Allow)
	}
	return exprs
}

var workloadAttributes = []hcl.AttributeSchema{
	{Name: "image"},
	{Name: "command"},
	{Name: "entrypoint"},
	{Name: "env"},
	{Name: "workdir"},
	{Name: "user"},
	{Name: "cpus"},
	{Name: "memory"},
	{Name: "labels"},
}

var workloadBlocks = []hcl.BlockHeaderSchema{
	{Type: "build"},
	{Type: "egress"},
}

var buildSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "context", Required: true},
		{Name: "dockerfile"},
	},
}

var egressSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "allow"},
	},
}

// decodeWorkload takes the workload attributes and blocks out of the content
// of an agent or sidecar block (kind names it in messages). imageOptional
// allows neither image nor build: an agent that boots from a snapshot.
func decodeWorkload(kind string, block *hcl.Block, content *hcl.BodyContent, imageOptional bool) (workload, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	var w workload
	get := func(name string) hcl.Expression {
		if attr, ok := content.Attributes[name]; ok {
			return attr.Expr
		}
		return nil
	}
	w.Image = get("image")
	w.Command = get("command")
	w.Entrypoint = get("entrypoint")
	w.Env = get("env")
	w.Workdir = get("workdir")
	w.User = get("user")
	w.CPUs = get("cpus")
	w.Memory = get("memory")
	w.Labels = get("labels")

	for _, b := range content.Blocks {
		switch b.Type {
		case "build":
			if w.Build != nil {
				diags = append(diags, duplicateNested(kind, b, w.Build.DeclRange))
				continue
			}
			bd, moreDiags := decodeBuildBlock(b)
			diags = append(diags, moreDiags...)
			w.Build = bd
		case "egress":
			if w.Egress != nil {
				diags = append(diags, duplicateNested(kind, b, w.Egress.DeclRange))
				continue
			}
			eg, moreDiags := decodeEgressBlock(b)
			diags = append(diags, moreDiags...)
			w.Egress = eg
		}
	}

	switch {
	case w.Image == nil && w.Build == nil && !imageOptional:
		diags = append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Missing image or build",
			Detail:   fmt.Sprintf("The %s %q needs what to run: an image attribute, like image = \"alpine:3\", or a build block%s.", kind, block.Labels[0], map[bool]string{true: ", or a from_snapshot to boot from", false: ""}[kind == "agent"]),
			Subject:  block.DefRange.Ptr(),
		})
	case w.Image != nil && w.Build != nil:
		diags = append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Conflicting image and build",
			Detail:   fmt.Sprintf("The %s %q has both an image attribute and a build block; it takes exactly one of them.", kind, block.Labels[0]),
			Subject:  w.Build.DeclRange.Ptr(),
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

func decodeBuildBlock(block *hcl.Block) (*Build, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	b := &Build{DeclRange: block.DefRange}
	content, moreDiags := block.Body.Content(buildSchema)
	diags = append(diags, moreDiags...)
	if attr, ok := content.Attributes["context"]; ok {
		b.Context = attr.Expr
	}
	if attr, ok := content.Attributes["dockerfile"]; ok {
		b.Dockerfile = attr.Expr
	}
	return b, diags
}

func decodeEgressBlock(block *hcl.Block) (*Egress, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	e := &Egress{DeclRange: block.DefRange}
	content, moreDiags := block.Body.Content(egressSchema)
	diags = append(diags, moreDiags...)
	if attr, ok := content.Attributes["allow"]; ok {
		e.Allow = attr.Expr
	}
	return e, diags
}
