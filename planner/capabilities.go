package planner

import (
	"fmt"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/bottlefile/bottlefile/addrs"
	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/lang"
)

// CheckCapabilities refuses what an evaluated agent asks of its runtime's
// driver beyond what the driver declares it can do: a sidecar, a build
// block, an attribute the driver has no setting for, an egress rule it
// cannot enforce. Each refusal is a diagnostic on that block, attribute or
// rule, naming the runtime and the driver. The planner runs it before the
// driver plans; validate runs it with unknown variables, and what is not
// known yet is checked at plan.
func CheckCapabilities(a *lang.Agent, spec drivers.AgentSpec, runtime, driver string, caps drivers.Capabilities) hcl.Diagnostics {
	var diags hcl.Diagnostics
	for _, r := range drivers.CheckAgent(driver, caps, spec) {
		diags = append(diags, refusalDiag(a, r, runtime, driver))
	}
	return diags
}

// checkCapabilities checks an evaluated agent against its runtime's
// driver before the driver plans it.
func (p *Planner) checkCapabilities(ap *agentPlan) hcl.Diagnostics {
	d := ap.runtime.Driver
	return CheckCapabilities(ap.agent, ap.spec, ap.runtime.Name, d.Name(), d.Declare().Capabilities)
}

// ValidateCapabilities evaluates an agent in scope (Config.ValidationScope:
// variables unknown) and checks it against its runtime's declared
// capabilities. Evaluation errors are not returned: loading the
// configuration reported them.
func ValidateCapabilities(scope *lang.Scope, a *lang.Agent, runtime, driver string, caps drivers.Capabilities) hcl.Diagnostics {
	val, _ := scope.EvalAgent(a)
	return CheckCapabilities(a, agentSpec(a, val), runtime, driver, caps)
}

// refusalDiag points one refusal at what asks for it.
func refusalDiag(a *lang.Agent, r drivers.Refusal, runtime, driver string) *hcl.Diagnostic {
	addr := a.Addr()
	subject := a.DeclRange
	var build *lang.Build
	var eg *lang.Egress
	attr := func(name string) hcl.Expression { return agentAttr(a, name) }
	if r.Sidecar != "" {
		sc := a.Sidecar(r.Sidecar)
		if sc != nil {
			addr = sc.Addr()
			subject = sc.DeclRange
			build, eg = sc.Build, sc.Egress
			attr = func(name string) hcl.Expression { return sidecarAttr(sc, name) }
		}
	} else {
		build, eg = a.Build, a.Egress
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
		if build != nil {
			subject = build.DeclRange
		}
	case "egress":
		d.Summary = "Egress rule not supported by this runtime"
		d.Detail = fmt.Sprintf("%s: egress rule %q: %s.", on, r.RuleText, r.Message)
		if eg != nil {
			subject = eg.RuleRange(r.Rule)
		}
	default:
		d.Summary = "Attribute not supported by this runtime"
		d.Detail = fmt.Sprintf("%s: %s.", on, r.Message)
		if e := attr(r.Attr); e != nil {
			subject = e.Range()
		}
	}
	d.Subject = subject.Ptr()
	return d
}

// agentSpec is the evaluated agent as its driver plans it.
func agentSpec(a *lang.Agent, val lang.AgentValue) drivers.AgentSpec {
	spec := drivers.AgentSpec{
		Addr: a.Addr(), Name: a.Name,
		Image: val.Image, Command: val.Command, Entrypoint: val.Entrypoint, Env: val.Env,
		Workdir: val.Workdir, User: val.User, CPUs: val.CPUs, Memory: val.Memory, Labels: val.Labels,
		Egress: val.Egress,
	}
	if val.Build != nil {
		spec.Build = &drivers.BuildSpec{Context: val.Build.Context, Dockerfile: val.Build.Dockerfile}
	} else if a.FromSnapshot != "" && val.Image.IsNull() {
		// A fork has no image of its own: it always boots from the
		// snapshot, and its image names that snapshot, so the plan shows
		// it and the fork stays put when the snapshot is taken again.
		spec.Image = cty.StringVal(a.FromSnapshot)
	}
	for _, sc := range val.Sidecars {
		ss := drivers.SidecarSpec{
			Addr: addrs.Sidecar(a.Name, sc.Name).String(), Name: sc.Name,
			Image: sc.Image, Command: sc.Command, Entrypoint: sc.Entrypoint, Env: sc.Env, Workdir: sc.Workdir,
			User: sc.User, CPUs: sc.CPUs, Memory: sc.Memory, Labels: sc.Labels, Egress: sc.Egress,
		}
		if sc.Build != nil {
			ss.Build = &drivers.BuildSpec{Context: sc.Build.Context, Dockerfile: sc.Build.Dockerfile}
		}
		spec.Sidecars = append(spec.Sidecars, ss)
	}
	return spec
}

// agentAttr is the expression of an agent's workload attribute; nil when
// it is not written.
func agentAttr(a *lang.Agent, name string) hcl.Expression {
	return workloadAttr(name, a.Image, a.Command, a.Entrypoint, a.Env, a.Workdir, a.User, a.CPUs, a.Memory, a.Labels)
}

func sidecarAttr(s *lang.Sidecar, name string) hcl.Expression {
	return workloadAttr(name, s.Image, s.Command, s.Entrypoint, s.Env, s.Workdir, s.User, s.CPUs, s.Memory, s.Labels)
}

// workloadAttr picks one of the expressions in drivers.WorkloadAttributes
// order.
func workloadAttr(name string, exprs ...hcl.Expression) hcl.Expression {
	for i, n := range drivers.WorkloadAttributes {
		if n == name && i < len(exprs) {
			return exprs[i]
		}
	}
	return nil
}
