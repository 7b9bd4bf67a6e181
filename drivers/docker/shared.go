package docker

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/docker/docker/client"
	"github.com/zclconf/go-cty/cty"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/egress"
)

// What another driver that runs bottles on Docker engines (drivers/swarm,
// whose manager is one) shares of this one instead of copying it: a
// Driver configured against that engine gives the connection (the client,
// and errors that say the engine cannot be reached), builds images (Apply
// of an image object), makes the gateway image, and reads gateway logs.

// KindImage is the kind of a built image object (Apply builds it).
const KindImage = kindImage

// Client is the engine client the configured driver uses, as the whole
// Docker API, for calls this driver does not make (swarm services). The
// first call checks that the engine answers (drivers/engine Connect).
func (d *Driver) Client(ctx context.Context) (client.APIClient, error) {
	api, _, err := d.engine(ctx)
	if err != nil {
		return nil, err
	}
	cli, ok := api.(client.APIClient)
	if !ok {
		return nil, fmt.Errorf("the docker client in use (%T) is not the whole engine API", api)
	}
	return cli, nil
}

// Unreachable turns an error that says the engine cannot be reached at all
// into a *drivers.UnreachableError naming the runtime and where the engine
// was looked for; other errors pass unchanged.
func (d *Driver) Unreachable(err error) error { return d.unreachable(err) }

// PlanImage is the image object of a workload at addr with a build block
// (its context hashed, as this driver plans it: addr + ".image"), and the
// context hash the workload's own object records as build_hash; nil and ""
// without a build block. It reads the context and contacts nothing.
func (d *Driver) PlanImage(addr string, w cty.Value) (*drivers.Object, string, error) {
	build := drivers.WorkloadAttr(w, "build")
	if build.IsNull() {
		return nil, "", nil
	}
	objs, err := d.planWorkload(addr, addr+".network", w)
	if err != nil {
		return nil, "", err
	}
	for i := range objs {
		if objs[i].Kind == kindImage {
			sum, err := drivers.String(objs[i].Attrs["context_hash"])
			return &objs[i], sum, err
		}
	}
	return nil, "", errors.New("a build block planned no image")
}

// ImageTag is the tag Apply gives the image it builds for the image object
// at addr (PlanImage's) from the context hashed as contextHash:
// bf-<lineage[:8]>-<agent>:<contextHash[:12]>.
func ImageTag(lineage, addr, contextHash string) (string, error) {
	return imageTag(lineage, addr, contextHash)
}

// CheckLabels refuses workload labels that would shadow bottlefile's own
// (io.bottlefile.*); unknown values pass.
func CheckLabels(v cty.Value) error { return checkLabels(v) }

// CheckLimits refuses cpus or memory that are negative or not numbers.
func CheckLimits(cpus, memory cty.Value) error { return checkLimits(cpus, memory) }

// AllowValue is an egress allow list as a gateway object records it: the
// rules in canonical form, repeats dropped; the empty list for none.
func AllowValue(v cty.Value) (cty.Value, error) { return allowValue(v) }

// CheckSidecarEgress refuses a sidecar egress rule its agent's allowlist
// lacks: a bottle has one gateway.
func CheckSidecarEgress(agent, sidecar cty.Value) error { return checkSidecarEgress(agent, sidecar) }

// GatewayVersion is the gateway binary's version as plans show it
// ("v0.2.0 (3f2a9c1d4e5f)"); it only reads the binary.
func (d *Driver) GatewayVersion() (string, error) {
	path, sum, err := d.gatewayBinary()
	if err != nil {
		return "", err
	}
	return gatewayVersion(path, sum), nil
}

// GatewayImage makes sure the engine has the gateway image of the gateway
// binary, importing it when missing, and returns its reference and the
// binary's version (GatewayVersion).
func (d *Driver) GatewayImage(ctx context.Context) (ref, version string, err error) {
	api, _, err := d.engine(ctx)
	if err != nil {
		return "", "", err
	}
	path, sum, err := d.gatewayBinary()
	if err != nil {
		return "", "", err
	}
	gatewayImageUse.RLock()
	defer gatewayImageUse.RUnlock()
	ref, err = d.ensureGatewayImage(ctx, api, path, sum)
	return ref, gatewayVersion(path, sum), err
}

// The gateway's settings, as this driver runs it.
const (
	GatewayUser   = gatewayUser
	GatewayMemory = gatewayMemory
	GatewayCPUs   = gatewayCPUs
	GatewayPids   = gatewayPids
	// GatewayAlias is the gateway's name on its bottle's network.
	GatewayAlias = gatewayAlias
	// GatewayRulesDir holds its rules file (GatewayRulesFile) and its
	// forbid file (GatewayForbidFile).
	GatewayRulesDir   = rulesDir
	GatewayRulesFile  = rulesName
	GatewayForbidFile = forbidName
)

