package planner

import (
	"fmt"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/bottlefile/bottlefile/addrs"
	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/lang"
	"github.com/bottlefile/bottlefile/policy"
)

// CheckCapabilities refuses what an evaluated agent asks of its runtime's
// driver beyond what the driver declares it can do: a sidecar, a build
// block, an attribute the driver has no setting for, an egress rule it
// cannot enforce. Each refusal is a diagnostic on that block, attribute or
// rule, naming the runtime and the driver. The planner runs it before the
// driver plans; validate runs it with unknown variables, and what is not
// known yet is checked at plan.
//
// ceiling is the runtime's egress_ceiling (null for none) and pol the
// operator's egress policy (nil for none): an egress rule of the agent or
// a sidecar either does not cover is refused on that rule too, once,
// naming the policy's file when the policy refuses it.
func CheckCapabilities(a *lang.Agent, spec drivers.AgentSpec, runtime, driver string, caps drivers.Capabilities, ceiling cty.Value, pol *policy.Policy) hcl.Diagnostics {
	var diags hcl.Diagnostics
	for _, r := range drivers.CheckAgent(driver, caps, spec) {
		diags = append(diags, refusalDiag(a, r, runtime, driver))
	}
	if a.Idle != nil {
		if r := caps.CheckIdle(driver); r != nil {
			diags = append(diags, refusalDiag(a, *r, runtime, driver))
		}
	}
	type ruleOf struct {
		sidecar string
		rule    int
	}
	refused := map[ruleOf]bool{}
	if pol.HasCeiling() {
		for _, r := range drivers.CheckPolicy(driver, caps.Egress, pol.Ceiling, pol.Source, spec) {
			refused[ruleOf{r.Sidecar, r.Rule}] = true
			diags = append(diags, refusalDiag(a, r, runtime, driver))
		}
	}
	for _, r := range drivers.CheckCeiling(driver, caps.Egress, ceiling, spec) {
		if !refused[ruleOf{r.Sidecar, r.Rule}] {
			diags = append(diags, refusalDiag(a, r, runtime, driver))
		}
	}
	return diags
}

// checkCapabilities checks an evaluated agent against its runtime's
// driver before the driver plans it.
func (p *Planner) checkCapabilities(ap *agentPlan) hcl.Diagnostics {
	d := ap.runtime.Driver
	return CheckCapabilities(ap.agent, ap.spec, ap.runtime.Name, d.Name(), d.Declare().Capabilities, ap.runtime.Ceiling, ap.runtime.Policy)
}

// ValidateCapabilities evaluates an agent in scope (Config.ValidationScope:
// variables unknown) and checks it against its runtime's declared
// capabilities, egress ceiling and the operator's egress policy.
// Evaluation errors are not returned: loading the configuration reported
// them.
func ValidateCapabilities(scope *lang.Scope, a *lang.Agent, runtime, driver string, caps drivers.Capabilities, ceiling cty.Value, pol *policy.Policy) hcl.Diagnostics {
	val, _ := scope.EvalAgent(a)
	return CheckCapabilities(a, agentSpec(a, val), runtime, driver, caps, ceiling, pol)
}

