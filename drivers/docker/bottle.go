package docker

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"
	"github.com/zclconf/go-cty/cty"

	"github.com/bottlefile/bottlefile/addrs"
	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/engine"
	"github.com/bottlefile/bottlefile/drivers/gateway"
)

// planBottle adds what makes an agent a bottle to the objects Plan made
// for its network and container: its sidecars and, when the agent has an
// egress block, its egress gateway and the runtime's egress network. Then
// it checks, with one read-only call per driver instance, that the engine
// can isolate bottles at all.
//
// The agent container does not depend on the gateway: the gateway is
// replaced when the bottlefile binary changes, changing the allowlist
// updates it in place, and adding or removing the egress block creates or
// deletes it, and none of these may touch the agent. So the bottle
// reserves the gateway's place whether or not it exists:
//
//   - its name, derived from the lineage and the agent (gatewayName): every
//     agent and sidecar gets the proxy settings pointing at that name from
//     its first create (wireContainer), gateway or not;
//   - its address, the highest of the bottle's /28 (lastAddr): the engine
//     hands addresses out from the bottom, lowest free first (checked on
//     20.10: re-creating a container gets the same low address again), and
//     the sidecar limit below keeps the agent and its sidecars under it.
//
// Neither is an attribute of the agent's container, so its configuration
// hash is the same with or without a gateway.
//
// A bottle without an egress block has no gateway: its network is
// internal and gives no host address (createNetwork), so the agent reaches
// nothing outside the bottle, and its proxy name does not resolve.
//
// State made before gateways became optional records a gateway for every
// agent. For an agent without an egress block the next plan shows that
// gateway (and the egress network, once no gateway uses it) as destroyed,
// once: no attribute of the agent, its sidecars or its network changes, so
// nothing else is replaced, and the plan after it says "No changes.".
func (d *Driver) planBottle(ctx context.Context, a drivers.AgentSpec, addr, netAddr string, objects []drivers.Object) ([]drivers.Object, error) {
	// A /28 has 13 addresses for containers: the gateway takes one, the
	// agent another.
	if max := (1<<(32-subnetBits) - 3) - 2; len(a.Sidecars) > max {
		return nil, fmt.Errorf("%s: %d sidecars do not fit in the bottle's /%d network: it holds the agent, its gateway and at most %d sidecars", addr, len(a.Sidecars), subnetBits, max)
	}
	var names []string
	for _, sc := range a.Sidecars {
		names = append(names, sc.Name)
	}
	for i, sc := range a.Sidecars {
		objs, err := d.planSidecar(a, sc, addr, netAddr, names)
		if err != nil {
			scAddr := sc.Addr
			if scAddr == "" {
				scAddr = fmt.Sprintf("%s.sidecar[%d]", addr, i)
			}
			return nil, fmt.Errorf("%s: %w", scAddr, err)
		}
		objects = append(objects, objs...)
	}
	if len(names) > 0 {
		for _, o := range objects {
			if o.Addr == addr {
				o.Attrs["sidecars"] = sidecarsValue(names)
			}
		}
	}

	if drivers.HasEgressBlock(a.Workload) {
		egressNet, err := d.planEgressNetwork()
		if err != nil {
			return nil, fmt.Errorf("%s: egress network: %w", addr, err)
		}
		gw, err := d.planGateway(a, addr, netAddr, egressNet, names)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", addr, err)
		}
		if egressNet != nil {
			objects = append(objects, *egressNet)
		}
		objects = append(objects, gw)
	}

	api, _, err := d.engine(ctx)
	if err != nil {
		return nil, err
	}
	if err := d.checkIsolation(ctx, api); err != nil {
		return nil, err
	}
	return objects, nil
}

func sidecarsValue(names []string) cty.Value {
	vals := make([]cty.Value, len(names))
	for i, n := range names {
		vals[i] = cty.StringVal(n)
	}
	return cty.ListVal(vals)
}

