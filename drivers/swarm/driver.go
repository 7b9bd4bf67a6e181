package swarm

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/docker/docker/api/types/swarm"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/hcl/v2/hcldec"
	"github.com/zclconf/go-cty/cty"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/engine"
	"github.com/bottlefile/bottlefile/drivers/gateway"
)

// Driver drives one swarm through one of its managers. It is safe for
// concurrent use once configured.
type Driver struct {
	log hclog.Logger

	// eng is the driver of the manager's engine (the docker driver, as
	// cmd/bottlefile wires it: engine.Driver): the connection and image
	// builds are its. newEngine makes one per node engine (nodes.go).
	eng       engine.Driver
	newEngine engine.Factory

	// mu guards the fields below, which Configure sets.
	mu         sync.RWMutex
	configured bool
	runtime    string
	registry   string        // "" without one
	egress     string        // an existing egress network; "" for a managed one
	dns        []string      // the gateways' DNS servers
	timeout    time.Duration // node_timeout (bounds.go)

	// cluster caches what Plan asks the manager, once per configured
	// driver.
	cluster *clusterFacts

	// gwImage is the gateway image as the services run it (pushed to the
	// registry), made once per configured driver.
	gwImage *gatewayImage
	// gwBinary is the gateway binary, read once per configured driver.
	gwBinary *binaryOnce

	// nodeEngs are the drivers of the nodes' engines (node_hosts, as
	// nodes), regAPI the registry's API (snapshots); nil before
	// Configure, regAPI without a registry.
	nodeEngs *nodeEngines
	regAPI   *registryAPI
}

var (
	_ drivers.Driver = (*Driver)(nil)
	_ drivers.Closer = (*Driver)(nil)
)

// Factory is the swarm driver's factory: each driver reaches the manager's
// engine, and each node's, through a driver of that engine newEngine
// makes. cmd/bottlefile gives it the docker driver's (docker.NewEngine).
func Factory(newEngine engine.Factory) drivers.Factory {
	return func(log hclog.Logger) (drivers.Driver, error) {
		if log == nil {
			log = hclog.NewNullLogger()
		}
		eng, err := newEngine(log)
		if err != nil {
			return nil, err
		}
		return &Driver{log: log.Named("swarm"), eng: eng, newEngine: newEngine}, nil
	}
}

// Name is the driver attribute value of a swarm runtime block.
func (d *Driver) Name() string { return "swarm" }

// Declare is what a swarm runtime block and an agent's driver block hold,
// and what the driver can do. It needs no engine.
func (d *Driver) Declare() drivers.Declaration { return Declaration() }

// Declaration is the swarm driver's declaration, without a driver.
func Declaration() drivers.Declaration {
	return drivers.Declaration{
		Schema: drivers.Schema{Runtime: configSpec(), Agent: agentSpec(), CheckRuntime: checkRuntime},
		Capabilities: drivers.Capabilities{
			Sidecars:   true,
			Build:      true,
			Attributes: mappedAttrs,
			// Any change to a service starts a new task, losing what the
			// old one wrote: only the allowlist, which is the gateway's,
			// changes without touching the agent.
			InPlace: []string{"egress"},
			Egress: drivers.EgressCapabilities{
				Names: true, Wildcards: true, Ports: true, Addresses: true, CIDRs: true,
			},
			// Snapshots live in the runtime's registry (snapshot.go).
			Snapshots: drivers.SnapshotCapabilities{Take: true, Format: drivers.FormatImage, Export: true, Import: true},
			// Through the node's engine of the task (workload.go).
			Logs: true,
			Exec: true,
			// Through an image composed on a node's engine (workspace.go).
			Workspace: true,
			// Read on the nodes' engines of the tasks (activity.go).
			Activity: true,
		},
	}
}

// gatewayAttrs are the gateways' attributes of a runtime block, the same
// on swarm as on the engine's driver.
var gatewayAttrs = slices.Sorted(maps.Keys(gateway.RuntimeSpec()))

// sharedAttrs are the attributes a swarm runtime block passes on to the
// engine's driver as they are: how to reach the manager's engine
// (drivers/engine), and the gateway's.
var sharedAttrs = func() []string {
	out := slices.Sorted(maps.Keys(engine.Spec()))
	return append(out, gatewayAttrs...)
}()

// configSpec is the schema of a swarm runtime block's attributes: the
// manager's engine (host, tls_ca, tls_cert, tls_key, as drivers/engine
// reads them), the registry, and the gateways'.
func configSpec() hcldec.ObjectSpec {
	spec := hcldec.ObjectSpec{
		"registry":       &hcldec.AttrSpec{Name: "registry", Type: cty.String},
		"egress_network": &hcldec.AttrSpec{Name: "egress_network", Type: cty.String},
		attrNodeHosts:    &hcldec.AttrSpec{Name: attrNodeHosts, Type: cty.Map(cty.String)},
		attrRegistryURL:  &hcldec.AttrSpec{Name: attrRegistryURL, Type: cty.String},
		attrNodeTimeout:  &hcldec.AttrSpec{Name: attrNodeTimeout, Type: cty.String},
	}
	maps.Copy(spec, engine.Spec())
	maps.Copy(spec, gateway.RuntimeSpec())
	return spec
}

