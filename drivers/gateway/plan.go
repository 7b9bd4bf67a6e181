package gateway

import (
	"github.com/zclconf/go-cty/cty"

	"github.com/bottlefile/bottlefile/drivers"
)

// Spec is what an agent's gateway object is planned from: the agent, and
// what its driver decided of the runtime.
type Spec struct {
	Agent     drivers.AgentSpec
	AgentAddr string
	// Network is the bottle network's address.
	Network string
	// EgressNetwork is the runtime's egress network: its address when
	// EgressObject (the gateway depends on it), else the engine name of
	// a network the runtime block named.
	EgressNetwork string
	EgressObject  bool
	// Version is the gateway binary's version as plans show it.
	Version string
	// DNS is the resolvers the gateway uses, as the driver records them:
	// docker records none as null, swarm as the empty list. Either would
	// do; changing one would change every gateway's configuration hash.
	DNS cty.Value
	// Sidecars are the bottle's sidecar names.
	Sidecars []string
	// Credentials: the driver injects the agent's credentials through the
	// gateway (docker, kubernetes); swarm refuses them at plan.
	Credentials bool
}

// Plan is an agent's gateway object: its allowlist in canonical form
// (AllowValue), version, networks, resolvers, sidecars, credentials and
// ceiling (SetCeiling). The allowlist, credentials and sidecars change in
// place: the gateway rereads its files.
func Plan(s Spec) (drivers.Object, error) {
	allow, err := AllowValue(drivers.WorkloadAttr(s.Agent.Workload, "egress"))
	if err != nil {
		return drivers.Object{}, err
	}
	o := drivers.Object{
		Addr:      Addr(s.AgentAddr),
		Kind:      Kind,
		Workload:  true,
		InPlace:   []string{"allow"},
		DependsOn: []string{s.Network},
		Attrs: map[string]cty.Value{
			"allow":          allow,
			"version":        cty.StringVal(s.Version),
			"network":        cty.StringVal(s.Network),
			"egress_network": cty.StringVal(s.EgressNetwork),
			"dns":            s.DNS,
		},
	}
	if s.EgressObject {
		o.DependsOn = append(o.DependsOn, s.EgressNetwork)
	}
	if s.Credentials {
		if creds := drivers.WorkloadAttr(s.Agent.Workload, "credentials"); !creds.IsNull() {
			// Only when set, so a gateway without credentials keeps its
			// configuration hash. Sensitive: the core records its hash
			// only.
			o.Attrs["credentials"] = creds
		}
		// A change of credentials (a rotated value) is written into the
		// running gateway, as the allowlist is.
		o.InPlace = append(o.InPlace, "credentials")
	}
	SetCeiling(&o, s.Agent.EgressCeiling)
	if len(s.Sidecars) > 0 {
		// So that the gateway tells a client that sent a sidecar's name
		// through the proxy to connect to it directly.
		vals := make([]cty.Value, len(s.Sidecars))
		for i, n := range s.Sidecars {
			vals[i] = cty.StringVal(n)
		}
		o.Attrs["sidecars"] = cty.ListVal(vals)
		o.InPlace = append(o.InPlace, "sidecars")
	}
	return o, nil
}
