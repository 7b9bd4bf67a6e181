package swarm

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/netip"
	"slices"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/swarm"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/gateway"
	"github.com/bottlefile/bottlefile/egress"
)

// gatewayReady bounds how long create and update wait for a new gateway
// task to report that it listens with its rules.
const gatewayReady = 30 * time.Second

// gatewaySpec is a gateway object's attributes, decoded.
type gatewaySpec struct {
	name          string
	agent         string
	allow         []string
	sidecars      []string
	version       string
	network       string // the bottle network's name
	egressNetwork string
	dns           []string
	placement     []string
	ceiling       []string // nil for none
}

func decodeGateway(req drivers.ApplyRequest) (gatewaySpec, error) {
	a, err := gateway.DecodeAttrs(req.Object)
	if err != nil {
		return gatewaySpec{}, err
	}
	s := gatewaySpec{agent: a.Agent, allow: a.Allow, sidecars: a.Sidecars, version: a.Version, dns: a.DNS, ceiling: a.Ceiling}
	if s.name, err = serviceName(req.Lineage, req.NamedAddr(req.Object.Addr)); err != nil {
		return s, err
	}
	if s.network, err = networkName(req.Lineage, req.NamedAddr(a.Network)); err != nil {
		return s, fmt.Errorf("network: %w", err)
	}
	s.egressNetwork = a.EgressNetwork
	if isEgressNetworkAddr(a.EgressNetwork) {
		if s.egressNetwork, err = networkName(req.Lineage, req.NamedAddr(a.EgressNetwork)); err != nil {
			return s, fmt.Errorf("egress_network: %w", err)
		}
	}
	if s.placement, err = drivers.Strings(req.Object.Attr("placement")); err != nil {
		return s, fmt.Errorf("placement: %w", err)
	}
	return s, nil
}

