package operations

import (
	"fmt"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/lang"
	"github.com/bottlefile/bottlefile/planner"
	"github.com/bottlefile/bottlefile/policy"
)

// ValidateRequest says which configuration to validate.
type ValidateRequest struct {
	// LoadDir is the Bottlefile's directory as the parser is given it.
	LoadDir  string
	Registry Registry
	Log      hclog.Logger
}

// Validate loads the configuration and checks everything that needs no
// state and no runtime: what loading checks (syntax, blocks, types,
// references, egress rule grammar), then, against each driver's
// Declaration, that every runtime names a known driver, that its
// attributes decode with the driver's schema, and that every agent asks
// its runtime's driver only for what the driver can do (sidecars, build,
// attributes, egress rules) and only what its runtime's egress_ceiling
// allows, and only what the operator's egress policy (policy.Load)
// allows, which bounds every runtime's egress_ceiling too, and the
// driver's own check of its runtime blocks
// (Schema.CheckRuntime: a tls_ca with a unix:// host, a missing
// certificate file). Variables are unknown. A driver is made by
// its factory and asked only for its Declaration: nothing is configured
// and no runtime is contacted.
func Validate(req ValidateRequest) (*lang.Parser, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	log := req.Log
	if log == nil {
		log = hclog.NewNullLogger()
	}
	parser := lang.NewParser()
	cfg, moreDiags := parser.LoadDir(req.LoadDir)
	diags = append(diags, moreDiags...)
	if cfg == nil {
		return parser, diags
	}
	pol, moreDiags := policy.Load()
	diags = append(diags, moreDiags...)
	// With errors already, a runtime block's attributes may refer to what
	// is broken: decoding them would say it again.
	decode := !diags.HasErrors()
	scope := cfg.ValidationScope()
	decls := map[string]drivers.Declaration{} // by runtime name
	ceilings := map[string]cty.Value{}        // by runtime name
	for _, name := range cfg.RuntimeNames() {
		rt := cfg.Runtimes[name]
		decl, moreDiags := Declaration(req.Registry, rt, log)
		diags = append(diags, moreDiags...)
		if moreDiags.HasErrors() {
			continue
		}
		decls[name] = decl
		if decode {
			val, moreDiags := scope.EvalRuntime(rt, decl.Schema.Runtime)
			diags = append(diags, moreDiags...)
			if !moreDiags.HasErrors() {
				req := drivers.ConfigureRequest{Runtime: name, Config: val, Dir: cfg.BaseDir()}
				diags = append(diags, planner.CheckRuntime(rt, decl.Schema, req)...)
			}
			ceilings[name], moreDiags = scope.EvalEgressCeiling(rt)
			diags = append(diags, moreDiags...)
			diags = append(diags, planner.CheckRuntimeCeiling(rt, ceilings[name], pol)...)
		}
	}
	for _, name := range cfg.AgentNames() {
		a := cfg.Agents[name]
		decl, ok := decls[a.RuntimeName]
		if !ok {
			continue
		}
		driver := cfg.Runtimes[a.RuntimeName].Driver
		if decode {
			_, moreDiags := scope.EvalAgentDriver(a, driver, decl.Schema.Agent, req.Registry.AgentSetting)
			diags = append(diags, moreDiags...)
		}
		diags = append(diags, planner.ValidateCapabilities(scope, a, a.RuntimeName, driver, decl.Capabilities, ceilings[a.RuntimeName], pol)...)
	}
	return parser, diags
}

// Declaration is the declaration of a runtime block's driver, from a
// driver its factory makes and nothing configures.
func Declaration(reg Registry, rt *lang.Runtime, log hclog.Logger) (drivers.Declaration, hcl.Diagnostics) {
	factory, ok := reg[rt.Driver]
	if !ok {
		return drivers.Declaration{}, hcl.Diagnostics{planner.UnknownDriver(rt, reg)}
	}
	d, err := factory(log)
	if err != nil {
		return drivers.Declaration{}, hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  fmt.Sprintf("Cannot start the %s driver", rt.Driver),
			Detail:   err.Error(),
			Subject:  rt.DeclRange.Ptr(),
		}}
	}
	return d.Declare(), nil
}