// agentSpec is the schema of an agent's driver block on a swarm runtime.
func agentSpec() hcldec.ObjectSpec {
	return hcldec.ObjectSpec{
		"placement": &hcldec.AttrSpec{Name: "placement", Type: cty.List(cty.String)},
	}
}

// engineConfig is the runtime block, in the schema of the engine's driver
// (spec), for the manager's engine: the connection and gateway attributes
// of the swarm block, the others null (their defaults). The docker
// driver's isolation check, which judges its own bridge networks, does
// not apply to overlays.
func engineConfig(spec hcldec.ObjectSpec, cfg cty.Value) cty.Value {
	ty := hcldec.ImpliedType(spec)
	vals := map[string]cty.Value{}
	for name, aty := range ty.AttributeTypes() {
		vals[name] = cty.NullVal(aty)
	}
	for _, name := range sharedAttrs {
		if _, ok := vals[name]; ok && cfg != cty.NilVal && !cfg.IsNull() && cfg.Type().IsObjectType() && cfg.Type().HasAttribute(name) {
			vals[name] = cfg.GetAttr(name)
		}
	}
	if _, ok := vals["insecure_skip_isolation_check"]; ok {
		vals["insecure_skip_isolation_check"] = cty.True
	}
	return cty.ObjectVal(vals)
}

// Configure reads the runtime block and configures the driver of the
// manager's engine. It does not contact the engine.
func (d *Driver) Configure(ctx context.Context, req drivers.ConfigureRequest) error {
	registry, err := drivers.ConfigString(req.Config, "registry")
	if err != nil {
		return fmt.Errorf("runtime %q: registry: %w", req.Runtime, err)
	}
	if registry != "" {
		if err := checkRegistry(registry); err != nil {
			return fmt.Errorf("runtime %q: registry: %w", req.Runtime, err)
		}
	}
	registryURL, err := drivers.ConfigString(req.Config, attrRegistryURL)
	if err != nil {
		return fmt.Errorf("runtime %q: %s: %w", req.Runtime, attrRegistryURL, err)
	}
	if registryURL != "" {
		if err := checkRegistryURL(registryURL); err != nil {
			return fmt.Errorf("runtime %q: %s: %w", req.Runtime, attrRegistryURL, err)
		}
	}
	nodeHosts, err := parseNodeEngines(req.Config)
	if err != nil {
		return fmt.Errorf("runtime %q: %s: %w", req.Runtime, attrNodeHosts, err)
	}
	egressNet, err := drivers.ConfigString(req.Config, "egress_network")
	if err != nil {
		return fmt.Errorf("runtime %q: egress_network: %w", req.Runtime, err)
	}
	var dns []string
	if req.Config != cty.NilVal && !req.Config.IsNull() && req.Config.Type().HasAttribute("gateway_dns") {
		if dns, err = drivers.Strings(req.Config.GetAttr("gateway_dns")); err != nil {
			return fmt.Errorf("runtime %q: gateway_dns: %w", req.Runtime, err)
		}
	}
	binary, err := drivers.ConfigString(req.Config, gateway.AttrBinary)
	if err != nil {
		return fmt.Errorf("runtime %q: %s: %w", req.Runtime, gateway.AttrBinary, err)
	}
	timeout, err := parseNodeTimeout(req.Config)
	if err != nil {
		return fmt.Errorf("runtime %q: %s: %w", req.Runtime, attrNodeTimeout, err)
	}
	dreq := req
	dreq.Config = engineConfig(d.eng.Declare().Schema.Runtime, req.Config)
	if err := d.eng.Configure(ctx, dreq); err != nil {
		return err
	}
	var reg *registryAPI
	if registry != "" {
		reg = newRegistryAPI(registry, registryURL, timeout)
	}
	d.mu.Lock()
	d.configured = true
	d.runtime, d.registry, d.egress, d.dns = req.Runtime, registry, egressNet, dns
	d.timeout = timeout
	d.cluster = &clusterFacts{}
	d.gwImage = &gatewayImage{}
	d.gwBinary = &binaryOnce{path: binary}
	oldNodes := d.nodeEngs
	d.nodeEngs = &nodeEngines{hosts: nodeHosts, cfg: req.Config, req: req, spec: d.eng.Declare().Schema.Runtime}
	d.regAPI = reg
	d.mu.Unlock()
	_ = oldNodes.close()
	d.log.Debug("configured", "runtime", req.Runtime, "registry", registry)
	return nil
}

// Read, Plan and Apply report a manager's engine that cannot be reached at
// all as one *drivers.UnreachableError (the engine driver's Unreachable),
// which the planner reports once for the runtime rather than once per
// object.

// Read lists the services, networks and built images of one lineage, and
// the tasks of those services, with one list call per kind (and one of the
// nodes, to name where each task runs). A service reads as running when
// its task is running.
func (d *Driver) Read(ctx context.Context, req drivers.ReadRequest) (drivers.ReadResponse, error) {
	return reached(d, d.read)(ctx, req)
}