// planSidecar expands one sidecar: a container on the bottle network with
// the network alias of its name, and its image when it is built.
func (d *Driver) planSidecar(a drivers.AgentSpec, sc drivers.SidecarSpec, agentAddr, netAddr string, names []string) ([]drivers.Object, error) {
	addr := sc.Addr
	if addr == "" {
		addr = addrs.SidecarOf(agentAddr, sc.Name)
	}
	switch {
	case sc.Name == "" || !engine.NamePart.MatchString(sc.Name):
		return nil, fmt.Errorf("the sidecar name %q cannot be a network alias (use letters, digits, '_', '.', '-')", sc.Name)
	case strings.EqualFold(sc.Name, gateway.Alias):
		return nil, fmt.Errorf("a sidecar cannot be named %q: that name is the bottle's egress gateway", sc.Name)
	case strings.EqualFold(sc.Name, "localhost"):
		return nil, fmt.Errorf("a sidecar cannot be named %q", sc.Name)
	}
	if err := gateway.CheckSidecarEgress(drivers.WorkloadAttr(a.Workload, "egress"), drivers.WorkloadAttr(sc.Workload, "egress")); err != nil {
		return nil, err
	}
	if !drivers.WorkloadAttr(sc.Workload, "credentials").IsNull() {
		return nil, errors.New("credential blocks go in the agent's egress block: on the docker driver a bottle has one gateway, which injects them for the agent")
	}
	objects, err := d.planWorkload(addr, netAddr, sc.Workload)
	if err != nil {
		return nil, err
	}
	ctr := &objects[len(objects)-1]
	ctr.Attrs["alias"] = cty.StringVal(sc.Name)
	ctr.Attrs["sidecars"] = sidecarsValue(names)
	return objects, nil
}

// wireContainer adds to an agent's or a sidecar's container what its
// bottle gives it, at create time (the object's attributes stay what the
// configuration says): the proxy settings pointing at the bottle's
// gateway, the sidecar's network alias, and no CAP_NET_RAW (no raw packets
// on the bottle network: no spoofing the gateway, no hand-made frames to
// the host's bridge; a ping that uses ICMP datagram sockets, as iputils'
// does, still works, busybox's does not).
//
// A variable the configuration sets itself is left as configured.
func wireContainer(req drivers.ApplyRequest, netName string, cfg *container.Config, hostCfg *container.HostConfig, netCfg *network.NetworkingConfig) error {
	o := req.Object
	agent := gateway.AgentOf(o.Addr)
	gw, err := gatewayName(req.Lineage, req.NamedAddr(agent))
	if err != nil {
		return err
	}
	sidecars, err := drivers.Strings(o.Attr("sidecars"))
	if err != nil {
		return fmt.Errorf("sidecars: %w", err)
	}
	alias, err := drivers.String(o.Attr("alias"))
	if err != nil {
		return fmt.Errorf("alias: %w", err)
	}
	set := map[string]bool{}
	for _, kv := range cfg.Env {
		k, _, _ := strings.Cut(kv, "=")
		set[k] = true
	}
	proxy := fmt.Sprintf("http://%s:%d", gw, gateway.Port)
	noProxy := strings.Join(append([]string{"localhost", "127.0.0.1"}, sidecars...), ",")
	for _, k := range gateway.ProxyVars {
		if !set[k] {
			cfg.Env = append(cfg.Env, k+"="+proxy)
		}
	}
	for _, k := range gateway.NoProxyVars {
		if !set[k] {
			cfg.Env = append(cfg.Env, k+"="+noProxy)
		}
	}
	if alias != "" {
		if ep := netCfg.EndpointsConfig[netName]; ep != nil {
			ep.Aliases = append(ep.Aliases, alias)
		}
	}
	hostCfg.CapDrop = append(hostCfg.CapDrop, "NET_RAW")
	return nil
}
