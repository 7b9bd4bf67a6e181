package gateway

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/hashicorp/hcl/v2/hcldec"
	"github.com/zclconf/go-cty/cty"

	"github.com/bottlefile/bottlefile/addrs"
	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/egress"
)

// Kind is the kind of a gateway object.
const Kind = "gateway"

const (
	// ImageLabel marks the gateway images a driver builds. They carry no
	// lineage (every state on an engine shares one per binary).
	ImageLabel = drivers.LabelPrefix + "gateway-image"
	// ImageRepo is the repository of gateway images; the tag is the
	// binary's SHA-256.
	ImageRepo = "bottlefile-gateway"

	// Port is the proxy port.
	Port = 3128
	// Alias is the gateway's name on its bottle's network.
	Alias = "gateway"

	// RulesDir holds its rules file (RulesFile) and its forbid file
	// (ForbidFile).
	RulesDir   = "/etc/bottlefile"
	RulesFile  = "rules.json"
	ForbidFile = "forbid.json"

	// StatePath is where the gateway reports the digests of the files it
	// has in force (its -state): in the image's /tmp, the one place its
	// unprivileged user may write.
	StatePath = "/tmp/bottlefile-gateway-loaded.json"

	// User runs the gateway: it needs no privilege at all.
	User = "65534:65534"

	// Ready bounds how long create and update wait for the gateway to
	// report that it listens, or that it loaded the new rules.
	Ready = 10 * time.Second
)

// Limits of a gateway: an agent that abuses its gateway starves only
// itself, never the host (issue 17). The gateway holds at most
// egress.DefaultMaxConns client connections, each with at most one
// upstream connection.
const (
	Memory = 256 << 20
	CPUs   = 1e9 // one core
	Pids   = 256
	NoFile = 4096
)

// Proxy settings every agent and sidecar gets: ProxyVars hold the
// gateway's URL, NoProxyVars the names not to proxy.
var (
	ProxyVars   = []string{"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"}
	NoProxyVars = []string{"NO_PROXY", "no_proxy"}
)

// DNSOptions make a lookup of an outside name, which the embedded resolver
// of a bottle's internal network neither answers nor refuses, fail in
// about a second instead of five: the gateway resolves for its bottle.
var DNSOptions = []string{"timeout:1", "attempts:1"}

// Addr is the address of the gateway object of the agent agentAddr (or
// of the agent anything at agentAddr is below); "" below no agent.
func Addr(agentAddr string) string {
	a, ok := addrs.AgentOf(agentAddr)
	if !ok {
		return ""
	}
	return a.Gateway().String()
}

// AgentOf returns the agent address an object of a bottle belongs to:
// "agent.coder" for agent.coder, agent.coder.gateway and
// agent.coder.sidecar.web; an address below no agent is returned as it is.
func AgentOf(addr string) string {
	a, ok := addrs.AgentOf(addr)
	if !ok {
		return addr
	}
	return a.String()
}

// AllowValue turns an agent's egress allow list into the gateway's "allow"
// attribute: the rules in canonical form (egress.Rule.String), repeats
// dropped, in the order written. No egress block, or an empty one, is the
// empty list: the gateway denies everything. Unknown values stay unknown
// and marks are kept.
func AllowValue(v cty.Value) (cty.Value, error) {
	if v == cty.NilVal || v.IsNull() {
		return cty.ListValEmpty(cty.String), nil
	}
	raw, marks := v.UnmarkDeep()
	if raw.IsNull() {
		return cty.ListValEmpty(cty.String).WithMarks(marks), nil
	}
	if !raw.IsWhollyKnown() {
		return cty.UnknownVal(cty.List(cty.String)).WithMarks(marks), nil
	}
	strs, err := drivers.Strings(raw)
	if err != nil {
		return cty.NilVal, fmt.Errorf("egress allow: %w", err)
	}
	for i, s := range strs {
		if _, err := egress.ParseRule(s); err != nil {
			return cty.NilVal, &drivers.RuleError{Index: i, Rule: s, Err: err}
		}
	}
	rules, err := egress.ParseRules(strs)
	if err != nil {
		return cty.NilVal, fmt.Errorf("egress allow: %w", err)
	}
	if len(rules) == 0 {
		return cty.ListValEmpty(cty.String).WithMarks(marks), nil
	}
	vals := make([]cty.Value, len(rules))
	for i, r := range rules {
		vals[i] = cty.StringVal(r.String())
	}
	return cty.ListVal(vals).WithMarks(marks), nil
}

