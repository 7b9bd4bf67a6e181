package gateway

import (
	"slices"
	"strings"
	"testing"

	"github.com/zclconf/go-cty/cty"

	"github.com/bottlefile/bottlefile/drivers"
)

func TestPlan(t *testing.T) {
	agent := drivers.AgentSpec{
		Workload: cty.ObjectVal(map[string]cty.Value{
			"egress":      cty.ListVal([]cty.Value{cty.StringVal("api.example.com:443"), cty.StringVal("api.example.com:443")}),
			"credentials": cty.MapVal(map[string]cty.Value{"K": cty.StringVal("v")}),
		}),
		EgressCeiling: []string{},
	}
	for _, tc := range []struct {
		name        string
		spec        Spec
		inPlace     []string
		dependsOn   []string
		credentials bool
	}{
		{"docker", Spec{Agent: agent, AgentAddr: "agent.a", Network: "agent.a.network", EgressNetwork: "runtime.r.egress", EgressObject: true,
			DNS: cty.NullVal(cty.List(cty.String)), Sidecars: []string{"db"}, Credentials: true},
			[]string{"allow", "credentials", "sidecars"}, []string{"agent.a.network", "runtime.r.egress"}, true},
		{"swarm", Spec{Agent: agent, AgentAddr: "agent.a", Network: "agent.a.network", EgressNetwork: "bridge",
			DNS: cty.ListValEmpty(cty.String)},
			[]string{"allow"}, []string{"agent.a.network"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := Plan(tc.spec)
			if err != nil {
				t.Fatal(err)
			}
			if o.Addr != "agent.a.gateway" || o.Kind != Kind || !o.Workload {
				t.Errorf("object = %s %s workload=%v", o.Addr, o.Kind, o.Workload)
			}
			if !slices.Equal(o.InPlace, tc.inPlace) || !slices.Equal(o.DependsOn, tc.dependsOn) {
				t.Errorf("in place %v, depends on %v", o.InPlace, o.DependsOn)
			}
			if allow, _ := drivers.Strings(o.Attrs["allow"]); !slices.Equal(allow, []string{"api.example.com:443"}) {
				t.Errorf("allow = %v", allow)
			}
			if _, ok := o.Attrs["credentials"]; ok != tc.credentials {
				t.Errorf("credentials attribute present = %v", ok)
			}
			if c := o.Attrs["ceiling"]; c.IsNull() || c.LengthInt() != 0 {
				t.Errorf("ceiling = %#v, want the empty list", c)
			}
			a, err := DecodeAttrs(o)
			if err != nil {
				t.Fatal(err)
			}
			if a.Agent != "agent.a" || a.EgressNetwork != tc.spec.EgressNetwork || a.Ceiling == nil {
				t.Errorf("decoded %+v", a)
			}
		})
	}
}

func TestPlanRefusesBadRule(t *testing.T) {
	w := cty.ObjectVal(map[string]cty.Value{"egress": cty.ListVal([]cty.Value{cty.StringVal("not a rule")})})
	if _, err := Plan(Spec{Agent: drivers.AgentSpec{Workload: w}, AgentAddr: "agent.a", EgressNetwork: "x"}); err == nil {
		t.Fatal("a bad rule was planned")
	}
}

func TestWait(t *testing.T) {
	for _, tc := range []struct {
		name, log, err string
		closed         int
	}{
		{"ready", `svc.1.x | {"event":"forbid-loaded","tunnels_closed":1}
{"event":"rules-loaded","allow":["a.example:443"],"tunnels_closed":2}
{"event":"listening"}
`, "", 3},
		{"rejected", `{"event":"rules-invalid","error":"bad rule"}
`, "did not take its rules: bad rule", 0},
		{"ended", "starting\n", "log ended before it was ready", 0},
		{"other rules", `{"event":"rules-loaded","allow":["b.example:443"]}
{"event":"listening"}
`, "log ended before it was ready", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, err := Wait(strings.NewReader(tc.log), []string{"a.example:443"})
			if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
				t.Fatalf("err = %v, want %q", err, tc.err)
			}
			if n != tc.closed {
				t.Errorf("closed = %d, want %d", n, tc.closed)
			}
		})
	}
}

// TestAddrAndAgentOf: a gateway and its agent are found from anything of
// the bottle, through addrs; an address below no agent has no gateway.
func TestAddrAndAgentOf(t *testing.T) {
	for _, tt := range []struct{ in, addr, agent string }{
		{"agent.coder", "agent.coder.gateway", "agent.coder"},
		{"agent.coder.gateway", "agent.coder.gateway", "agent.coder"},
		{"agent.coder.sidecar.web", "agent.coder.gateway", "agent.coder"},
		{"agent.coder.image", "agent.coder.gateway", "agent.coder"},
		{"runtime.local.egress", "", "runtime.local.egress"},
		{"snapshot.base", "", "snapshot.base"},
	} {
		if got := Addr(tt.in); got != tt.addr {
			t.Errorf("Addr(%q) = %q, want %q", tt.in, got, tt.addr)
		}
		if got := AgentOf(tt.in); got != tt.agent {
			t.Errorf("AgentOf(%q) = %q, want %q", tt.in, got, tt.agent)
		}
	}
}
