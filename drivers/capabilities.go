package drivers

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2/hcldec"
	"github.com/zclconf/go-cty/cty"

	"github.com/bottlefile/bottlefile/egress"
	"github.com/bottlefile/bottlefile/workloadattr"
)

// Declaration is what a driver says about itself before it is configured:
// the schema of its blocks and what it can do. Driver.Declare returns it
// from constants alone, with no Configure and no runtime, so that validate
// checks a configuration against it without contacting anything, and the
// planner refuses what a driver cannot do before the driver plans.
type Declaration struct {
	Schema       Schema
	Capabilities Capabilities
}

// Schema is the schema of a driver's own attributes.
type Schema struct {
	// Runtime is the spec of a runtime block's attributes besides driver.
	Runtime hcldec.ObjectSpec
	// Agent is the spec of the driver-owned attributes of an agent block
	// on a runtime of this driver (swarm's placement); nil for none.
	Agent hcldec.ObjectSpec
	// CheckRuntime, when set, checks a runtime block decoded against
	// Runtime beyond its types, contacting nothing: that attributes agree
	// with each other, that the files they name exist. Values not known
	// yet (validate knows no variable) are not checked. Validate calls it,
	// and plan before Configure; each error names its attribute.
	CheckRuntime func(req ConfigureRequest) []*AttributeError
}

// Capabilities say what a driver can do with an agent. What an agent asks
// for beyond them is refused by CheckAgent, on the block, attribute or
// egress rule that asks, before the driver plans.
type Capabilities struct {
	// Sidecars: the driver runs sidecar blocks beside the agent.
	Sidecars bool
	// Build: the driver builds images from build blocks.
	Build bool
	// Healthcheck: the driver runs healthcheck blocks, and its Settle
	// (Settler) waits for a workload that has one to be healthy, so that
	// what waits for the workload starts once it is.
	Healthcheck bool
	// Attributes are the workload attributes the driver honours (image,
	// command, entrypoint, env, workdir, user, cpus, memory, labels); one
	// it would ignore is refused when it is set.
	Attributes []string
	// InPlace are the workload attributes (and "egress", an allowlist) a
	// change of which updates the live objects without replacing them.
	InPlace []string
	Egress  EgressCapabilities
	// Snapshots: what the driver does with snapshots.
	Snapshots SnapshotCapabilities
	// Logs: the driver implements LogReader.
	Logs bool
	// Exec: the driver can run a command in a live workload (Execer).
	Exec bool
	// Workspace: the driver carries an agent's workspace paths into a
	// new workload (ApplyRequest.Carry), from a snapshot or from the
	// workload it replaces.
	Workspace bool
	// Activity: the driver says when an agent was last used
	// (ActivityReader), so idle policies can run on it (CheckIdle).
	Activity bool
}

// EgressCapabilities say which egress rules a driver can enforce. Every
// driver enforces an empty allowlist (nothing reachable).
type EgressCapabilities struct {
	Names     bool // "github.com"
	Wildcards bool // "*.pythonhosted.org"
	Ports     bool // "github.com:22": a rule narrowed to one port
	Addresses bool // "203.0.113.7"
	CIDRs     bool // "10.0.0.0/8"
	// Credentials: the driver can inject credentials into allowed
	// requests, so the agent never holds them.
	Credentials bool
}

// SnapshotCapabilities say what a driver does with snapshots.
type SnapshotCapabilities struct {
	// Take: the driver creates and deletes KindSnapshot objects.
	Take bool
	// Format is what a taken snapshot is on the runtime (FormatImage,
	// FormatSmolvmPack); "" when Take is false.
	Format string
	// Export: snapshots leave the runtime as a FormatDockerSave tar
	// (SnapshotExporter).
	Export bool
	// Import: the driver takes snapshots in as a FormatDockerSave tar
	// (SnapshotImporter).
	Import bool
}

// Snapshot formats.
const (
	// FormatImage is an image in the engine's store.
	FormatImage = "image"
	// FormatSmolvmPack is a smolvm pack, a .smolmachine file.
	FormatSmolvmPack = "smolvm-pack"
	// FormatDockerSave is the tar stream `docker save` writes: what
	// snapshots are exported and imported as.
	FormatDockerSave = "docker-save"
)

