// Package lang is the Bottlefile language: it reads a directory's Bottlefile,
// *.bottle.hcl and *.bottle.json files, decodes them into a Config, checks
// names, references and cycles, and evaluates expressions in a Scope.
//
// The package is a leaf: it imports hcl, hcldec, cty and the standard library
// only, never another bottlefile package. Drivers never see HCL; the planner
// evaluates agents with a Scope and hands drivers cty values.
//
// Loading:
//
//	p := lang.NewParser()
//	cfg, diags := p.LoadDir(".")
//	if diags.HasErrors() {
//		lang.WriteDiagnostics(os.Stderr, p.Files(), diags, 78, true)
//	}
//
// LoadDir decodes every block against an explicit schema, reports unknown
// blocks and attributes, duplicate and badly formed names, references to
// things that are not declared, and reference cycles, and then evaluates
// every expression once with all input variables unknown, which catches
// wrong types in literal values (the same thing `terraform validate` does).
//
// Evaluation:
//
//	vals, diags := p.VariableValues(cfg, lang.VarInputs{Vars: flags, VarFiles: files, Env: environ})
//	scope, diags := cfg.NewScope(vals)
//	av, diags := scope.EvalAgent(cfg.Agents["coder"])
//
// Values of agents and snapshots that do not exist yet are unknown ("known
// after apply"); SetAgent and SetSnapshot supply them once they are known.
// Values derived from a sensitive variable carry the Sensitive mark.
package lang