// refusalDiag points one refusal at what asks for it.
func refusalDiag(a *lang.Agent, r drivers.Refusal, runtime, driver string) *hcl.Diagnostic {
	addr := a.Addr()
	subject := a.DeclRange
	w := &a.Workload
	if r.Sidecar != "" {
		if sc := a.Sidecar(r.Sidecar); sc != nil {
			addr = sc.Addr()
			subject = sc.DeclRange
			w = &sc.Workload
		}
	}
	on := fmt.Sprintf("%s runs on runtime %q (driver %s)", addr, runtime, driver)
	d := &hcl.Diagnostic{Severity: hcl.DiagError}
	switch r.Block {
	case "sidecar":
		d.Summary = "Sidecar not supported by this runtime"
		d.Detail = fmt.Sprintf("%s runs on runtime %q (driver %s): %s.", a.Addr(), runtime, driver, r.Message)
	case "build":
		d.Summary = "Build not supported by this runtime"
		d.Detail = fmt.Sprintf("%s: %s.", on, r.Message)
		if rng, ok := w.Range("build"); ok {
			subject = rng
		}
	case "healthcheck":
		d.Summary = "Healthcheck not supported by this runtime"
		d.Detail = fmt.Sprintf("%s: %s.", on, r.Message)
		if rng, ok := w.Range("healthcheck"); ok {
			subject = rng
		}
	case "idle":
		d.Summary = "Idle policy not supported by this runtime"
		d.Detail = fmt.Sprintf("%s: %s.", on, r.Message)
		if a.Idle != nil {
			subject = a.Idle.DeclRange
		}
	case "credential":
		d.Summary = "Credential injection not supported by this runtime"
		d.Detail = fmt.Sprintf("%s: %s.", on, r.Message)
		if rng, ok := w.CredentialRange(r.Credential); ok {
			subject = rng
		}
	case "egress":
		if r.Policy != "" {
			d.Summary = "Egress rule outside the operator's egress policy"
			d.Detail = fmt.Sprintf("%s runs on runtime %q: egress rule %q is outside the egress policy the operator set in %s: %s. That policy bounds every runtime, whatever the Bottlefile declares; remove the rule or narrow it to what the policy allows (only the policy's owner can widen it, in %s).", addr, runtime, r.RuleText, r.Policy, r.Message, r.Policy)
			if rng, ok := w.EgressRuleRange(r.Rule); ok {
				subject = rng
			}
			break
		}
		if r.Ceiling {
			d.Summary = "Egress rule outside the runtime's ceiling"
			d.Detail = fmt.Sprintf("%s runs on runtime %q: egress rule %q is outside the runtime's egress_ceiling: %s. An agent can open only what the ceiling allows; remove the rule, narrow it to what the ceiling allows, or widen egress_ceiling in runtime %q.", addr, runtime, r.RuleText, r.Message, runtime)
			if rng, ok := w.EgressRuleRange(r.Rule); ok {
				subject = rng
			}
			break
		}
		d.Summary = "Egress rule not supported by this runtime"
		d.Detail = fmt.Sprintf("%s: egress rule %q: %s.", on, r.RuleText, r.Message)
		if rng, ok := w.EgressRuleRange(r.Rule); ok {
			subject = rng
		}
	default:
		d.Summary = "Attribute not supported by this runtime"
		d.Detail = fmt.Sprintf("%s: %s.", on, r.Message)
		if rng, ok := w.Range(r.Attr); ok {
			subject = rng
		} else if r.Attr == "workspace" && r.Sidecar == "" {
			subject = a.WorkspaceRange()
		}
	}
	d.Subject = subject.Ptr()
	return d
}

// agentSpec is the evaluated agent as its driver plans it: its workload
// as the configuration language evaluated it.
func agentSpec(a *lang.Agent, val lang.AgentValue) drivers.AgentSpec {
	// Drivers check Name as part of engine names: an instance's is its
	// safe spelling (coder__frontend), never coder["frontend"].
	spec := drivers.AgentSpec{Addr: a.Addr(), Name: addrs.Agent(a.Name).SafeName(), Workload: val.Workload, Workspace: val.Workspace}
	if a.FromSnapshot != "" && val.Workload.GetAttr("image").IsNull() && val.Workload.GetAttr("build").IsNull() {
		// A fork has no image of its own: it always boots from the
		// snapshot, and its image names that snapshot, so the plan shows
		// it and the fork stays put when the snapshot is taken again.
		spec.Workload = drivers.WithWorkloadAttr(val.Workload, "image", cty.StringVal(a.FromSnapshot))
	}
	for _, sc := range val.Sidecars {
		spec.Sidecars = append(spec.Sidecars, drivers.SidecarSpec{Addr: addrs.Sidecar(a.Name, sc.Name).String(), Name: sc.Name, Workload: sc.Workload})
	}
	return spec
}