// WorkloadAttributes are the attributes of an agent or sidecar block that
// Capabilities.Attributes may name: workloadattr's rows (the blocks,
// build, egress, healthcheck and credential, have capabilities of their
// own). A row no driver lists is refused by every driver.
var WorkloadAttributes = workloadattr.Names()

// Refusal is one thing an agent asks for that its runtime's driver
// cannot do. The fields say where it is asked, so that the planner and
// validate point at that block, attribute or rule.
type Refusal struct {
	// Sidecar is the name of the sidecar that asks; "" for the agent.
	Sidecar string
	// Block is the nested block that asks: "sidecar", "build", "egress",
	// "healthcheck", "credential" (named by Credential); "" for an
	// attribute.
	Block      string
	Credential string
	// Attr is the attribute that asks ("user"), when Block is "".
	Attr string
	// Rule is the position of the egress rule in the allow list, and
	// RuleText the rule as written, when Block is "egress".
	Rule     int
	RuleText string
	// Message says what the driver cannot do and what to do instead,
	// naming the driver.
	Message string
	// Ceiling is set when the egress rule is refused for being outside
	// the runtime's egress ceiling (CheckCeiling), not for the driver.
	Ceiling bool
	// Policy, with Ceiling, is the file of the operator's egress policy
	// whose ceiling refuses the rule (CheckPolicy).
	Policy string
}

func (r Refusal) Error() string { return r.Message }

// CheckAgent returns what the agent asks for beyond the capabilities of
// the named driver, in the order of the block. Values not yet known are
// not checked: the planner checks them again once they are.
func CheckAgent(driver string, c Capabilities, a AgentSpec) []Refusal {
	var out []Refusal
	out = append(out, c.checkWorkload(driver, "", a.Workload)...)
	if len(a.Workspace) > 0 && !c.Workspace {
		out = append(out, Refusal{Attr: "workspace",
			Message: fmt.Sprintf("the %s driver cannot carry workspace paths into a new image, so an image change would lose them; run this agent on a runtime whose driver can (docker, swarm), or remove workspace (a replacement then boots from the newest snapshot)", driver)})
	}
	for _, sc := range a.Sidecars {
		if !c.Sidecars {
			out = append(out, Refusal{Sidecar: sc.Name, Block: "sidecar",
				Message: fmt.Sprintf("sidecar %q cannot run on %s: the %s driver does not run sidecars; run this agent on a runtime whose driver does (docker), or drop the sidecar", sc.Name, driver, driver)})
			continue
		}
		out = append(out, c.checkWorkload(driver, sc.Name, sc.Workload)...)
	}
	return out
}

// CheckCeiling returns the egress rules of the agent and its sidecars that
// the runtime's egress ceiling (a list of rules; null for none) does not
// cover (egress.Covered), in the order of the block. Values not yet known
// are not checked: the planner checks them again once they are.
//
// On a driver that cannot narrow ports (EgressCapabilities.Ports false), a
// rule opens every port of its destination, and a ceiling rule names ports:
// there, every rule is outside a ceiling, which is said.
func CheckCeiling(driver string, c EgressCapabilities, ceiling cty.Value, a AgentSpec) []Refusal {
	if ceiling == cty.NilVal {
		return nil
	}
	ceiling, _ = ceiling.UnmarkDeep()
	if ceiling.IsNull() || !ceiling.IsWhollyKnown() {
		return nil
	}
	strs, err := Strings(ceiling)
	if err != nil {
		return nil
	}
	rules, err := egress.ParseRules(strs)
	if err != nil {
		return nil // reported where the ceiling is evaluated
	}
	return c.checkAllCeiling(driver, rules, "", a)
}

// CheckPolicy is CheckCeiling for the ceiling of the operator's egress
// policy read from source: rules set outside the configuration, which
// bound every runtime. Each refusal names source (Refusal.Policy).
func CheckPolicy(driver string, c EgressCapabilities, ceiling []egress.Rule, source string, a AgentSpec) []Refusal {
	if ceiling == nil {
		return nil
	}
	return c.checkAllCeiling(driver, ceiling, source, a)
}

func (c EgressCapabilities) checkAllCeiling(driver string, rules []egress.Rule, policy string, a AgentSpec) []Refusal {
	out := c.checkCeiling(driver, rules, policy, "", a.Workload)
	for _, sc := range a.Sidecars {
		out = append(out, c.checkCeiling(driver, rules, policy, sc.Name, sc.Workload)...)
	}
	return out
}

