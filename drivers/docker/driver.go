package docker

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"sync"

	"github.com/docker/docker/client"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/hcl/v2/hcldec"
	"github.com/zclconf/go-cty/cty"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/engine"
	"github.com/bottlefile/bottlefile/drivers/gateway"
)

// DefaultSubnetPool is where agent networks get their /28 subnets when the
// runtime block sets no subnet_pool: 4096 networks.
const DefaultSubnetPool = "10.213.0.0/16"

// subnetBits is the prefix length of each agent network: 14 usable
// addresses, enough for an agent, its sidecars and its gateway.
const subnetBits = 28

// Driver drives one Docker engine. It is safe for concurrent use once
// configured.
type Driver struct {
	log hclog.Logger

	// newAPI makes the engine client; tests replace it.
	newAPI func(ep engine.Endpoint) (dockerAPI, error)

	// mu guards the fields below, which Configure sets and Close clears.
	mu      sync.RWMutex
	api     dockerAPI
	runtime string
	ep      engine.Endpoint // where the engine is (drivers/engine)
	pool    netip.Prefix
	egress  egressConfig
	snap    snapshotConfig // snapshot.go
	// stateDir is the state's directory, where bottles' CAs are kept
	// (credentials.go).
	stateDir string

	// gatewaySweep holds the lineages of which this run deleted a
	// gateway or a snapshot: Close then sweeps the gateway images
	// (sweepGatewayImages).
	gatewaySweep sync.Map

	// pendingSweeps holds the lineages whose image sweep was skipped
	// because an image was being made; Close runs them (snapshot.go).
	pendingSweeps sync.Map

	// builds holds this run's image builds by distinct context, so agents
	// with the same build share one (image.go).
	buildsMu sync.Mutex
	builds   map[buildKey]*sharedBuild

	// checks caches the read-only facts Plan asks the engine and the
	// gateway binary's hash, once per driver instance (isolation.go).
	checks *engineChecks
	// host caches the engine host's own addresses, learned once per
	// driver instance at the first gateway made or updated (enginehost.go).
	host *engineHost
	// hostWG waits at Close for the engine host probe's work in the
	// background (prefetchEngineHost, the removal of its containers).
	hostWG sync.WaitGroup
	// started holds, per container ID, a startMark: when this process
	// started it (the engine's StartedAt when trusted), and what the
	// inspect after it saw. Settle
	// watches a workload from its own start, not from when the executor
	// gets to it (issue 28).
	started sync.Map
	// gatewayImageRef is the gateway image this driver last made sure the
	// engine has (gatewayImage), under gatewayImageMu.
	gatewayImageMu  sync.Mutex
	gatewayImageRef string
	// actMems remember each container's CPU counter between looks at
	// its activity, by memory name (*activityMemory, activity.go).
	actMems sync.Map
}

var (
	_ drivers.Driver  = (*Driver)(nil)
	_ drivers.Closer  = (*Driver)(nil)
	_ drivers.Factory = New
)

// New makes an unconfigured docker driver.
func New(log hclog.Logger) (drivers.Driver, error) {
	return NewEngine(log)
}

// NewEngine is New as the driver of one engine that a driver running on
// several (swarm) drives each engine through (engine.Driver).
func NewEngine(log hclog.Logger) (engine.Driver, error) {
	d := newDriver(log, nil)
	// With BOTTLEFILE_LOG=trace the client logs every engine call
	// (drivers/engine trace.go).
	d.newAPI = func(ep engine.Endpoint) (dockerAPI, error) { return ep.OpenTraced(d.log) }
	return d, nil
}

var _ engine.Driver = (*Driver)(nil)

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

func newDriver(log hclog.Logger, newAPI func(ep engine.Endpoint) (dockerAPI, error)) *Driver {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	return &Driver{log: log.Named("docker"), newAPI: newAPI}
}

// newClient makes an engine client that has not contacted the engine yet
// (drivers/engine: unix://, tcp:// with TLS, ssh://; the host from the
// runtime block, else DOCKER_HOST and DOCKER_CERT_PATH, else the default
// socket). The driver calls its Connect before its first call.
func newClient(ep engine.Endpoint) (dockerAPI, error) {
	return ep.Open()
}

// Name is the driver attribute value of a docker runtime block.
func (d *Driver) Name() string { return "docker" }

// Declare is what a docker runtime block holds and what the docker
// driver can do. It needs no engine.
func (d *Driver) Declare() drivers.Declaration {
	return Declaration()
}

// Declaration is the docker driver's declaration, without a driver.
func Declaration() drivers.Declaration {
	return drivers.Declaration{
		Schema: drivers.Schema{Runtime: configSpec(), CheckRuntime: engine.Check},
		Capabilities: drivers.Capabilities{
			Sidecars:    true,
			Build:       true,
			Healthcheck: true,
			Attributes:  mappedAttrs,
			// Limits change on the live container (ContainerUpdate); an
			// allowlist on the live gateway.
			InPlace: []string{"cpus", "memory", "pids", "egress"},
			Egress: drivers.EgressCapabilities{
				Names: true, Wildcards: true, Ports: true, Addresses: true, CIDRs: true,
				Credentials: true,
			},
			Snapshots: drivers.SnapshotCapabilities{Take: true, Format: drivers.FormatImage, Export: true, Import: true},
			Logs:      true,
			Exec:      true,
			Workspace: true,
			Activity:  true,
		},
	}
}

