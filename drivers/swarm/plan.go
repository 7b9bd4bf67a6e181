package swarm

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/zclconf/go-cty/cty"

	"github.com/bottlefile/bottlefile/addrs"
	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/engine"
	"github.com/bottlefile/bottlefile/drivers/gateway"
)

// serviceAttrs are the workload attributes a service object records, as
// the configuration wrote them (build is recorded as the image object and
// the service's build_hash; egress as the gateway's allow list).
var serviceAttrs = []string{"image", "command", "entrypoint", "env", "workdir", "user", "cpus", "memory", "labels"}

// mappedAttrs are the workload attributes the swarm driver maps onto a
// service (Capabilities.Attributes): serviceAttrs, and pids (the task's
// Resources.Limits.Pids, API 1.41), recorded only when set so that a
// service without one keeps the config hash it always had.
var mappedAttrs = append(slices.Clone(serviceAttrs), "pids")

func (d *Driver) plan(ctx context.Context, req drivers.PlanRequest) (drivers.PlanResponse, error) {
	a := req.Agent
	addr := a.Addr
	if addr == "" {
		addr = addrs.Agent(a.Name).String()
	}
	if _, err := serviceName("x", addr); err != nil {
		return drivers.PlanResponse{}, fmt.Errorf("%s: %w", addr, err)
	}
	runtime, _, _, _ := d.settings()
	if _, err := networkName("x", addrs.Runtime(runtime).Egress().String()); err != nil {
		return drivers.PlanResponse{}, fmt.Errorf("%s: the runtime's egress network: %w", addr, err)
	}
	if refusals := drivers.CheckAgent(d.Name(), Declaration().Capabilities, a); len(refusals) > 0 {
		return drivers.PlanResponse{}, fmt.Errorf("%s: %w", addr, drivers.Err(refusals))
	}
	placement, err := decodePlacement(a.Driver)
	if err != nil {
		return drivers.PlanResponse{}, fmt.Errorf("%s: placement: %w", addr, err)
	}
	manager, err := d.facts(ctx)
	if err != nil {
		return drivers.PlanResponse{}, err
	}
	_, registry, egressNet, dns := d.settings()
	// Without a registry, what is built exists on the manager only.
	pinned := placement
	if registry == "" {
		pinned = append(append([]string{}, placement...), "node.id=="+manager.ID)
	}

	netAddr := addrs.NetworkOf(addr)
	objects := []drivers.Object{{
		Addr:  netAddr,
		Kind:  kindNetwork,
		Attrs: map[string]cty.Value{"internal": cty.True, "driver": cty.StringVal("overlay")},
	}}
	var names []string
	for _, sc := range a.Sidecars {
		names = append(names, sc.Name)
	}
	objs, err := d.planWorkload(addr, netAddr, a.Workload, placement, pinned)
	if err != nil {
		return drivers.PlanResponse{}, fmt.Errorf("%s: %w", addr, err)
	}
	objects = append(objects, objs...)
	for _, sc := range a.Sidecars {
		scAddr := sc.Addr
		if scAddr == "" {
			scAddr = addrs.SidecarOf(addr, sc.Name)
		}
		switch {
		case !clusterName.MatchString(sc.Name):
			return drivers.PlanResponse{}, fmt.Errorf("%s: the sidecar name %q cannot be a name on the bottle's network (use letters, digits, '-' and '_')", scAddr, sc.Name)
		case strings.EqualFold(sc.Name, gateway.Alias), strings.EqualFold(sc.Name, "localhost"):
			return drivers.PlanResponse{}, fmt.Errorf("%s: a sidecar cannot be named %q", scAddr, sc.Name)
		}
		if err := gateway.CheckSidecarEgress(drivers.WorkloadAttr(a.Workload, "egress"), drivers.WorkloadAttr(sc.Workload, "egress")); err != nil {
			return drivers.PlanResponse{}, fmt.Errorf("%s: %w", scAddr, err)
		}
		objs, err := d.planWorkload(scAddr, netAddr, sc.Workload, placement, pinned)
		if err != nil {
			return drivers.PlanResponse{}, fmt.Errorf("%s: %w", scAddr, err)
		}
		svc := &objs[len(objs)-1]
		svc.Attrs["alias"] = cty.StringVal(sc.Name)
		objects = append(objects, objs...)
	}
	if len(names) > 0 {
		for i := range objects {
			if objects[i].Kind == kindService {
				objects[i].Attrs["sidecars"] = drivers.StringsValue(names)
			}
		}
	}

	if drivers.HasEgressBlock(a.Workload) {
		bin, err := d.gatewayBinary()
		if err != nil {
			return drivers.PlanResponse{}, fmt.Errorf("%s: gateway: %w", addr, err)
		}
		version := bin.Version()
		spec := gateway.Spec{
			Agent: a, AgentAddr: addr, Network: netAddr,
			EgressNetwork: egressNet,
			Version:       version,
			DNS:           drivers.StringsValue(dns),
			Sidecars:      names,
		}
		if egressNet == "" {
			egAddr := addrs.Runtime(runtime).Egress().String()
			objects = append(objects, drivers.Object{
				Addr:  egAddr,
				Kind:  kindNetwork,
				Attrs: map[string]cty.Value{"internal": cty.False, "driver": cty.StringVal("overlay")},
			})
			spec.EgressNetwork, spec.EgressObject = egAddr, true
		}
		gw, err := gateway.Plan(spec)
		if err != nil {
			return drivers.PlanResponse{}, fmt.Errorf("%s: %w", addr, err)
		}
		gw.Attrs["placement"] = drivers.StringsValue(pinned)
		gw.Attrs["registry"] = optString(registry)
		objects = append(objects, gw)
	}
	return drivers.PlanResponse{Objects: objects}, nil
}