// createGateway makes a bottle's gateway service: its rules and forbidden
// prefixes as configs, the gateway image where every node can run it, a
// service on the bottle's network (alias "gateway") and the egress
// network, listening only on its address in the bottle's subnet. It waits
// until the task runs and reports its rules in force.
func (d *Driver) createGateway(ctx context.Context, api swarmAPI, req drivers.ApplyRequest) (drivers.ApplyResponse, error) {
	addr := req.Object.Addr
	s, err := decodeGateway(req)
	if err != nil {
		return drivers.ApplyResponse{}, fmt.Errorf("creating gateway for %s: %w", addr, err)
	}
	fail := func(format string, args ...any) (drivers.ApplyResponse, error) {
		return drivers.ApplyResponse{}, fmt.Errorf("creating gateway %s for %s: %s", s.name, addr, fmt.Sprintf(format, args...))
	}
	ref, version, err := d.gatewayRef(ctx, api)
	if err != nil {
		return fail("%v", err)
	}
	if s.version != "" && s.version != version {
		return fail("the gateway binary changed since the plan (now %s, planned %s); plan again", version, s.version)
	}
	bottle, err := api.NetworkInspect(ctx, s.network, network.InspectOptions{})
	if err != nil {
		return fail("its bottle network %s: %v", s.network, err)
	}
	subnet := ""
	for _, c := range bottle.IPAM.Config {
		if p, err := netip.ParsePrefix(c.Subnet); err == nil && p.Addr().Is4() {
			subnet = p.Masked().String()
		}
	}
	if subnet == "" {
		return fail("its bottle network %s has no IPv4 subnet", s.network)
	}
	forbid, err := d.gatewayForbid(ctx, api, s.allow)
	if err != nil {
		return fail("%v", err)
	}
	configs, err := d.gatewayConfigs(ctx, api, req, s, forbid)
	if err != nil {
		return fail("%v", err)
	}
	// A gateway that fails to be made takes its configs with it: no
	// record names them.
	made := false
	defer func() {
		if !made {
			d.dropConfigs(ctx, api, addr, configs)
		}
	}()
	if err := d.removeStale(ctx, api, req.Lineage, addr, s.name); err != nil {
		return fail("%v", err)
	}

	labels := req.Labels()
	labels[labelKind] = kindGateway
	spec := serviceBase(s.name, labels, s.placement)
	spec.TaskTemplate.RestartPolicy.Condition = swarm.RestartPolicyConditionAny
	// A new allowlist starts the new task before the old one stops: the
	// agent's proxy name resolves to one of them throughout.
	spec.UpdateConfig = &swarm.UpdateConfig{Parallelism: 1, Order: swarm.UpdateOrderStartFirst, Monitor: 100 * time.Millisecond}
	cs := spec.TaskTemplate.ContainerSpec
	cs.Image = ref
	cs.Args = []string{"gateway",
		"-listen", fmt.Sprintf(":%d", gateway.Port), "-listen-in", subnet,
		"-rules", gateway.RulesDir + "/" + gateway.RulesFile,
		"-forbid-file", gateway.RulesDir + "/" + gateway.ForbidFile,
		// The time of its last proxy request, which Activity stats.
		"-activity", gateway.ActivityPath}
	// The ceiling in the service's arguments: a task's files cannot
	// widen it.
	cs.Args = append(cs.Args, gateway.CeilingArgs(s.ceiling)...)
	cs.User = gateway.User
	cs.Env = []string{fmt.Sprintf("GOMEMLIMIT=%dMiB", gateway.Memory*5/8>>20)}
	cs.CapabilityDrop = []string{"ALL"}
	cs.Configs = configs
	if len(s.dns) > 0 {
		cs.DNSConfig = &swarm.DNSConfig{Nameservers: s.dns}
	}
	spec.TaskTemplate.Resources = &swarm.ResourceRequirements{Limits: &swarm.Limit{
		NanoCPUs: gateway.CPUs, MemoryBytes: gateway.Memory, Pids: gateway.Pids,
	}}
	spec.TaskTemplate.Networks = []swarm.NetworkAttachmentConfig{
		{Target: s.network, Aliases: []string{gateway.Alias}},
		{Target: s.egressNetwork},
	}
	cs.Image = tagged(cs.Image)
	fingerprint(&spec)
	created, err := api.ServiceCreate(ctx, spec, swarm.ServiceCreateOptions{})
	if err != nil {
		return fail("%v", err)
	}
	t, err := d.waitGateway(ctx, api, created.ID, s, ref, configs, nil)
	if err != nil {
		if rmErr := api.ServiceRemove(context.WithoutCancel(ctx), created.ID); rmErr != nil && !cerrdefs.IsNotFound(rmErr) {
			d.log.Warn("could not remove the gateway that did not start", "addr", addr, "id", shortID(created.ID), "error", rmErr)
		}
		return fail("%v", err)
	}
	d.log.Info("created gateway", "addr", addr, "name", s.name, "id", shortID(created.ID), "allow", len(s.allow), "forbid", len(forbid))
	resp, err := d.serviceResponse(ctx, api, created.ID, s.name, t)
	if err != nil {
		return resp, err
	}
	resp.Computed["proxy"] = fmt.Sprintf("http://%s:%d", s.name, gateway.Port)
	made = true
	return resp, nil
}