func (c EgressCapabilities) checkCeiling(driver string, ceiling []egress.Rule, policy, sidecar string, w cty.Value) []Refusal {
	allow, _ := WorkloadAttr(w, "egress").UnmarkDeep()
	if allow == cty.NilVal || allow.IsNull() || !allow.IsKnown() || !allow.CanIterateElements() {
		return nil
	}
	whose := "the runtime's egress_ceiling"
	if policy != "" {
		whose = "the operator's egress policy"
	}
	var out []Refusal
	i := -1
	for it := allow.ElementIterator(); it.Next(); {
		i++
		_, v := it.Element()
		if !v.IsKnown() || v.IsNull() || v.Type() != cty.String {
			continue
		}
		r, err := egress.ParseRule(v.AsString())
		if err != nil {
			continue
		}
		var msg string
		switch {
		case !egress.Covered(ceiling, r):
			msg = fmt.Sprintf("it opens %s, which no rule of %s allows (%s)", describeRule(r), whose, ruleList(ceiling))
		case !c.Ports:
			dest := r
			dest.Port = 0
			msg = fmt.Sprintf("%s cannot narrow ports, so this rule opens every port of %s, and the ceiling's rules allow only the ports they name; under an egress ceiling, an agent on %s can open nothing: run it on a runtime whose driver narrows ports (docker)", driver, dest, driver)
		default:
			continue
		}
		out = append(out, Refusal{Sidecar: sidecar, Block: "egress", Rule: i, RuleText: v.AsString(), Ceiling: true, Policy: policy, Message: msg})
	}
	return out
}

// describeRule says what a rule opens, in words.
func describeRule(r egress.Rule) string {
	ports := "ports 80 and 443"
	if r.Port != 0 {
		ports = fmt.Sprintf("port %d", r.Port)
	}
	switch {
	case r.Wildcard:
		return fmt.Sprintf("every name below %s on %s", r.Host, ports)
	case r.Prefix.IsValid() && !r.Prefix.IsSingleIP():
		return fmt.Sprintf("every address of %s on %s", r.Prefix, ports)
	case r.Prefix.IsValid():
		return fmt.Sprintf("%s on %s", r.Prefix.Addr(), ports)
	}
	return fmt.Sprintf("%s on %s", r.Host, ports)
}

func ruleList(rules []egress.Rule) string {
	if len(rules) == 0 {
		return "it is empty"
	}
	s := make([]string, len(rules))
	for i, r := range rules {
		s[i] = fmt.Sprintf("%q", r.String())
	}
	return "it has " + strings.Join(s, ", ")
}

// Err is the first refusal as an error: a *RuleError for an egress rule,
// so the planner points at the rule; nil when there is none.
func Err(refusals []Refusal) error {
	if len(refusals) == 0 {
		return nil
	}
	r := refusals[0]
	if r.Block == "egress" {
		return &RuleError{Index: r.Rule, Rule: r.RuleText, Err: r}
	}
	return r
}

func (c Capabilities) checkWorkload(driver, sidecar string, w cty.Value) []Refusal {
	var out []Refusal
	what := "the agent"
	if sidecar != "" {
		what = fmt.Sprintf("sidecar %q", sidecar)
	}
	if !WorkloadAttr(w, "build").IsNull() && !c.Build {
		out = append(out, Refusal{Sidecar: sidecar, Block: "build",
			Message: fmt.Sprintf("%s cannot build images: give %s an image instead of a build block, or run it on a runtime whose driver builds (docker)", driver, what)})
	}
	if hc := WorkloadAttr(w, "healthcheck"); hc.IsKnown() && !hc.IsNull() && !c.Healthcheck {
		out = append(out, Refusal{Sidecar: sidecar, Block: "healthcheck",
			Message: fmt.Sprintf("%s has no healthchecks that bottlefile can wait on, so nothing could start once %s is healthy; remove the healthcheck block or run it on a runtime whose driver has them (docker)", driver, what)})
	}
	for _, name := range WorkloadAttributes {
		if slices.Contains(c.Attributes, name) || !isSet(WorkloadAttr(w, name)) {
			continue
		}
		out = append(out, Refusal{Sidecar: sidecar, Attr: name,
			Message: fmt.Sprintf("%s is not supported by the %s driver: it has no %s setting, so %s would run without it; remove %s or run it on a runtime whose driver has one (docker)", name, driver, name, what, name)})
	}
	out = append(out, c.Egress.check(driver, sidecar, WorkloadAttr(w, "egress"))...)
	if !c.Egress.Credentials {
		for _, name := range credentialNames(WorkloadAttr(w, "credentials")) {
			out = append(out, Refusal{Sidecar: sidecar, Block: "credential", Credential: name,
				Message: fmt.Sprintf("%s cannot inject credentials: it has no gateway that could put credential %q into %s's requests, and bottlefile never hands the secret to the workload instead; run %s on a runtime whose driver injects credentials (docker, kubernetes), or remove the credential block and give the workload its key another way", driver, name, what, what)})
		}
	}
	return out
}

