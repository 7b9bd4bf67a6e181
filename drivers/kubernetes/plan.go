package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/zclconf/go-cty/cty"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/bottlefile/bottlefile/addrs"
	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/engine"
	"github.com/bottlefile/bottlefile/drivers/gateway"
)

// podAttrs are the workload attributes a Pod object records, as the
// configuration wrote them.
var podAttrs = mappedAttrs

// egressNetwork is what a gateway object records as its egress network:
// a gateway Pod reaches the world through the cluster's own Pod network,
// which a NetworkPolicy opens to it alone.
const egressNetwork = "cluster"

// Plan expands one agent into its bottle's namespace, its Pod, each
// sidecar's Pod and, with an egress block, its gateway. It reads the
// gateway binary to hash it; it contacts nothing.
func (d *Driver) Plan(_ context.Context, req drivers.PlanRequest) (drivers.PlanResponse, error) {
	_, cfg, err := d.client()
	if err != nil {
		return drivers.PlanResponse{}, err
	}
	a := req.Agent
	addr := a.Addr
	if addr == "" {
		addr = addrs.Agent(a.Name).String()
	}
	if _, err := namespaceName(cfg.prefix, "x", addr); err != nil {
		return drivers.PlanResponse{}, fmt.Errorf("%s: %w", addr, err)
	}
	if refusals := drivers.CheckAgent(d.Name(), Declaration().Capabilities, a); len(refusals) > 0 {
		return drivers.PlanResponse{}, fmt.Errorf("%s: %w", addr, drivers.Err(refusals))
	}
	place, err := decodePlacement(a.Driver)
	if err != nil {
		return drivers.PlanResponse{}, fmt.Errorf("%s: %w", addr, err)
	}
	egress := drivers.HasEgressBlock(a.Workload)
	if egress && cfg.registry == "" {
		return drivers.PlanResponse{}, fmt.Errorf("%s: an egress block needs the runtime's registry: the gateway image is pushed there for the node to pull (set registry = \"HOST:PORT\" in runtime %q)", addr, cfg.runtime)
	}

	var names []string
	for _, sc := range a.Sidecars {
		names = append(names, sc.Name)
	}
	nsAddr := addrs.NetworkOf(addr)
	objects := []drivers.Object{{
		Addr: nsAddr,
		Kind: kindNamespace,
		Attrs: map[string]cty.Value{
			"services": drivers.StringsValue(names),
			"gateway":  cty.BoolVal(egress),
		},
		// A sidecar added or removed adds or removes its Service; the
		// namespace and its other Services stay.
		InPlace: []string{"services"},
	}}
	// Each sidecar's Pod, then the agent's, whose host aliases name the
	// sidecars' Pod addresses: a sidecar replaced (a new address)
	// replaces its agent too. The gateway's Service, which the aliases
	// name as "gateway", is the namespace's, so a new gateway Pod keeps
	// the address.
	var scAddrs []string
	var sidecarPods []drivers.Object
	for _, sc := range a.Sidecars {
		scAddr := sc.Addr
		if scAddr == "" {
			scAddr = addrs.SidecarOf(addr, sc.Name)
		}
		if err := checkSidecarName(sc.Name); err != nil {
			return drivers.PlanResponse{}, fmt.Errorf("%s: %w", scAddr, err)
		}
		if err := gateway.CheckSidecarEgress(drivers.WorkloadAttr(a.Workload, "egress"), drivers.WorkloadAttr(sc.Workload, "egress")); err != nil {
			return drivers.PlanResponse{}, fmt.Errorf("%s: %w", scAddr, err)
		}
		if !drivers.WorkloadAttr(sc.Workload, "credentials").IsNull() {
			return drivers.PlanResponse{}, fmt.Errorf("%s: credential blocks go in the agent's egress block: on the kubernetes driver a bottle has one gateway, which injects them for the agent", scAddr)
		}
		pod, err := planPod(scAddr, nsAddr, sc.Workload, place, names, egress, nil)
		if err != nil {
			return drivers.PlanResponse{}, fmt.Errorf("%s: %w", scAddr, err)
		}
		sidecarPods = append(sidecarPods, pod)
		scAddrs = append(scAddrs, scAddr)
	}
	pod, err := planPod(addr, nsAddr, a.Workload, place, names, egress, scAddrs)
	if err != nil {
		return drivers.PlanResponse{}, fmt.Errorf("%s: %w", addr, err)
	}
	if err := gateway.PlanAgentCredentials(&pod, drivers.WorkloadAttr(a.Workload, "credentials")); err != nil {
		return drivers.PlanResponse{}, fmt.Errorf("%s: %w", addr, err)
	}
	objects = append(objects, pod)
	objects = append(objects, sidecarPods...)
	if egress {
		bin, err := d.gatewayBinary(cfg)
		if err != nil {
			return drivers.PlanResponse{}, fmt.Errorf("%s: gateway: %w", addr, err)
		}
		gw, err := gateway.Plan(gateway.Spec{
			Agent: a, AgentAddr: addr, Network: nsAddr,
			EgressNetwork: egressNetwork,
			Version:       bin.Version(),
			DNS:           drivers.StringsValue(cfg.dns),
			Sidecars:      names,
			Credentials:   true,
		})
		if err != nil {
			return drivers.PlanResponse{}, fmt.Errorf("%s: %w", addr, err)
		}
		for k, v := range placementAttrs(place) {
			gw.Attrs[k] = v
		}
		gw.Attrs["registry"] = cty.StringVal(cfg.registry)
		objects = append(objects, gw)
	}
	return drivers.PlanResponse{Objects: objects}, nil
}

