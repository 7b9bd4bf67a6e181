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

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/swarm"
	"github.com/hashicorp/hcl/v2/hcldec"
	"github.com/zclconf/go-cty/cty"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/engine"
)

// A task's container lives on its node's own engine, which the manager's
// API does not reach: snapshots commit it there, exec runs commands in it.
// The runtime block says how to reach each node's engine:
//
//	node_hosts = {
//	  "node-2" = "tcp://10.0.0.12:2376" # tls_ca, tls_cert and tls_key of the block apply
//	  "node-3" = "ssh://ops@node-3"
//	}
//
// keyed by the node's hostname (docker node ls). The manager's own node
// needs no entry: its engine is the block's host. Each is reached through
// drivers/engine, as the manager's is, by a docker driver configured
// against it (nodeEngine), made when first needed.

// attrNodeHosts is the runtime block's map of node hostnames to engine
// addresses.
const attrNodeHosts = "node_hosts"

// checkRuntime is validate's check of a swarm runtime block: the manager's
// connection attributes (drivers/engine), each node engine's address, and
// the registry's. It contacts nothing; values not known are not checked.
func checkRuntime(req drivers.ConfigureRequest) []*drivers.AttributeError {
	errs := engine.Check(req)
	cfg := req.Config
	if cfg == cty.NilVal || cfg.IsNull() || !cfg.IsKnown() || !cfg.Type().IsObjectType() {
		return errs
	}
	if cfg.Type().HasAttribute(attrNodeHosts) {
		if v := cfg.GetAttr(attrNodeHosts); v.IsWhollyKnown() && !v.IsNull() {
			m, err := drivers.StringMap(v)
			if err != nil {
				errs = append(errs, &drivers.AttributeError{Attribute: attrNodeHosts, Err: err})
			}
			for _, name := range slices.Sorted(maps.Keys(m)) {
				if err := checkNodeEngine(name, m[name]); err != nil {
					errs = append(errs, &drivers.AttributeError{Attribute: attrNodeHosts, Err: err})
				}
			}
		}
	}
	if cfg.Type().HasAttribute(attrNodeTimeout) {
		if v := cfg.GetAttr(attrNodeTimeout); v.IsKnown() && !v.IsNull() && v.Type() == cty.String {
			if _, err := checkNodeTimeout(v.AsString()); err != nil {
				errs = append(errs, &drivers.AttributeError{Attribute: attrNodeTimeout, Err: err})
			}
		}
	}
	for _, name := range []string{"registry", attrRegistryURL} {
		if !cfg.Type().HasAttribute(name) {
			continue
		}
		v := cfg.GetAttr(name)
		if !v.IsKnown() || v.IsNull() {
			continue
		}
		check := checkRegistry
		if name == attrRegistryURL {
			check = checkRegistryURL
		}
		if err := check(v.AsString()); err != nil {
			errs = append(errs, &drivers.AttributeError{Attribute: name, Err: err})
		}
	}
	return errs
}

func checkNodeEngine(node, host string) error {
	if strings.TrimSpace(node) == "" {
		return errors.New("a node's hostname is empty")
	}
	if _, err := engine.ParseHost(host); err != nil {
		return fmt.Errorf("node %q: %w", node, err)
	}
	return nil
}