// Plan expands one agent into its overlay network, its images when they
// are built, its service and its sidecars' services, and, with an egress
// block, its gateway service and the runtime's egress network. It reads
// build contexts and the gateway binary to hash them, and asks the
// manager (once per configured driver, read-only) that it is one and
// which node it is; it changes nothing.
func (d *Driver) Plan(ctx context.Context, req drivers.PlanRequest) (drivers.PlanResponse, error) {
	return reached(d, d.plan)(ctx, req)
}

// Apply performs one operation on one object.
func (d *Driver) Apply(ctx context.Context, req drivers.ApplyRequest) (drivers.ApplyResponse, error) {
	return reached(d, d.apply)(ctx, req)
}

// reached is f with a failure to reach the manager's engine classified.
func reached[Req, Resp any](d *Driver, f func(context.Context, Req) (Resp, error)) func(context.Context, Req) (Resp, error) {
	return func(ctx context.Context, req Req) (Resp, error) {
		resp, err := f(ctx, req)
		return resp, d.eng.Unreachable(err)
	}
}

// checkRegistry accepts a registry address as a repository prefix:
// HOST[:PORT][/PATH], no scheme.
func checkRegistry(s string) error {
	switch {
	case strings.Contains(s, "://"):
		return fmt.Errorf("%q has a scheme: give the address as images name it (%q)", s, s[strings.Index(s, "://")+3:])
	case strings.HasSuffix(s, "/") || strings.ContainsAny(s, " \t@"):
		return fmt.Errorf("%q is not a registry address like %q", s, "registry.internal:5000")
	}
	return nil
}

// Close releases the engine clients: the manager's and the nodes'.
func (d *Driver) Close() error {
	d.mu.Lock()
	nodes := d.nodeEngs
	d.nodeEngs = nil
	d.mu.Unlock()
	return errors.Join(nodes.close(), d.eng.Close())
}

// manager returns the manager's client (checking, the first time, that it
// answers), or an error before Configure.
func (d *Driver) manager(ctx context.Context) (swarmAPI, error) {
	d.mu.RLock()
	ok := d.configured
	d.mu.RUnlock()
	if !ok {
		return nil, errors.New("swarm driver is not configured")
	}
	return d.eng.Client(ctx)
}

func (d *Driver) settings() (runtime, registry, egress string, dns []string) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return d.runtime, d.registry, d.egress, d.dns
}

// clusterFacts are what Plan asks the manager: whether it is a swarm
// manager, and its node (where images built without a registry are).
type clusterFacts struct {
	mu   sync.Mutex
	done bool
	node swarm.Node // the manager's own node
	err  error
	// clusterID is the swarm's own ID (EngineID).
	clusterID string
}

var _ drivers.EngineIdentifier = (*Driver)(nil)

// EngineID is the swarm cluster's ID: two runtime blocks that reach one
// swarm (through two managers, say) are one engine. It is read with the
// rest of what the driver asks the manager once (facts).
func (d *Driver) EngineID(ctx context.Context) (string, error) {
	if _, err := d.facts(ctx); err != nil {
		return "", err
	}
	d.mu.RLock()
	c := d.cluster
	d.mu.RUnlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.clusterID == "" {
		return "", nil
	}
	return "swarm:" + c.clusterID, nil
}

// facts asks the manager once per configured driver: one Info call and
// one node list, both read-only.
func (d *Driver) facts(ctx context.Context) (swarm.Node, error) {
	api, err := d.manager(ctx)
	if err != nil {
		return swarm.Node{}, err
	}
	d.mu.RLock()
	c := d.cluster
	runtime := d.runtime
	d.mu.RUnlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done {
		return c.node, c.err
	}
	info, err := api.Info(ctx)
	if err != nil {
		return swarm.Node{}, d.eng.Unreachable(err) // not remembered: the next call tries again
	}
	c.done = true
	c.clusterID = info.Swarm.Cluster.ID
	switch {
	case info.Swarm.LocalNodeState != swarm.LocalNodeStateActive:
		c.err = fmt.Errorf("runtime %q: the engine is not part of a swarm (its swarm state is %q): run docker swarm init on it, or point host at a manager", runtime, info.Swarm.LocalNodeState)
	case !info.Swarm.ControlAvailable:
		c.err = fmt.Errorf("runtime %q: the engine is a swarm worker, not a manager: point host at a manager (docker node ls there shows them)", runtime)
	}
	if c.err != nil {
		return c.node, c.err
	}
	nodes, err := api.NodeList(ctx, swarm.NodeListOptions{})
	if err != nil {
		c.done = false
		return swarm.Node{}, d.eng.Unreachable(err)
	}
	for _, n := range nodes {
		if n.ID == info.Swarm.NodeID {
			c.node = n
		}
	}
	if c.node.ID == "" {
		c.err = fmt.Errorf("runtime %q: the manager's node %s is not in its node list", runtime, info.Swarm.NodeID)
	}
	return c.node, c.err
}

// runtimeName is the runtime block the driver was configured for.
func (d *Driver) runtimeName() string {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return d.runtime
}