// planPod is an agent's or a sidecar's Pod object. Its spec cannot
// change on the cluster, so no attribute is in place: a change is a new
// Pod, which the plan says.
func planPod(addr, nsAddr string, w cty.Value, place placement, sidecars []string, egress bool, deps []string) (drivers.Object, error) {
	if err := checkPodLabels(drivers.WorkloadAttr(w, "labels")); err != nil {
		return drivers.Object{}, fmt.Errorf("labels: %w", err)
	}
	if err := engine.CheckLimits(drivers.WorkloadAttr(w, "cpus"), drivers.WorkloadAttr(w, "memory")); err != nil {
		return drivers.Object{}, err
	}
	if err := checkUser(drivers.WorkloadAttr(w, "user")); err != nil {
		return drivers.Object{}, err
	}
	image := drivers.WorkloadAttr(w, "image")
	if image.IsNull() {
		return drivers.Object{}, errors.New("needs an image: the kubernetes driver does not build images")
	}
	if s, err := drivers.String(image); err == nil && strings.TrimSpace(s) == "" {
		return drivers.Object{}, errors.New("image is empty")
	}
	attrs := drivers.WorkloadAttrs(w, podAttrs...)
	for k, v := range placementAttrs(place) {
		attrs[k] = v
	}
	attrs["namespace"] = cty.StringVal(nsAddr)
	attrs["sidecars"] = drivers.StringsValue(sidecars)
	attrs["proxy"] = cty.BoolVal(egress)
	return drivers.Object{
		Addr:      addr,
		Kind:      kindPod,
		Workload:  true,
		DependsOn: append([]string{nsAddr}, deps...),
		Attrs:     attrs,
	}, nil
}

// checkPodLabels refuses labels a Pod cannot carry, or that would shadow
// bottlefile's own. Unknown values are left for apply.
func checkPodLabels(v cty.Value) error {
	if err := engine.CheckLabels(v); err != nil {
		return err
	}
	if v == cty.NilVal || !v.IsWhollyKnown() || v.IsNull() {
		return nil
	}
	m, err := drivers.StringMap(v)
	if err != nil {
		return err
	}
	for k, val := range m {
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			return fmt.Errorf("%q is not a Kubernetes label name: %s", k, errs[0])
		}
		if errs := validation.IsValidLabelValue(val); len(errs) > 0 {
			return fmt.Errorf("the value of %q is not a Kubernetes label value: %s", k, errs[0])
		}
	}
	return nil
}

// checkUser accepts a user a Pod's securityContext can say: UID or
// UID:GID, numbers (a Pod cannot name a user of the image).
func checkUser(v cty.Value) error {
	if v == cty.NilVal || !v.IsKnown() || v.IsNull() {
		return nil
	}
	s, err := drivers.String(v)
	if err != nil || s == "" {
		return err
	}
	if _, _, err := parseUser(s); err != nil {
		return fmt.Errorf("user: %w", err)
	}
	return nil
}
