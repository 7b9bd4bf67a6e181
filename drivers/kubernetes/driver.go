package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/hcl/v2/hcldec"
	"github.com/zclconf/go-cty/cty"
	k8s "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/gateway"
)

// Attributes of a kubernetes runtime block besides the gateways'.
const (
	attrKubeconfig      = "kubeconfig"
	attrContext         = "context"
	attrNamespacePrefix = "namespace_prefix"
	attrRegistry        = "registry"
	attrNodeContainerd  = "node_containerd"
	// attrCredentialCAFile is docker's credential_ca_file: CAs the
	// gateways trust, besides the host's, for the credential hosts.
	attrCredentialCAFile = "credential_ca_file"
)

// defaultPrefix begins every namespace the driver makes, unless the
// runtime block names another namespace_prefix.
const defaultPrefix = "bf-"

// Driver drives one cluster through its API server. It is safe for
// concurrent use once configured.
type Driver struct {
	log hclog.Logger

	// mu guards the fields below, which Configure sets.
	mu         sync.RWMutex
	configured bool
	cfg        settings
	// stateDir is the state's directory, where bottles' CAs are kept
	// (gateway.BottleCA).
	stateDir string
	// rest is the API server's client configuration, cs the clientset
	// made from it (or given by a test: newWithClient).
	rest *rest.Config
	cs   k8s.Interface

	// gwImage is the gateway image as the gateway Pods run it, pushed to
	// the registry once per configured driver.
	gwImage *gatewayImage
	// facts caches what a gateway's forbid file is made of (the nodes'
	// addresses and the API server's), read once per configured driver.
	facts *clusterFacts
}

// settings are a configured runtime block.
type settings struct {
	runtime    string
	kubeconfig string // the file read; "" for the default resolution
	context    string
	prefix     string
	registry   string
	containerd map[string]string // node name → containerd address
	dns        []string
	binary     string // gateway_binary
	caFile     string // credential_ca_file, resolved
}

var (
	_ drivers.Driver    = (*Driver)(nil)
	_ drivers.LogReader = (*Driver)(nil)
	_ drivers.Execer    = (*Driver)(nil)

	_ drivers.BottleForgetter = (*Driver)(nil)
)

// New is the kubernetes driver's factory: it contacts nothing.
func New(log hclog.Logger) (drivers.Driver, error) {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	return &Driver{log: log.Named("kubernetes")}, nil
}

// Name is the driver attribute value of a kubernetes runtime block.
func (d *Driver) Name() string { return "kubernetes" }

// Declare is what a kubernetes runtime block and an agent's driver block
// hold, and what the driver can do. It needs no cluster.
func (d *Driver) Declare() drivers.Declaration { return Declaration() }

// mappedAttrs are the workload attributes the driver maps onto a Pod's
// container (pod.go). pids has no per-Pod setting (the kubelet's
// podPidsLimit is the node's), so it is refused rather than ignored.
var mappedAttrs = []string{"image", "command", "entrypoint", "env", "workdir", "user", "cpus", "memory", "labels"}

// Declaration is the kubernetes driver's declaration, without a driver.
func Declaration() drivers.Declaration {
	return drivers.Declaration{
		Schema: drivers.Schema{Runtime: configSpec(), Agent: agentSpec(), CheckRuntime: checkRuntime},
		Capabilities: drivers.Capabilities{
			Sidecars: true,
			// Nothing on a cluster builds images: a build block is
			// refused at validate, naming the driver.
			Build:      false,
			Attributes: mappedAttrs,
			// A Pod's spec cannot change: any change to a workload is a
			// new Pod. Only the allowlist and the credentials' values,
			// which are the gateway's, change without touching the agent.
			InPlace: []string{"egress"},
			Egress: drivers.EgressCapabilities{
				Names: true, Wildcards: true, Ports: true, Addresses: true, CIDRs: true,
				// Through the gateway's Secret (credentials.go).
				Credentials: true,
			},
			Logs: true,
			Exec: true,
			// Through the node's containerd into the registry (snapshot.go).
			Snapshots: drivers.SnapshotCapabilities{Take: true, Format: drivers.FormatImage, Export: true, Import: true},
		},
	}
}

// configSpec is the schema of a kubernetes runtime block's attributes.
func configSpec() hcldec.ObjectSpec {
	spec := hcldec.ObjectSpec{
		attrKubeconfig:       &hcldec.AttrSpec{Name: attrKubeconfig, Type: cty.String},
		attrContext:          &hcldec.AttrSpec{Name: attrContext, Type: cty.String},
		attrNamespacePrefix:  &hcldec.AttrSpec{Name: attrNamespacePrefix, Type: cty.String},
		attrRegistry:         &hcldec.AttrSpec{Name: attrRegistry, Type: cty.String},
		attrNodeContainerd:   &hcldec.AttrSpec{Name: attrNodeContainerd, Type: cty.Map(cty.String)},
		attrCredentialCAFile: &hcldec.AttrSpec{Name: attrCredentialCAFile, Type: cty.String},
	}
	maps.Copy(spec, gateway.RuntimeSpec())
	return spec
}