// ProxyVars are the variables an agent's and sidecars' proxy settings go
// in (HTTP_PROXY, ...); NoProxyVars hold the names not to proxy.
var (
	ProxyVars   = proxyVars
	NoProxyVars = noProxyVars
	// DNSOptions make an outside lookup on an internal network fail fast.
	DNSOptions = dnsOptions
)

// FollowGateway reads a gateway's event log (what it writes on stderr, as
// lines) until it listens with the rules allow in force. It returns how
// many open tunnels the gateway closed as it took them, or an error that
// quotes the log when the log ends first or the gateway rejects its rules.
func FollowGateway(r io.Reader, allow []string) (int, error) {
	want := gatewayWant{allow: allow}
	if rules, err := egress.ParseRules(allow); err == nil {
		want.allow = egress.NewRulesFile("", rules).Allow
	}
	var st gatewayLog
	var log strings.Builder
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		// A service's log lines may carry details before the JSON.
		if i := strings.IndexByte(line, '{'); i > 0 && json.Valid([]byte(line[i:])) {
			line = line[i:]
		}
		log.WriteString(line + "\n")
		st.add(line, want)
		if st.ready(true) {
			return st.closed, nil
		}
	}
	if st.lastErr != "" {
		return 0, fmt.Errorf("the gateway did not take its rules: %s", st.lastErr)
	}
	return 0, fmt.Errorf("the gateway's log ended before it was ready; its log:\n%s", indent(log.String()))
}

// ObjectName is the engine name this driver gives the object at addr of
// kind "container" or "network" (KindNetwork):
// bf-<lineage[:8]>-<agent>, deeper addresses joined by dashes
// (agent.coder.sidecar.db gives bf-<lineage[:8]>-coder-sidecar-db).
func ObjectName(lineage, addr, kind string) (string, error) {
	return objectName(lineage, addr, kind)
}

// KindNetwork and KindContainer are the kinds ObjectName names.
const (
	KindNetwork   = kindNetwork
	KindContainer = kindContainer
)

// EgressNetworkName is the engine name of a runtime's managed egress
// network at addr (runtime.R.egress): bf-<lineage[:8]>-R.egress.
func EgressNetworkName(lineage, addr string) (string, error) {
	return egressNetworkName(lineage, addr)
}

// CommitSnapshot takes the snapshot req.Object of the agent req.Agent from
// the container named (or with the id) ctr on this driver's engine, as
// Apply takes one of the agent's own container: no secret of the
// container's config in the image, never removed by a sweep while it is
// being made. The image is tagged SnapshotRef's reference on this engine;
// the response is a snapshot create's.
func (d *Driver) CommitSnapshot(ctx context.Context, req drivers.ApplyRequest, ctr string) (drivers.ApplyResponse, error) {
	if ctr == "" {
		return drivers.ApplyResponse{}, errors.New("no container to commit")
	}
	return d.commitSnapshot(ctx, req, ctr)
}

// SnapshotRef is the reference this driver tags the snapshot at addr of
// the agent agentAddr with: bf-<lineage[:8]>-<agent>-snap:<N or NAME>.
func SnapshotRef(lineage, addr, agentAddr string) (string, error) {
	return snapshotRef(lineage, addr, agentAddr)
}

// SweepSnapshots removes what making snapshots of the lineage left on
// this driver's engine that nothing records (untagged images of the
// lineage, intermediates a crash left), unless an image of the lineage
// is being made in this process: then Close does.
func (d *Driver) SweepSnapshots(ctx context.Context, lineage string) {
	api, _, err := d.engine(ctx)
	if err != nil {
		return
	}
	d.sweepSnapshots(ctx, api, lineage)
}

// The labels a snapshot image carries besides the lineage, address and
// config-hash ones: the agent it is a snapshot of, and the container it
// was committed from.
const (
	LabelSnapshotOf     = labelSnapshotOf
	LabelSnapshotSource = labelSnapshotSource
)

// GatewayAttrs are a gateway object's attributes as this driver plans
// them, before a driver names them on its engine.
type GatewayAttrs struct {
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

// DecodeGatewayAttrs decodes a gateway object's attributes, naming the
// attribute a bad one is.
func DecodeGatewayAttrs(o drivers.Object) (GatewayAttrs, error) {
	a := GatewayAttrs{Agent: agentOf(o.Addr)}
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
		a.Network = a.Agent + ".network"
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
