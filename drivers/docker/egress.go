package docker

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/network"
	"github.com/hashicorp/hcl/v2/hcldec"
	"github.com/zclconf/go-cty/cty"

	"github.com/bottlefile/bottlefile/addrs"
	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/engine"
)

// DefaultEgressSubnetPool is where a runtime's bottlefile-managed egress
// network gets its subnet when the runtime block sets no
// egress_subnet_pool: 256 egress networks (one per state and runtime).
const DefaultEgressSubnetPool = "10.214.0.0/16"

// egressBits is the prefix length of a managed egress network: 253
// gateways, one per agent of the runtime.
const egressBits = 24

// egressConfig is what a runtime block says about egress.
type egressConfig struct {
	// network is an existing network the gateways use to reach the
	// outside (egress_network); "" means a bottlefile-managed one.
	network string
	// pool is where a managed egress network's /24 is allocated.
	pool netip.Prefix
	// binary is the gateway binary (gateway_binary); "" means the running
	// bottlefile.
	binary string
	// dns are the DNS servers the gateways resolve with (gateway_dns);
	// nil means the engine's default.
	dns []string
	// credentialCAFile (credential_ca_file) holds CA certificates the
	// gateways trust, besides the host's, for the destinations they
	// inject credentials into; "" for none.
	credentialCAFile string
	// skipIsolationCheck (insecure_skip_isolation_check) plans bottles on
	// an engine that cannot isolate them: for throwaway test engines only.
	skipIsolationCheck bool
}

// egressSpec is the runtime block's egress attributes, but the gateways'
// own (gateway.RuntimeSpec).
func egressSpec() hcldec.ObjectSpec {
	return hcldec.ObjectSpec{
		"egress_network":                &hcldec.AttrSpec{Name: "egress_network", Type: cty.String},
		"egress_subnet_pool":            &hcldec.AttrSpec{Name: "egress_subnet_pool", Type: cty.String},
		"credential_ca_file":            &hcldec.AttrSpec{Name: "credential_ca_file", Type: cty.String},
		"insecure_skip_isolation_check": &hcldec.AttrSpec{Name: "insecure_skip_isolation_check", Type: cty.Bool},
	}
}

// parseEgressConfig reads the egress attributes of a decoded runtime block.
func parseEgressConfig(cfg cty.Value) (egressConfig, error) {
	var ec egressConfig
	var err error
	if ec.network, err = drivers.ConfigString(cfg, "egress_network"); err != nil {
		return ec, fmt.Errorf("egress_network: %w", err)
	}
	if ec.network != "" && !engine.NamePart.MatchString(ec.network) {
		return ec, fmt.Errorf("egress_network %q is not a docker network name", ec.network)
	}
	pool, err := drivers.ConfigString(cfg, "egress_subnet_pool")
	if err != nil {
		return ec, fmt.Errorf("egress_subnet_pool: %w", err)
	}
	if pool == "" {
		pool = DefaultEgressSubnetPool
	}
	if ec.pool, err = parsePool("egress_subnet_pool", pool, egressBits); err != nil {
		return ec, err
	}
	if ec.binary, err = drivers.ConfigString(cfg, "gateway_binary"); err != nil {
		return ec, fmt.Errorf("gateway_binary: %w", err)
	}
	if ec.credentialCAFile, err = drivers.ConfigString(cfg, "credential_ca_file"); err != nil {
		return ec, fmt.Errorf("credential_ca_file: %w", err)
	}
	if v := configAttr(cfg, "insecure_skip_isolation_check"); !v.IsNull() {
		if !v.IsKnown() || v.Type() != cty.Bool {
			return ec, fmt.Errorf("insecure_skip_isolation_check: want true or false")
		}
		ec.skipIsolationCheck = v.True()
	}
	if cfg != cty.NilVal && !cfg.IsNull() && cfg.IsKnown() && cfg.Type().IsObjectType() && cfg.Type().HasAttribute("gateway_dns") {
		dns, err := drivers.Strings(cfg.GetAttr("gateway_dns"))
		if err != nil {
			return ec, fmt.Errorf("gateway_dns: %w", err)
		}
		for _, s := range dns {
			if _, err := netip.ParseAddr(s); err != nil {
				return ec, fmt.Errorf("gateway_dns: %q is not an IP address", s)
			}
		}
		ec.dns = dns
	}
	return ec, nil
}

// configAttr is an attribute of a decoded runtime block, unmarked, or a
// null when the block or the attribute is missing.
func configAttr(cfg cty.Value, name string) cty.Value {
	if cfg == cty.NilVal || cfg.IsNull() || !cfg.IsKnown() || !cfg.Type().IsObjectType() || !cfg.Type().HasAttribute(name) {
		return cty.NullVal(cty.DynamicPseudoType)
	}
	v, _ := cfg.GetAttr(name).UnmarkDeep()
	return v
}