// configSpec is the schema of a docker runtime block's own attributes:
// the engine's address (host, tls_ca, tls_cert, tls_key: drivers/engine)
// and the driver's own.
func configSpec() hcldec.ObjectSpec {
	spec := hcldec.ObjectSpec{
		"subnet_pool": &hcldec.DefaultSpec{
			Primary: &hcldec.AttrSpec{Name: "subnet_pool", Type: cty.String},
			Default: &hcldec.LiteralSpec{Value: cty.StringVal(DefaultSubnetPool)},
		},
	}
	maps.Copy(spec, engine.Spec())
	maps.Copy(spec, egressSpec())
	maps.Copy(spec, gateway.RuntimeSpec())
	maps.Copy(spec, snapshotSpec())
	return spec
}

// Configure reads the runtime block and makes the engine client. It does
// not contact the engine: the first Read or Apply does.
func (d *Driver) Configure(ctx context.Context, req drivers.ConfigureRequest) error {
	ep, err := engine.FromConfig(req)
	if err != nil {
		return fmt.Errorf("runtime %q: %w", req.Runtime, err)
	}
	poolStr, err := drivers.ConfigString(req.Config, "subnet_pool")
	if err != nil {
		return fmt.Errorf("runtime %q: subnet_pool: %w", req.Runtime, err)
	}
	if poolStr == "" {
		poolStr = DefaultSubnetPool
	}
	pool, err := parseSubnetPool(poolStr)
	if err != nil {
		return fmt.Errorf("runtime %q: %w", req.Runtime, err)
	}
	eg, err := parseEgressConfig(req.Config)
	if err != nil {
		return fmt.Errorf("runtime %q: %w", req.Runtime, err)
	}
	sc, err := parseSnapshotConfig(req.Config)
	if err != nil {
		return fmt.Errorf("runtime %q: %w", req.Runtime, err)
	}
	api, err := d.newAPI(ep)
	if err != nil {
		var ae *drivers.AttributeError
		if errors.As(err, &ae) {
			return fmt.Errorf("runtime %q: %w", req.Runtime, err)
		}
		return &drivers.UnreachableError{Runtime: req.Runtime, Address: ep.Address(), Err: err}
	}

	d.mu.Lock()
	old := d.api
	d.api, d.runtime, d.ep, d.pool, d.egress = api, req.Runtime, ep, pool, eg
	d.stateDir = req.StateDir
	d.checks = &engineChecks{}
	d.host = &engineHost{}
	d.snap = sc
	d.mu.Unlock()
	d.buildsMu.Lock()
	d.builds = nil
	d.buildsMu.Unlock()
	if old != nil {
		_ = old.Close()
	}
	d.log.Debug("configured", "runtime", req.Runtime, "engine", ep.Address(), "tls", ep.TLS(), "subnet_pool", pool.String())
	return nil
}

// Close releases the engine client. When this run deleted a gateway, it
// first removes the gateway images no container uses any more: once, at
// the end, rather than after every delete of a destroy. Image sweeps that
// were skipped while images were being made run here too.
func (d *Driver) Close() error {
	d.mu.Lock()
	api := d.api
	d.api = nil
	d.mu.Unlock()
	if api == nil {
		return nil
	}
	d.hostWG.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), sweepTimeout)
	defer cancel()
	var lineages []string
	d.gatewaySweep.Range(func(k, _ any) bool {
		lineages = append(lineages, k.(string))
		d.gatewaySweep.Delete(k)
		return true
	})
	if len(lineages) > 0 {
		d.sweepGatewayImages(ctx, api, lineages)
	}
	d.sweepPending(ctx, api)
	return api.Close()
}

// Unreachable turns an error that says the engine cannot be reached at
// all into a drivers.UnreachableError naming what failed (refused, TLS,
// authentication, API too old: drivers/engine), which the planner reports
// once for the runtime rather than once per object; other errors pass
// unchanged.
func (d *Driver) Unreachable(err error) error {
	if err == nil {
		return nil
	}
	d.mu.RLock()
	ep := d.ep
	d.mu.RUnlock()
	return ep.Classify(err)
}

// connector is what the real engine client has beyond dockerAPI: the
// once-per-client check that the engine answers with a recent enough API
// (engine.Engine.Connect). Test fakes lack it.
type connector interface {
	Connect(ctx context.Context) error
}

// engine returns the client and subnet pool, or an error before Configure.
// The first call of a configured client checks the engine (Connect).
func (d *Driver) engine(ctx context.Context) (dockerAPI, netip.Prefix, error) {
	d.mu.RLock()
	api, pool := d.api, d.pool
	d.mu.RUnlock()
	if api == nil {
		return nil, netip.Prefix{}, errors.New("docker driver is not configured")
	}
	if c, ok := api.(connector); ok {
		if err := c.Connect(ctx); err != nil {
			return nil, netip.Prefix{}, err
		}
	}
	return api, pool, nil
}

// parseSubnetPool checks the subnet_pool attribute: an IPv4 network
// address in CIDR notation with room for at least one /28.
func parseSubnetPool(s string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("subnet_pool %q is not a CIDR block like %q: %w", s, DefaultSubnetPool, err)
	}
	if !p.Addr().Is4() {
		return netip.Prefix{}, fmt.Errorf("subnet_pool %q must be an IPv4 block like %q", s, DefaultSubnetPool)
	}
	if p.Bits() > subnetBits {
		return netip.Prefix{}, fmt.Errorf("subnet_pool %q is smaller than one /%d agent network; use a /%d or larger block", s, subnetBits, subnetBits)
	}
	if p.Masked() != p {
		return netip.Prefix{}, fmt.Errorf("subnet_pool %q has host bits set; did you mean %q?", s, p.Masked().String())
	}
	return p, nil
}
