package operations

import (
	"os"

	"github.com/hashicorp/hcl/v2"

	"github.com/bottlefile/bottlefile/policy"
)

// PolicyView is the operator's egress policy in force for this process,
// as `bottlefile policy` shows it.
type PolicyView struct {
	// Source is the policy's file; "" when there is none.
	Source string `json:"source"`
	// Ceiling bounds every runtime, rules in canonical form; nil when the
	// policy sets none (or there is no policy), empty when it allows
	// nothing.
	Ceiling []string `json:"egress_ceiling"`
	// Searched is where the policy is looked for, in order.
	Searched []string `json:"searched"`
}

// EgressPolicy reads the operator's egress policy as validate and plan
// do (policy.Load). It needs no configuration, state or runtime.
func EgressPolicy() (PolicyView, hcl.Diagnostics) {
	v := PolicyView{Searched: policy.SearchPath(os.Getenv)}
	if p := os.Getenv(policy.EnvVar); p != "" {
		v.Searched = []string{"$" + policy.EnvVar + " (" + p + ")"}
	}
	pol, diags := policy.Load()
	if pol != nil {
		v.Source, v.Ceiling = pol.Source, pol.CeilingStrings()
	}
	return v, diags
}