// parsePool checks an IPv4 pool that holds at least one block of bits.
func parsePool(attr, s string, bits int) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%s %q is not a CIDR block: %w", attr, s, err)
	}
	if !p.Addr().Is4() {
		return netip.Prefix{}, fmt.Errorf("%s %q must be an IPv4 block", attr, s)
	}
	if p.Bits() > bits {
		return netip.Prefix{}, fmt.Errorf("%s %q is smaller than one /%d network; use a /%d or larger block", attr, s, bits, bits)
	}
	if p.Masked() != p {
		return netip.Prefix{}, fmt.Errorf("%s %q has host bits set; did you mean %q?", attr, s, p.Masked().String())
	}
	return p, nil
}

// egressConf returns the runtime's egress settings and its name.
func (d *Driver) egressConf() (egressConfig, string) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return d.egress, d.runtime
}

// egressNetworkAddr is the address of a runtime's managed egress network.
// Every agent of the runtime plans the same object; the planner keeps one.
func egressNetworkAddr(runtime string) string {
	return addrs.Runtime(runtime).Egress().String()
}

// isEgressNetworkAddr reports whether addr names a managed egress network.
func isEgressNetworkAddr(addr string) bool {
	a, err := addrs.Parse(addr)
	return err == nil && a.Kind() == addrs.EgressNetworkKind
}

// egressNetworkName is the engine name of a managed egress network:
// bf-<lineage[:8]>-<runtime>.egress. The dot keeps it apart from every
// agent network name, which has none.
func egressNetworkName(lineage, addr string) (string, error) {
	prefix := drivers.LineagePrefix(lineage)
	if prefix == "" {
		return "", fmt.Errorf("no lineage to name %s by", addr)
	}
	a, err := addrs.Parse(addr)
	if err != nil || a.Kind() != addrs.EgressNetworkKind {
		return "", fmt.Errorf("address %q is not a runtime's egress network", addr)
	}
	rt := a.Name()
	if !engine.NamePart.MatchString(rt) {
		return "", fmt.Errorf("runtime name %q cannot name a docker network", rt)
	}
	return "bf-" + prefix + "-" + rt + ".egress", nil
}

// planEgressNetwork is the managed egress network object, or nil when the
// runtime uses an existing network.
func (d *Driver) planEgressNetwork() (*drivers.Object, error) {
	ec, rt := d.egressConf()
	if ec.network != "" {
		return nil, nil
	}
	addr := egressNetworkAddr(rt)
	if _, err := egressNetworkName("x", addr); err != nil {
		return nil, err
	}
	return &drivers.Object{
		Addr: addr,
		Kind: kindNetwork,
		Attrs: map[string]cty.Value{
			"internal":    cty.False,
			"subnet_pool": cty.StringVal(ec.pool.String()),
		},
	}, nil
}

// createEgressNetwork makes a runtime's egress network: a normal bridge
// (the gateways reach the outside through it) with an explicit /24 from
// egress_subnet_pool. One of this lineage made for this address is
// adopted.
func (d *Driver) createEgressNetwork(ctx context.Context, api dockerAPI, req drivers.ApplyRequest) (drivers.ApplyResponse, error) {
	addr := req.Object.Addr
	name, err := egressNetworkName(req.Lineage, req.NamedAddr(addr))
	if err != nil {
		return drivers.ApplyResponse{}, fmt.Errorf("creating network for %s: %w", addr, err)
	}
	fail := func(format string, args ...any) (drivers.ApplyResponse, error) {
		return drivers.ApplyResponse{}, fmt.Errorf("creating network %s for %s: %s", name, addr, fmt.Sprintf(format, args...))
	}
	poolStr, err := drivers.String(req.Object.Attr("subnet_pool"))
	if err != nil {
		return fail("subnet_pool: %v", err)
	}
	if poolStr == "" {
		poolStr = DefaultEgressSubnetPool
	}
	pool, err := parsePool("subnet_pool", poolStr, egressBits)
	if err != nil {
		return fail("%v", err)
	}

	// Gateways come next: the engine host's addresses they are forbidden
	// are learned meanwhile (a cached answer, or the probe's container).
	d.prefetchEngineHost(ctx, api, req.Lineage)
	var refused []netip.Prefix
	for attempt := 1; attempt <= maxNetworkAttempts; attempt++ {
		nets, subnet, err := claims.claim(ctx, api, name, pool, egressBits, refused, "egress_subnet_pool", false)
		if err != nil {
			return fail("%v", err)
		}
		if _, ok := findNetwork(nets, name); ok {
			old, err := d.oneEgressNetwork(ctx, api, nets, name, req.Lineage, addr, req.NamedAddr(addr))
			if err != nil {
				return fail("%v", err)
			}
			subnet := ""
			if len(old.IPAM.Config) > 0 {
				subnet = old.IPAM.Config[0].Subnet
			}
			d.log.Info("adopting unrecorded egress network of this lineage", "addr", addr, "name", name, "id", shortID(old.ID))
			return drivers.ApplyResponse{ID: old.ID, Computed: map[string]string{"subnet": subnet, "name": name}}, nil
		}
		resp, err := api.NetworkCreate(ctx, name, network.CreateOptions{
			Driver: "bridge",
			IPAM: &network.IPAM{
				Driver: "default",
				Config: []network.IPAMConfig{{Subnet: subnet.String()}},
			},
			Labels: req.Labels(),
		})
		claims.release(api, subnet, err == nil)
		if err != nil {
			if isOverlap(err) {
				refused = append(refused, subnet)
				continue
			}
			if nameInUse(err) || strings.Contains(err.Error(), "already exists") {
				continue // a killed apply's create landed after the list: the next round adopts it
			}
			return fail("subnet %s: %v", subnet, err)
		}
		d.log.Info("created egress network", "addr", addr, "name", name, "id", shortID(resp.ID), "subnet", subnet.String())
		// The engine's duplicate-name check is not atomic: a create sent by
		// an apply killed a moment ago can land beside this one. Keep one.
		if nets, err := api.NetworkList(ctx, network.ListOptions{}); err == nil {
			if kept, err := d.oneEgressNetwork(ctx, api, nets, name, req.Lineage, addr, req.NamedAddr(addr)); err == nil && kept.ID != resp.ID {
				s := ""
				if len(kept.IPAM.Config) > 0 {
					s = kept.IPAM.Config[0].Subnet
				}
				return drivers.ApplyResponse{ID: kept.ID, Computed: map[string]string{"subnet": s, "name": name}}, nil
			}
		}
		return drivers.ApplyResponse{ID: resp.ID, Computed: map[string]string{"subnet": subnet.String(), "name": name}}, nil
	}
	return fail("gave up after %d attempts: other processes kept taking the free subnets of %s", maxNetworkAttempts, pool)
}