// dropConfigs removes configs a gateway that failed to be made was to
// read, once no task of a service uses them (the cluster refuses to
// remove a config in use): bounded, and only logged.
func (d *Driver) dropConfigs(ctx context.Context, api swarmAPI, addr string, configs []*swarm.ConfigReference) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), tasksGone)
	defer cancel()
	for _, c := range configs {
		for {
			err := api.ConfigRemove(ctx, c.ConfigID)
			if err == nil || cerrdefs.IsNotFound(err) {
				break
			}
			if ctx.Err() != nil || !strings.Contains(err.Error(), "in use") {
				d.log.Warn("could not remove a config of a gateway that failed to be made", "addr", addr, "config", c.ConfigName, "error", err)
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
}

// waitGateway waits until the gateway's task that reads configs runs, then
// reads its log until it listens with the rules s.allow in force.
func (d *Driver) waitGateway(ctx context.Context, api swarmAPI, id string, s gatewaySpec, ref string, configs []*swarm.ConfigReference, before map[string]bool) (swarm.Task, error) {
	want := map[string]bool{}
	for _, c := range configs {
		want[c.ConfigID] = true
	}
	t, err := d.waitRunning(ctx, api, id, s.placement, ref, before, func(t swarm.Task) bool {
		if t.Spec.ContainerSpec == nil || len(t.Spec.ContainerSpec.Configs) != len(want) {
			return false
		}
		for _, c := range t.Spec.ContainerSpec.Configs {
			if !want[c.ConfigID] {
				return false
			}
		}
		return true
	})
	if err != nil {
		return t, err
	}
	lctx, cancel := context.WithTimeout(ctx, gatewayReady)
	defer cancel()
	rc, err := api.TaskLogs(lctx, t.ID, container.LogsOptions{ShowStderr: true, Follow: true})
	if err != nil {
		return t, fmt.Errorf("reading its log: %w", err)
	}
	defer rc.Close()
	pr, pw := io.Pipe()
	go func() {
		_, err := stdcopy.StdCopy(io.Discard, pw, rc)
		pw.CloseWithError(err)
	}()
	defer pr.Close()
	if _, err := gateway.Wait(pr, s.allow); err != nil {
		if lctx.Err() != nil && ctx.Err() == nil {
			return t, fmt.Errorf("the gateway did not report its rules in force within %v: %w", gatewayReady, err)
		}
		return t, err
	}
	return t, nil
}

// waitStopped waits until none of the tasks in ids runs.
func waitStopped(ctx context.Context, api swarmAPI, service string, ids map[string]bool) error {
	deadline := time.Now().Add(gatewayReady)
	for {
		tasks, err := api.TaskList(ctx, swarm.TaskListOptions{Filters: filters.NewArgs(filters.Arg("service", service))})
		if err != nil {
			return err
		}
		if !slices.ContainsFunc(tasks, func(t swarm.Task) bool { return ids[t.ID] && t.Status.State == swarm.TaskStateRunning }) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("still running after %v", gatewayReady)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// gatewayConfigs makes the configs a gateway task reads: its rules file
// and its forbid file, named by their content, so that a gateway made
// again with the same rules (a retry) uses the same ones.
func (d *Driver) gatewayConfigs(ctx context.Context, api swarmAPI, req drivers.ApplyRequest, s gatewaySpec, forbid []netip.Prefix) ([]*swarm.ConfigReference, error) {
	rdata, err := gateway.RulesData(s.agent, s.allow, s.sidecars)
	if err != nil {
		return nil, fmt.Errorf("rules: %w", err)
	}
	fdata, err := gateway.ForbidData(forbid)
	if err != nil {
		return nil, err
	}
	labels := req.Labels()
	labels[labelKind] = kindGatewayConfig
	var out []*swarm.ConfigReference
	for _, f := range []struct {
		file string
		data []byte
	}{{gateway.RulesFile, rdata}, {gateway.ForbidFile, fdata}} {
		sum := sha256.Sum256(f.data)
		name := s.name + "-" + strings.TrimSuffix(f.file, ".json") + "-" + hex.EncodeToString(sum[:6])
		id, err := ensureConfig(ctx, api, name, f.data, labels)
		if err != nil {
			return nil, err
		}
		out = append(out, &swarm.ConfigReference{
			ConfigID: id, ConfigName: name,
			File: &swarm.ConfigReferenceFileTarget{Name: gateway.RulesDir + "/" + f.file, UID: "0", GID: "0", Mode: 0o444},
		})
	}
	return out, nil
}

// ensureConfig makes a config, or finds the one of that name (configs
// are immutable: the name holds a hash of the content).
func ensureConfig(ctx context.Context, api swarmAPI, name string, data []byte, labels map[string]string) (string, error) {
	resp, err := api.ConfigCreate(ctx, swarm.ConfigSpec{Annotations: swarm.Annotations{Name: name, Labels: labels}, Data: data})
	if err == nil {
		return resp.ID, nil
	}
	if !cerrdefs.IsConflict(err) && !strings.Contains(err.Error(), "already exists") {
		return "", fmt.Errorf("creating config %s: %w", name, err)
	}
	list, lerr := api.ConfigList(ctx, swarm.ConfigListOptions{Filters: filters.NewArgs(filters.Arg("name", name))})
	if lerr != nil {
		return "", fmt.Errorf("creating config %s: %w", name, lerr)
	}
	for _, c := range list {
		if c.Spec.Name == name && c.Spec.Labels[drivers.LabelLineage] == labels[drivers.LabelLineage] {
			return c.ID, nil
		}
	}
	return "", fmt.Errorf("creating config %s: %w", name, err)
}

// updateGateway gives the gateway a new allowlist: new configs, and the
// service updated to read them, which starts a new gateway task (the
// cluster has no way to change a running task's files). The agent is not
// touched: it reaches the new task by the same name. The configs no
// longer read go.
func (d *Driver) updateGateway(ctx context.Context, api swarmAPI, req drivers.ApplyRequest) (drivers.ApplyResponse, error) {
	addr := req.Object.Addr
	s, err := decodeGateway(req)
	if err != nil {
		return drivers.ApplyResponse{}, fmt.Errorf("updating gateway of %s: %w", addr, err)
	}
	ref := req.ID
	if ref == "" {
		ref = s.name
	}
	fail := func(format string, args ...any) (drivers.ApplyResponse, error) {
		return drivers.ApplyResponse{}, fmt.Errorf("updating gateway %s of %s: %s", s.name, addr, fmt.Sprintf(format, args...))
	}
	svc, _, err := api.ServiceInspectWithRaw(ctx, ref, swarm.ServiceInspectOptions{})
	if err != nil {
		return fail("%v", err)
	}
	forbid, err := d.gatewayForbid(ctx, api, s.allow)
	if err != nil {
		return fail("%v", err)
	}
	configs, err := d.gatewayConfigs(ctx, api, req, s, forbid)
	if err != nil {
		return fail("%v", err)
	}
	before, err := taskIDs(ctx, api, svc.ID)
	if err != nil {
		return fail("%v", err)
	}
	svc, err = updateService(ctx, api, svc.ID, func(spec *swarm.ServiceSpec) {
		spec.TaskTemplate.ContainerSpec.Configs = configs
		spec.TaskTemplate.ForceUpdate++ // a new task even when the files are the same
	})
	if err != nil {
		return fail("%v", err)
	}
	spec := svc.Spec
	t, err := d.waitGateway(ctx, api, svc.ID, s, spec.TaskTemplate.ContainerSpec.Image, configs, before)
	if err != nil {
		return fail("%v", err)
	}
	// Until the old task is gone, the proxy name may still lead to it and
	// its old allowlist.
	if err := waitStopped(ctx, api, svc.ID, before); err != nil {
		return fail("the gateway's old task: %v", err)
	}
	d.removeConfigs(ctx, api, req.Lineage, addr, configs)
	d.log.Info("updated gateway allowlist", "addr", addr, "id", shortID(svc.ID), "allow", len(s.allow))
	resp, err := d.serviceResponse(ctx, api, svc.ID, s.name, t)
	if err != nil {
		return resp, err
	}
	resp.Computed["proxy"] = fmt.Sprintf("http://%s:%d", s.name, gateway.Port)
	resp.Notes = append(resp.Notes, "the gateway's task was replaced to read the new allowlist; the agent was not touched")
	return resp, nil
}

// deleteGateway removes the gateway's service, then its configs.
func (d *Driver) deleteGateway(ctx context.Context, api swarmAPI, req drivers.ApplyRequest) (drivers.ApplyResponse, error) {
	resp, err := d.deleteService(ctx, api, req)
	if err != nil {
		return resp, err
	}
	d.removeConfigs(ctx, api, req.Lineage, req.Object.Addr, nil)
	return resp, nil
}

// removeConfigs removes the gateway configs of addr but those kept.
// Failures are logged: a config left is listed by the lineage label.
func (d *Driver) removeConfigs(ctx context.Context, api swarmAPI, lineage, addr string, keep []*swarm.ConfigReference) {
	f := byLineage(lineage)
	f.Add("label", drivers.LabelAddress+"="+addr)
	list, err := api.ConfigList(ctx, swarm.ConfigListOptions{Filters: f})
	if err != nil {
		d.log.Warn("listing a gateway's configs", "addr", addr, "error", err)
		return
	}
	for _, c := range list {
		if slices.ContainsFunc(keep, func(k *swarm.ConfigReference) bool { return k.ConfigID == c.ID }) {
			continue
		}
		if err := api.ConfigRemove(ctx, c.ID); err != nil && !cerrdefs.IsNotFound(err) {
			d.log.Warn("could not remove a gateway config", "addr", addr, "config", c.Spec.Name, "error", err)
		}
	}
}

// gatewayForbid is what a gateway never connects to, besides what the
// egress package refuses itself (loopback, link-local, its own addresses
// and its default gateway, its node):
//
//   - the swarm's default address pools, from which every overlay takes
//     its subnet: every bottle's network, on any node, and every other
//     gateway on the egress network;
//   - every node's address (with the swarm's ports, 2377, 7946 and 4789,
//     and whatever else the nodes serve);
//   - the subnets of the manager's local networks (docker_gwbridge,
//     through which gateways reach the outside, among them);
//   - the registry's addresses, unless a rule names the registry's host.
func (d *Driver) gatewayForbid(ctx context.Context, api swarmAPI, allow []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	add := func(s string) {
		if p, err := netip.ParsePrefix(s); err == nil {
			out = append(out, p.Masked())
		} else if a, err := netip.ParseAddr(s); err == nil {
			out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
		}
	}
	info, err := api.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the swarm's address pools: %w", err)
	}
	pools := info.Swarm.Cluster
	if pools != nil {
		for _, p := range pools.DefaultAddrPool {
			add(p)
		}
	}
	if pools == nil || len(pools.DefaultAddrPool) == 0 {
		add("10.0.0.0/8") // swarm's default pool
	}
	nodes, err := api.NodeList(ctx, swarm.NodeListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing the nodes: %w", err)
	}
	for _, n := range nodes {
		add(n.Status.Addr)
		if n.ManagerStatus != nil {
			if host, _, err := net.SplitHostPort(n.ManagerStatus.Addr); err == nil {
				add(host)
			}
		}
	}
	nets, err := api.NetworkList(ctx, network.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing networks: %w", err)
	}
	for _, n := range nets {
		if n.Scope == "swarm" || n.Driver == "host" || n.Driver == "null" {
			continue
		}
		for _, c := range n.IPAM.Config {
			add(c.Subnet)
		}
	}
	if _, registry, _, _ := d.settings(); registry != "" && !namesRegistry(allow, registry) {
		for _, a := range d.registryAddrs(ctx, registry) {
			out = append(out, netip.PrefixFrom(a, a.BitLen()))
		}
	}
	return egress.CompactPrefixes(out), nil
}

// namesRegistry reports whether a rule of the allowlist names the
// registry's host: its name, or its one address. A block of addresses
// that holds it does not name it.
func namesRegistry(allow []string, registry string) bool {
	host := registryHost(registry)
	for _, s := range allow {
		r, err := egress.ParseRule(s)
		if err != nil {
			continue
		}
		if (r.Host != "" && !r.Wildcard && strings.EqualFold(r.Host, host)) || (r.Prefix.IsSingleIP() && r.Prefix.Addr() == addrOf(host)) {
			return true
		}
	}
	return false
}

// registryHost is the host of a registry address (HOST[:PORT][/PATH]).
func registryHost(registry string) string {
	hostport, _, _ := strings.Cut(registry, "/")
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		return h
	}
	return hostport
}

func addrOf(host string) netip.Addr {
	a, _ := netip.ParseAddr(host)
	return a
}

// registryAddrs are the registry host's addresses; a name that does not
// resolve here gives none (logged).
func (d *Driver) registryAddrs(ctx context.Context, registry string) []netip.Addr {
	host := registryHost(registry)
	if a, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{a.Unmap()}
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		d.log.Warn("cannot resolve the registry to forbid its addresses to gateways", "host", host, "error", err)
		return nil
	}
	for i, a := range addrs {
		addrs[i] = a.Unmap()
	}
	return addrs
}