// credentialNames are the names of a credentials list's elements, those
// known.
func credentialNames(v cty.Value) []string {
	v, _ = v.UnmarkDeep()
	if v == cty.NilVal || v.IsNull() || !v.IsKnown() || !v.CanIterateElements() {
		return nil
	}
	var out []string
	for it := v.ElementIterator(); it.Next(); {
		_, e := it.Element()
		if !e.IsKnown() || e.IsNull() || !e.Type().IsObjectType() || !e.Type().HasAttribute("name") {
			continue
		}
		if n := e.GetAttr("name"); n.IsKnown() && !n.IsNull() {
			out = append(out, n.AsString())
		}
	}
	return out
}

// isSet reports whether a workload attribute is set to something: not
// absent, not null and, for a string, not empty. Unknown values count as
// not set.
func isSet(v cty.Value) bool {
	if v == cty.NilVal {
		return false
	}
	v, _ = v.UnmarkDeep()
	if v.IsNull() || !v.IsKnown() {
		return false
	}
	return v.Type() != cty.String || v.AsString() != ""
}

// check refuses the rules of an allowlist the driver cannot enforce. A rule
// the grammar rejects is left to whoever parses it (lang reports it).
func (e EgressCapabilities) check(driver, sidecar string, allow cty.Value) []Refusal {
	if allow == cty.NilVal {
		return nil
	}
	allow, _ = allow.UnmarkDeep()
	if allow.IsNull() || !allow.IsKnown() || !allow.CanIterateElements() {
		return nil
	}
	var out []Refusal
	i := -1
	for it := allow.ElementIterator(); it.Next(); {
		i++
		_, v := it.Element()
		if !v.IsKnown() || v.IsNull() || v.Type() != cty.String {
			continue
		}
		if err := e.CheckRule(driver, v.AsString()); err != nil {
			out = append(out, Refusal{Sidecar: sidecar, Block: "egress", Rule: i, RuleText: v.AsString(), Message: err.Error()})
		}
	}
	return out
}

// CheckRule refuses one egress rule the driver cannot enforce, saying
// why. A rule the grammar rejects is no concern of it: nil.
func (e EgressCapabilities) CheckRule(driver, rule string) error {
	r, err := egress.ParseRule(rule)
	if err != nil {
		return nil
	}
	if msg := e.refuse(driver, r); msg != "" {
		return errors.New(msg)
	}
	return nil
}

func (e EgressCapabilities) refuse(driver string, r egress.Rule) string {
	switch {
	case r.Wildcard && !e.Wildcards:
		return fmt.Sprintf("%s cannot enforce wildcard rules: it allows named hosts and address blocks only; list each host under %s instead", driver, r.Host)
	case r.Prefix.IsValid() && r.Prefix.IsSingleIP() && !e.Addresses:
		return fmt.Sprintf("%s cannot enforce rules for addresses: name the host instead", driver)
	case r.Prefix.IsValid() && !r.Prefix.IsSingleIP() && !e.CIDRs:
		return fmt.Sprintf("%s cannot enforce address blocks (CIDR rules): list each host instead", driver)
	case !r.Prefix.IsValid() && !r.Wildcard && !e.Names:
		return fmt.Sprintf("%s cannot enforce rules for host names: give addresses instead", driver)
	case r.Port != 0 && !e.Ports:
		port := r.Port
		r.Port = 0
		return fmt.Sprintf("%s cannot enforce per-port rules: it allows every port of a destination or none; write %q to allow all its ports (%d included), or run this agent on a runtime whose driver narrows ports (docker)", driver, r.String(), port)
	}
	return ""
}