// planWorkload expands an agent's or a sidecar's workload: its image when
// it is built, then its service on the bottle's network. A service of a
// built image without a registry is pinned to the manager, which has it.
func (d *Driver) planWorkload(addr, netAddr string, w cty.Value, placement, pinned []string) ([]drivers.Object, error) {
	if err := engine.CheckLabels(drivers.WorkloadAttr(w, "labels")); err != nil {
		return nil, fmt.Errorf("labels: %w", err)
	}
	if err := engine.CheckLimits(drivers.WorkloadAttr(w, "cpus"), drivers.WorkloadAttr(w, "memory")); err != nil {
		return nil, err
	}
	if _, err := serviceName("x", addr); err != nil {
		return nil, err
	}
	attrs := drivers.WorkloadAttrs(w, serviceAttrs...)
	attrs["build_hash"] = cty.NullVal(cty.String)
	attrs["network"] = cty.StringVal(netAddr)
	attrs["placement"] = drivers.StringsValue(placement)
	if pids := drivers.WorkloadAttr(w, "pids"); !pids.IsNull() {
		attrs["pids"] = pids
	}
	svc := drivers.Object{
		Addr:      addr,
		Kind:      kindService,
		Workload:  true,
		DependsOn: []string{netAddr},
		Attrs:     attrs,
	}
	img, sum, err := d.eng.PlanImage(addr, w)
	if err != nil {
		return nil, err
	}
	if img == nil {
		image := drivers.WorkloadAttr(w, "image")
		if image.IsNull() {
			return nil, errors.New("needs an image or a build block")
		}
		if s, err := drivers.String(image); err == nil && strings.TrimSpace(s) == "" {
			return nil, errors.New("image is empty")
		}
		return []drivers.Object{svc}, nil
	}
	_, registry, _, _ := d.settings()
	img.Attrs["registry"] = optString(registry)
	svc.Attrs["image"] = cty.NullVal(cty.String)
	svc.Attrs["build_hash"] = cty.StringVal(sum)
	svc.Attrs["placement"] = drivers.StringsValue(pinned)
	svc.DependsOn = append(svc.DependsOn, img.Addr)
	return []drivers.Object{*img, svc}, nil
}

// decodePlacement reads an agent's placement constraints (its driver
// block), checking their form: NAME==VALUE or NAME!=VALUE, as swarm takes
// them. Values not known yet are left for apply.
func decodePlacement(v cty.Value) ([]string, error) {
	if v == cty.NilVal || v.IsNull() {
		return nil, nil
	}
	v, _ = v.UnmarkDeep()
	if !v.Type().IsObjectType() || !v.Type().HasAttribute("placement") {
		return nil, nil
	}
	p := v.GetAttr("placement")
	if !p.IsWhollyKnown() {
		return nil, nil
	}
	list, err := drivers.Strings(p)
	if err != nil {
		return nil, err
	}
	for i, c := range list {
		if !constraint.MatchString(c) {
			return nil, fmt.Errorf("constraint %d, %q, is not of the form NAME==VALUE or NAME!=VALUE (for example %q)", i+1, c, "node.labels.pool==agents")
		}
	}
	return list, nil
}

// constraint is the form of a swarm placement constraint.
var constraint = regexp.MustCompile(`^\s*[a-zA-Z0-9_.-]+\s*(==|!=)\s*\S.*$`)

func optString(s string) cty.Value {
	if s == "" {
		return cty.NullVal(cty.String)
	}
	return cty.StringVal(s)
}