// agentSpec is the schema of an agent's driver block on a kubernetes
// runtime: where its Pods may be scheduled (placement.go).
func agentSpec() hcldec.ObjectSpec {
	return hcldec.ObjectSpec{
		attrNodeSelector: &hcldec.AttrSpec{Name: attrNodeSelector, Type: cty.Map(cty.String)},
		attrTolerations:  &hcldec.AttrSpec{Name: attrTolerations, Type: cty.List(tolerationType)},
	}
}

// checkRuntime checks a runtime block beyond its types, contacting
// nothing: the kubeconfig file exists, the prefix can begin a namespace
// name, the registry is an address, each node's containerd an address.
func checkRuntime(req drivers.ConfigureRequest) []*drivers.AttributeError {
	var out []*drivers.AttributeError
	add := func(attr string, err error) {
		if err != nil {
			out = append(out, &drivers.AttributeError{Attribute: attr, Err: err})
		}
	}
	known := func(name string) bool {
		c := req.Config
		if c == cty.NilVal || c.IsNull() || !c.IsKnown() || !c.Type().IsObjectType() || !c.Type().HasAttribute(name) {
			return false
		}
		v := c.GetAttr(name)
		return v.IsWhollyKnown() && !v.IsNull()
	}
	if known(attrKubeconfig) {
		path, _ := drivers.ConfigString(req.Config, attrKubeconfig)
		path = resolvePath(req.Dir, path)
		if _, err := os.Stat(path); err != nil {
			add(attrKubeconfig, fmt.Errorf("cannot read the kubeconfig: %w", err))
		}
	}
	if known(attrCredentialCAFile) {
		path, _ := drivers.ConfigString(req.Config, attrCredentialCAFile)
		if _, err := os.Stat(resolvePath(req.Dir, path)); err != nil {
			add(attrCredentialCAFile, fmt.Errorf("cannot read the CA file: %w", err))
		}
	}
	if known(attrNamespacePrefix) {
		p, _ := drivers.ConfigString(req.Config, attrNamespacePrefix)
		add(attrNamespacePrefix, checkPrefix(p))
	}
	if known(attrRegistry) {
		r, _ := drivers.ConfigString(req.Config, attrRegistry)
		add(attrRegistry, checkRegistry(r))
	}
	if known(attrNodeContainerd) {
		m, err := drivers.StringMap(req.Config.GetAttr(attrNodeContainerd))
		if err != nil {
			add(attrNodeContainerd, err)
		}
		for _, node := range slices.Sorted(maps.Keys(m)) {
			add(attrNodeContainerd, checkContainerd(node, m[node]))
		}
	}
	return out
}

// resolvePath makes a relative path in the runtime block relative to the
// Bottlefile's directory, and expands a leading ~/.
func resolvePath(dir, path string) string {
	if rest, ok := strings.CutPrefix(path, "~/"); ok {
		if home, err := os.UserHomeDir(); err == nil {
			path = filepath.Join(home, rest)
		}
	}
	if path != "" && !filepath.IsAbs(path) && dir != "" {
		path = filepath.Join(dir, path)
	}
	return path
}

// checkPrefix accepts a namespace prefix: what begins a DNS label,
// lower-case letters, digits and '-', starting with a letter, at most 20
// characters so that a bottle's name fits after it.
func checkPrefix(p string) error {
	switch {
	case p == "":
		return errors.New(`the prefix is empty: leave it out for "bf-", or give one such as "agents-"`)
	case len(p) > 20:
		return fmt.Errorf("%q is longer than 20 characters, and a namespace name is at most 63 with the bottle's after it", p)
	case !prefixRe.MatchString(p):
		return fmt.Errorf("%q cannot begin a namespace name: use lower-case letters, digits and '-', starting with a letter (for example %q)", p, "agents-")
	}
	return nil
}

// checkRegistry accepts a registry address as a repository prefix:
// HOST[:PORT][/PATH], no scheme.
func checkRegistry(s string) error {
	switch {
	case strings.Contains(s, "://"):
		return fmt.Errorf("%q has a scheme: give the address as images name it (%q)", s, s[strings.Index(s, "://")+3:])
	case s == "" || strings.HasSuffix(s, "/") || strings.ContainsAny(s, " \t@"):
		return fmt.Errorf("%q is not a registry address like %q", s, "registry.internal:5000")
	}
	return nil
}

// checkContainerd accepts one node's containerd address: a unix socket
// ("unix:///run/containerd/containerd.sock").
func checkContainerd(node, addr string) error {
	if node == "" {
		return errors.New("a node's name is empty")
	}
	path, ok := strings.CutPrefix(addr, "unix://")
	if !ok || !filepath.IsAbs(path) {
		return fmt.Errorf("node %q: %q is not a containerd address like %q", node, addr, "unix:///run/containerd/containerd.sock")
	}
	return nil
}