// parseNodeEngines reads node_hosts from a decoded runtime block.
func parseNodeEngines(cfg cty.Value) (map[string]string, error) {
	if cfg == cty.NilVal || cfg.IsNull() || !cfg.Type().IsObjectType() || !cfg.Type().HasAttribute(attrNodeHosts) {
		return nil, nil
	}
	v := cfg.GetAttr(attrNodeHosts)
	if v.IsNull() {
		return nil, nil
	}
	m, err := drivers.StringMap(v)
	if err != nil {
		return nil, err
	}
	for name, host := range m {
		if err := checkNodeEngine(name, host); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// nodeEngines holds the drivers of the nodes' engines, made when first
// needed, per configured driver.
type nodeEngines struct {
	mu    sync.Mutex
	hosts map[string]string        // node_hosts
	cfg   cty.Value                // the runtime block, for the TLS files
	req   drivers.ConfigureRequest // as Configure was given it
	spec  hcldec.ObjectSpec        // the engine driver's runtime block
	made  map[string]engine.Driver // by node hostname
}

// nodeError is a node's engine failing: an error that names the node and
// is never taken for the manager's engine being unreachable (which would
// make the plan say the whole runtime cannot be reached).
type nodeError struct {
	node string
	err  error
}

func (e *nodeError) Error() string { return e.err.Error() }

// nodeFailed words a failure of the engine of node.
func nodeFailed(node, host string, err error) error {
	var ue *drivers.UnreachableError
	if errors.As(err, &ue) {
		return &nodeError{node: node, err: fmt.Errorf("the engine of node %s cannot be reached at %s: %v", node, host, ue.Err)}
	}
	return &nodeError{node: node, err: fmt.Errorf("node %s: %v", node, err)}
}

// nodeEngine is the driver of the engine of the node with this
// hostname: node_hosts' entry for it, else the manager's own driver when
// it is the manager's node. A node the block does not name is an error
// that says how to name it.
func (d *Driver) nodeEngine(ctx context.Context, node string) (engine.Driver, string, error) {
	d.mu.RLock()
	ne, runtime := d.nodeEngs, d.runtime
	d.mu.RUnlock()
	if ne == nil {
		return nil, "", errors.New("swarm driver is not configured")
	}
	ne.mu.Lock()
	defer ne.mu.Unlock()
	if eng, ok := ne.made[node]; ok {
		return eng, ne.hosts[node], nil
	}
	host, ok := ne.hosts[node]
	if !ok {
		mgr, err := d.facts(ctx)
		if err == nil && mgr.Description.Hostname == node {
			return d.eng, "the manager's engine", nil
		}
		named := "it names none"
		if len(ne.hosts) > 0 {
			named = "it names " + strings.Join(slices.Sorted(maps.Keys(ne.hosts)), ", ")
		}
		return nil, "", &nodeError{node: node, err: fmt.Errorf("runtime %q does not say how to reach the engine of node %s (%s): add it to node_hosts, as in node_hosts = { %q = \"tcp://HOST:2376\" }", runtime, node, named, node)}
	}
	eng, err := d.newEngine(d.log.Named(node))
	if err != nil {
		return nil, "", err
	}
	req := ne.req
	req.Runtime = runtime
	req.Config = nodeConfig(ne.spec, ne.cfg, host)
	if err := eng.Configure(ctx, req); err != nil {
		return nil, "", nodeFailed(node, host, err)
	}
	if ne.made == nil {
		ne.made = map[string]engine.Driver{}
	}
	ne.made[node] = eng
	return eng, host, nil
}

// nodeConfig is the engine driver's runtime block for a node's engine at
// host: the swarm block's (engineConfig) with host set, and its TLS files
// only for a tcp:// engine (the others take none).
func nodeConfig(spec hcldec.ObjectSpec, cfg cty.Value, host string) cty.Value {
	base := engineConfig(spec, cfg)
	vals := base.AsValueMap()
	vals[engine.AttrHost] = cty.StringVal(host)
	if u, err := engine.ParseHost(host); err != nil || u.Scheme != engine.SchemeTCP {
		for _, name := range []string{engine.AttrTLSCA, engine.AttrTLSCert, engine.AttrTLSKey} {
			vals[name] = cty.NullVal(cty.String)
		}
	}
	return cty.ObjectVal(vals)
}

// closeNodes closes the nodes' engine clients.
func (ne *nodeEngines) close() error {
	if ne == nil {
		return nil
	}
	ne.mu.Lock()
	defer ne.mu.Unlock()
	var errs []error
	for _, eng := range ne.made {
		errs = append(errs, eng.Close())
	}
	ne.made = nil
	return errors.Join(errs...)
}

// taskOf is the running task of the service of the workload at addr, the
// hostname of its node, and its container's id there. A service without
// a running task is an error that says what the cluster says of it.
func (d *Driver) taskOf(ctx context.Context, api swarmAPI, lineage, addr string) (swarm.Task, string, error) {
	name, err := serviceName(lineage, addr)
	if err != nil {
		return swarm.Task{}, "", err
	}
	svc, _, err := api.ServiceInspectWithRaw(ctx, name, swarm.ServiceInspectOptions{})
	if err != nil {
		if cerrdefs.IsNotFound(err) {
			return swarm.Task{}, "", fmt.Errorf("%s has no service %s (apply the agent first)", addr, name)
		}
		return swarm.Task{}, "", fmt.Errorf("inspecting service %s of %s: %w", name, addr, err)
	}
	if svc.Spec.Labels[drivers.LabelLineage] != lineage {
		return swarm.Task{}, "", fmt.Errorf("service %s does not belong to this state (lineage %s)", name, lineage)
	}
	tasks, err := api.TaskList(ctx, swarm.TaskListOptions{Filters: filters.NewArgs(filters.Arg("service", svc.ID), filters.Arg("desired-state", "running"))})
	if err != nil {
		return swarm.Task{}, "", fmt.Errorf("listing the tasks of service %s: %w", name, err)
	}
	t, ok := currentTask(tasks)
	if !ok || t.Status.State != swarm.TaskStateRunning || t.Status.ContainerStatus == nil || t.Status.ContainerStatus.ContainerID == "" {
		why := "it has no task"
		if ok {
			why = fmt.Sprintf("its task is %s", t.Status.State)
			if p := taskProblem(t); p != "" {
				why += ": " + p
			}
		}
		return swarm.Task{}, "", fmt.Errorf("%s is not running (%s)", addr, why)
	}
	node := t.NodeID
	nodes, err := api.NodeList(ctx, swarm.NodeListOptions{Filters: filters.NewArgs(filters.Arg("id", t.NodeID))})
	if err != nil {
		return swarm.Task{}, "", fmt.Errorf("looking up node %s: %w", t.NodeID, err)
	}
	for _, n := range nodes {
		if n.ID == t.NodeID {
			node = n.Description.Hostname
		}
	}
	return t, node, nil
}

// serviceCopies are what a service's tasks pulled onto their nodes: the
// service's image and the hostnames of the nodes its tasks ran on, read
// before the service is removed (removeCopiesOf).
type serviceCopies struct {
	id    string
	image string
	nodes []string
}

// copiesOf reads a service's image and the nodes of its tasks; an error
// leaves them unknown (nothing is removed).
func copiesOf(ctx context.Context, api swarmAPI, id string) serviceCopies {
	svc, _, err := api.ServiceInspectWithRaw(ctx, id, swarm.ServiceInspectOptions{})
	if err != nil || svc.Spec.TaskTemplate.ContainerSpec == nil {
		return serviceCopies{}
	}
	out := serviceCopies{id: svc.ID, image: svc.Spec.TaskTemplate.ContainerSpec.Image}
	tasks, err := api.TaskList(ctx, swarm.TaskListOptions{Filters: filters.NewArgs(filters.Arg("service", svc.ID))})
	if err != nil {
		return serviceCopies{}
	}
	ids := map[string]bool{}
	for _, t := range tasks {
		if t.NodeID != "" {
			ids[t.NodeID] = true
		}
	}
	if len(ids) == 0 {
		return out
	}
	nodes, err := api.NodeList(ctx, swarm.NodeListOptions{})
	if err != nil {
		return serviceCopies{}
	}
	for _, n := range nodes {
		if ids[n.ID] {
			out.nodes = append(out.nodes, n.Description.Hostname)
		}
	}
	slices.Sort(out.nodes)
	return out
}

// copyGone bounds how long removeCopiesOf waits for a removed service's
// container to leave its node.
const copyGone = 15 * time.Second

// recordCopies records, before the service goes, the copies of the
// lineage's image its tasks' nodes hold (nodecopy.go), so that an
// interrupted delete leaves nothing unrecorded.
func (d *Driver) recordCopies(ctx context.Context, api swarmAPI, lineage, addr string, sc serviceCopies) {
	if sc.image == "" || !ofLineage(lineage, sc.image) {
		return
	}
	for _, node := range sc.nodes {
		if !d.reaches(ctx, node) {
			continue // nothing can remove it: not recorded
		}
		if err := d.recordCopy(ctx, api, lineage, addr, nodeCopy{Node: node, Image: sc.image, Service: sc.id}); err != nil {
			d.log.Warn("could not record a node's copy before removing it", "node", node, "image", sc.image, "error", err)
		}
	}
}

// removeCopiesOf waits, on each node a removed service's tasks ran on
// whose engine the driver reaches, until the task's containers are gone
// (bounded), then removes the service's image when it is one of this
// lineage (a snapshot it booted from, a built image: the base images a
// configuration names are left alone) and its record. A node that cannot
// be reached keeps its copy and the record, for a later apply or destroy.
func (d *Driver) removeCopiesOf(ctx context.Context, api swarmAPI, lineage string, sc serviceCopies) {
	if sc.image == "" {
		return
	}
	track := ofLineage(lineage, sc.image)
	for _, node := range sc.nodes {
		if !d.reaches(ctx, node) {
			d.log.Debug("no engine of the node is named to remove what a service pulled there", "node", node)
			continue
		}
		c := nodeCopy{Node: node, Image: sc.image, Service: sc.id}
		if err := d.removeCopyOn(ctx, lineage, c, track); err != nil {
			d.log.Info("a node keeps what a removed service pulled, for now: a later apply or destroy removes it", "node", node, "image", sc.image, "error", err)
			continue
		}
		if track {
			d.forgetCopy(ctx, api, lineage, c)
		}
	}
}