// oneEgressNetwork returns the network named name, which must be this
// lineage's for addr, or for one of also (the address it was made for,
// when its runtime was renamed since: labels cannot change). When several carry the name (the engine lets two
// concurrent creates through), it keeps the one created first and removes
// the others, which are this lineage's too.
func (d *Driver) oneEgressNetwork(ctx context.Context, api dockerAPI, nets []network.Summary, name, lineage, addr string, also ...string) (network.Summary, error) {
	var same []network.Summary
	for _, n := range nets {
		if n.Name != name {
			continue
		}
		if n.Labels[drivers.LabelLineage] != lineage || (n.Labels[drivers.LabelAddress] != addr && !slices.Contains(also, n.Labels[drivers.LabelAddress])) {
			return network.Summary{}, fmt.Errorf("a network named %s already exists and does not belong to this state (lineage %s); remove or rename it", name, lineage)
		}
		same = append(same, n)
	}
	if len(same) == 0 {
		return network.Summary{}, fmt.Errorf("no network named %s", name)
	}
	sort.Slice(same, func(i, j int) bool {
		if !same[i].Created.Equal(same[j].Created) {
			return same[i].Created.Before(same[j].Created)
		}
		return same[i].ID < same[j].ID
	})
	for _, extra := range same[1:] {
		d.log.Info("removing a duplicate egress network of this lineage", "addr", addr, "name", name, "id", shortID(extra.ID))
		if err := api.NetworkRemove(ctx, extra.ID); err != nil && !cerrdefs.IsNotFound(err) {
			d.log.Warn("could not remove a duplicate egress network", "id", shortID(extra.ID), "error", err)
		}
	}
	return same[0], nil
}

// deleteEgressNetwork removes a managed egress network. Gateways being
// removed at the same time (an interrupted apply leaves them unrecorded,
// so nothing orders them) may still hold endpoints for a moment: it waits
// a little for them to go.
func (d *Driver) deleteEgressNetwork(ctx context.Context, api dockerAPI, req drivers.ApplyRequest) (drivers.ApplyResponse, error) {
	addr := req.Object.Addr
	id := req.ID
	if id == "" {
		name, err := egressNetworkName(req.Lineage, req.NamedAddr(addr))
		if err != nil {
			return drivers.ApplyResponse{}, fmt.Errorf("deleting network of %s: %w", addr, err)
		}
		id = name
	}
	switch err := removeNetwork(ctx, api, id, 15*time.Second); {
	case err == nil:
		d.log.Info("deleted egress network", "addr", addr, "id", shortID(id))
		return drivers.ApplyResponse{}, nil
	case cerrdefs.IsNotFound(err):
		return drivers.ApplyResponse{}, nil
	default:
		return drivers.ApplyResponse{}, fmt.Errorf("deleting network %s of %s: %w", shortID(id), addr, err)
	}
}