// CheckSidecarEgress accepts a sidecar's egress block only when its
// agent's allowlist already holds every rule of it: a bottle has one
// gateway, and the agent and its sidecars share its allowlist.
func CheckSidecarEgress(agent, sidecar cty.Value) error {
	if sidecar == cty.NilVal || sidecar.IsNull() || !sidecar.IsWhollyKnown() {
		return nil
	}
	scRules, err := drivers.Strings(sidecar)
	if err != nil {
		return fmt.Errorf("egress: %w", err)
	}
	if len(scRules) == 0 {
		return nil
	}
	var have []string
	if agent != cty.NilVal && !agent.IsNull() {
		if !agent.IsWhollyKnown() {
			return nil
		}
		v, err := AllowValue(agent)
		if err != nil {
			return nil // reported on the agent
		}
		have, _ = drivers.Strings(v)
	}
	for _, s := range scRules {
		r, err := egress.ParseRule(s)
		if err != nil {
			return fmt.Errorf("egress rule %q: %w", s, err)
		}
		if !slices.Contains(have, r.String()) {
			return fmt.Errorf("egress rule %q is not in the agent's egress block: on the docker driver a bottle has one gateway, which the agent and its sidecars share; put every rule in the agent's egress block", s)
		}
	}
	return nil
}

// Attrs are a gateway object's attributes as a driver plans them, before
// the driver names them on its engine.
type Attrs struct {
	Agent    string // the agent's address
	Allow    []string
	Sidecars []string // the bottle's sidecar names
	Version  string   // the planned gateway version
	Network  string   // the bottle network's address
	// EgressNetwork is a runtime's egress network address, or the engine
	// name of a network the runtime block named; never empty.
	EgressNetwork string
	DNS           []string
	// Ceiling is the effective egress ceiling the gateway enforces
	// whatever its rules file says (drivers.AgentSpec.EgressCeiling): nil
	// for none, empty to allow nothing.
	Ceiling []string
}

// DecodeAttrs decodes a gateway object's attributes, naming the attribute
// a bad one is.
func DecodeAttrs(o drivers.Object) (Attrs, error) {
	a := Attrs{Agent: AgentOf(o.Addr)}
	var err error
	if a.Allow, err = drivers.Strings(o.Attr("allow")); err != nil {
		return a, fmt.Errorf("allow: %w", err)
	}
	if a.Sidecars, err = drivers.Strings(o.Attr("sidecars")); err != nil {
		return a, fmt.Errorf("sidecars: %w", err)
	}
	if a.Version, err = drivers.String(o.Attr("version")); err != nil {
		return a, fmt.Errorf("version: %w", err)
	}
	if a.Network, err = drivers.String(o.Attr("network")); err != nil {
		return a, fmt.Errorf("network: %w", err)
	}
	if a.Network == "" {
		a.Network = addrs.NetworkOf(a.Agent)
	}
	if a.EgressNetwork, err = drivers.String(o.Attr("egress_network")); err != nil {
		return a, fmt.Errorf("egress_network: %w", err)
	}
	if a.EgressNetwork == "" {
		return a, errors.New("egress_network: no egress network")
	}
	if a.DNS, err = drivers.Strings(o.Attr("dns")); err != nil {
		return a, fmt.Errorf("dns: %w", err)
	}
	if c := o.Attr("ceiling"); !c.IsNull() {
		if a.Ceiling, err = drivers.Strings(c); err != nil {
			return a, fmt.Errorf("ceiling: %w", err)
		}
		if a.Ceiling == nil {
			a.Ceiling = []string{}
		}
		if _, err := egress.ParseCeiling(egress.CeilingFlag(a.Ceiling)); err != nil {
			return a, fmt.Errorf("ceiling: %w", err)
		}
	}
	return a, nil
}

// SetCeiling gives a planned gateway object the agent's effective egress
// ceiling (drivers.AgentSpec.EgressCeiling), when it has one: an attribute
// outside InPlace, as the gateway takes its ceiling on its command line,
// where no rules file can change it, so a new ceiling replaces the
// gateway. Without one the attribute is left out, and a gateway keeps its
// configuration hash.
func SetCeiling(o *drivers.Object, ceiling []string) {
	if ceiling == nil {
		return
	}
	if len(ceiling) == 0 {
		o.Attrs["ceiling"] = cty.ListValEmpty(cty.String)
		return
	}
	vals := make([]cty.Value, len(ceiling))
	for i, r := range ceiling {
		vals[i] = cty.StringVal(r)
	}
	o.Attrs["ceiling"] = cty.ListVal(vals)
}

// CeilingArgs are the gateway's command-line arguments for its ceiling.
func CeilingArgs(ceiling []string) []string {
	if ceiling == nil {
		return nil
	}
	return []string{"-ceiling", egress.CeilingFlag(ceiling)}
}

// The runtime-block attributes of the gateways, the same on every driver
// that runs them: the binary they run (a static bottlefile build; else
// the running one) and the DNS servers they resolve with.
const (
	AttrBinary = "gateway_binary"
	AttrDNS    = "gateway_dns"
)

// RuntimeSpec is the schema of the gateway attributes of a runtime block,
// merged into the driver's own.
func RuntimeSpec() hcldec.ObjectSpec {
	return hcldec.ObjectSpec{
		AttrBinary: &hcldec.AttrSpec{Name: AttrBinary, Type: cty.String},
		AttrDNS:    &hcldec.AttrSpec{Name: AttrDNS, Type: cty.List(cty.String)},
	}
}