// Configure reads the runtime block and makes the API client. It does
// not contact the cluster.
func (d *Driver) Configure(_ context.Context, req drivers.ConfigureRequest) error {
	if errs := checkRuntime(req); len(errs) > 0 {
		return fmt.Errorf("runtime %q: %w", req.Runtime, errs[0])
	}
	s := settings{runtime: req.Runtime, prefix: defaultPrefix}
	var err error
	str := func(attr string, dst *string) {
		if err != nil {
			return
		}
		var v string
		if v, err = drivers.ConfigString(req.Config, attr); err != nil {
			err = fmt.Errorf("runtime %q: %s: %w", req.Runtime, attr, err)
		} else if v != "" {
			*dst = v
		}
	}
	str(attrKubeconfig, &s.kubeconfig)
	str(attrContext, &s.context)
	str(attrNamespacePrefix, &s.prefix)
	str(attrRegistry, &s.registry)
	str(gateway.AttrBinary, &s.binary)
	str(attrCredentialCAFile, &s.caFile)
	if err != nil {
		return err
	}
	if s.kubeconfig != "" {
		s.kubeconfig = resolvePath(req.Dir, s.kubeconfig)
	}
	if s.caFile != "" {
		s.caFile = resolvePath(req.Dir, s.caFile)
	}
	c := req.Config
	if c != cty.NilVal && !c.IsNull() && c.Type().IsObjectType() {
		if c.Type().HasAttribute(attrNodeContainerd) && !c.GetAttr(attrNodeContainerd).IsNull() {
			if s.containerd, err = drivers.StringMap(c.GetAttr(attrNodeContainerd)); err != nil {
				return fmt.Errorf("runtime %q: %s: %w", req.Runtime, attrNodeContainerd, err)
			}
		}
		if c.Type().HasAttribute(gateway.AttrDNS) {
			if s.dns, err = drivers.Strings(c.GetAttr(gateway.AttrDNS)); err != nil {
				return fmt.Errorf("runtime %q: %s: %w", req.Runtime, gateway.AttrDNS, err)
			}
		}
	}
	rc, err := restConfig(s.kubeconfig, s.context)
	if err != nil {
		return fmt.Errorf("runtime %q: %w", req.Runtime, err)
	}
	cs, err := k8s.NewForConfig(rc)
	if err != nil {
		return fmt.Errorf("runtime %q: making the API client: %w", req.Runtime, err)
	}
	d.set(s, rc, cs)
	d.mu.Lock()
	d.stateDir = req.StateDir
	d.mu.Unlock()
	d.log.Debug("configured", "runtime", req.Runtime, "server", rc.Host, "registry", s.registry)
	return nil
}

// set configures the driver with a client made (Configure) or given (a
// test's fake clientset).
func (d *Driver) set(s settings, rc *rest.Config, cs k8s.Interface) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.configured = true
	d.cfg, d.rest, d.cs = s, rc, cs
	d.gwImage = &gatewayImage{}
	d.facts = &clusterFacts{}
}

// restConfig is the API server's client configuration: from the file
// named, else the usual resolution (KUBECONFIG, then ~/.kube/config),
// with the context named, else the file's current one. It reads files
// only.
// The API client's rate limit, as kubectl's.
const (
	clientQPS   = 50
	clientBurst = 300
)

func restConfig(kubeconfig, kcontext string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	where := "KUBECONFIG or ~/.kube/config"
	if kubeconfig != "" {
		rules.ExplicitPath = kubeconfig
		where = kubeconfig
	}
	overrides := &clientcmd.ConfigOverrides{CurrentContext: kcontext}
	rc, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("reading the kubeconfig (%s): %w", where, err)
	}
	rc.UserAgent = "bottlefile"
	// client-go's own throttle (5 requests a second, bursts of 10) held
	// single requests back by about a second at 5 bottles; kubectl
	// raises it to these.
	rc.QPS, rc.Burst = clientQPS, clientBurst
	return rc, nil
}

// client is the clientset and settings, or an error before Configure.
func (d *Driver) client() (k8s.Interface, settings, error) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	if !d.configured {
		return nil, settings{}, errors.New("kubernetes driver is not configured")
	}
	return d.cs, d.cfg, nil
}

// unreachable classifies an error that says the API server cannot be
// reached at all (a refused or timed-out connection), so the planner
// reports it once for the runtime.
func (d *Driver) unreachable(err error) error {
	if err == nil {
		return nil
	}
	var ue *drivers.UnreachableError
	if errors.As(err, &ue) {
		return err
	}
	msg := err.Error()
	if strings.Contains(msg, "connection refused") || strings.Contains(msg, "no such host") ||
		strings.Contains(msg, "i/o timeout") || strings.Contains(msg, "network is unreachable") {
		d.mu.RLock()
		runtime, host := d.cfg.runtime, ""
		if d.rest != nil {
			host = d.rest.Host
		}
		d.mu.RUnlock()
		return &drivers.UnreachableError{Runtime: runtime, Address: "the API server " + host, Err: err}
	}
	return err
}
