package docker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/zclconf/go-cty/cty"

	"github.com/bottlefile/bottlefile/addrs"
	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/engine"
	"github.com/bottlefile/bottlefile/drivers/gateway"
)

// Plan expands one agent into its network, its image when it is built, its
// container, and what makes it a bottle (bottle.go): its sidecars, its
// egress gateway and the runtime's egress network. It reads build contexts
// and the gateway binary to hash them, and makes one read-only engine call
// per driver instance (the isolation check); it changes nothing.
func (d *Driver) Plan(ctx context.Context, req drivers.PlanRequest) (drivers.PlanResponse, error) {
	resp, err := d.plan(ctx, req)
	return resp, d.Unreachable(err)
}

func (d *Driver) plan(ctx context.Context, req drivers.PlanRequest) (drivers.PlanResponse, error) {
	a := req.Agent
	addr := a.Addr
	if addr == "" {
		addr = addrs.Agent(a.Name).String()
	}
	if a.Name == "" || !engine.NamePart.MatchString(a.Name) {
		return drivers.PlanResponse{}, fmt.Errorf("%s: the agent name %q cannot name a docker container (use letters, digits, '_', '.', '-')", addr, a.Name)
	}
	netAddr := addrs.NetworkOf(addr)
	network := drivers.Object{
		Addr:  netAddr,
		Kind:  kindNetwork,
		Attrs: map[string]cty.Value{"internal": cty.True},
	}
	objects, err := d.planWorkload(addr, netAddr, a.Workload)
	if err != nil {
		return drivers.PlanResponse{}, fmt.Errorf("%s: %w", addr, err)
	}
	// The credentials' names, env and hosts, never their values.
	if err := gateway.PlanAgentCredentials(&objects[len(objects)-1], drivers.WorkloadAttr(a.Workload, "credentials")); err != nil {
		return drivers.PlanResponse{}, fmt.Errorf("%s: %w", addr, err)
	}
	objects, err = d.planBottle(ctx, a, addr, netAddr, append([]drivers.Object{network}, objects...))
	if err != nil {
		return drivers.PlanResponse{}, err
	}
	return drivers.PlanResponse{Objects: objects}, nil
}

// planWorkload expands an agent's or a sidecar's workload: its image when
// it is built, and its container on the bottle's network, last.
func (d *Driver) planWorkload(addr, netAddr string, w cty.Value) ([]drivers.Object, error) {
	if _, err := engine.AddrPart(addr, kindContainer); err != nil {
		return nil, err
	}
	if err := engine.CheckLabels(drivers.WorkloadAttr(w, "labels")); err != nil {
		return nil, fmt.Errorf("labels: %w", err)
	}
	if err := engine.CheckLimits(drivers.WorkloadAttr(w, "cpus"), drivers.WorkloadAttr(w, "memory")); err != nil {
		return nil, err
	}
	ctr := workloadObject(addr, netAddr, w)
	var objects []drivers.Object
	image := drivers.WorkloadAttr(w, "image")
	if build := drivers.WorkloadAttr(w, "build"); !build.IsNull() {
		b, err := drivers.DecodeBuild(build)
		if err != nil {
			return nil, fmt.Errorf("build: %w", err)
		}
		bc, err := resolveBuildContext(b.Context, b.Dockerfile)
		if err != nil {
			return nil, fmt.Errorf("build: %w", err)
		}
		sum, err := hashContext(bc)
		if err != nil {
			return nil, fmt.Errorf("build: %w", err)
		}
		imgAddr := addrs.ImageOf(addr)
		objects = append(objects, drivers.Object{
			Addr: imgAddr,
			Kind: kindImage,
			Attrs: map[string]cty.Value{
				"context":      cty.StringVal(b.Context),
				"dockerfile":   cty.StringVal(bc.dockerfile),
				"context_hash": cty.StringVal(sum),
			},
		})
		ctr.Attrs["image"] = cty.NullVal(cty.String)
		ctr.Attrs["build_hash"] = cty.StringVal(sum)
		ctr.DependsOn = append(ctr.DependsOn, imgAddr)
		d.log.Debug("hashed build context", "addr", imgAddr, "context", bc.dir, "hash", shortHash(sum))
	} else if image.IsNull() {
		return nil, errors.New("needs an image or a build block")
	} else if s, err := drivers.String(image); err == nil && strings.TrimSpace(s) == "" {
		return nil, errors.New("image is empty")
	}
	return append(objects, ctr), nil
}

// containerAttrs are the workload attributes a container object records,
// as the configuration wrote them. (build is recorded as the image object
// and the container's build_hash; egress as the gateway's allow list;
// healthcheck only when there is one, see workloadObject.)
var containerAttrs = []string{"image", "command", "entrypoint", "env", "workdir", "user", "cpus", "memory", "labels"}

// mappedAttrs are the workload attributes the docker driver maps onto a
// container (Capabilities.Attributes): containerAttrs, and pids, recorded
// only when set (a fingerprint hashes null attributes too, and a container
// without a pids limit keeps the hash it always had).
var mappedAttrs = append(slices.Clone(containerAttrs), "pids")

// workloadObject is the container object of an agent or a sidecar on the
// bottle's network: its workload attributes as the configuration wrote
// them (marks and unknowns kept), and the limits that change in place.
func workloadObject(addr, netAddr string, w cty.Value) drivers.Object {
	attrs := drivers.WorkloadAttrs(w, containerAttrs...)
	attrs["build_hash"] = cty.NullVal(cty.String)
	attrs["network"] = cty.StringVal(netAddr)
	if hc := drivers.WorkloadAttr(w, "healthcheck"); !hc.IsNull() {
		// Only when set: a fingerprint hashes null attributes too, and a
		// container without a healthcheck keeps the hash it always had.
		// The engine cannot change a healthcheck in place: a change
		// replaces the container.
		attrs["healthcheck"] = hc
	}
	inPlace := []string{"cpus", "memory"}
	if pids := drivers.WorkloadAttr(w, "pids"); !pids.IsNull() {
		attrs["pids"] = pids
		inPlace = append(inPlace, "pids")
	}
	return drivers.Object{
		Addr:      addr,
		Kind:      kindContainer,
		Workload:  true,
		InPlace:   inPlace,
		DependsOn: []string{netAddr},
		Attrs:     attrs,
	}
}

// PlanImage is the image object of a workload at addr with a build block
// (its context hashed, as this driver plans it: addrs.ImageOf(addr)), and the
// context hash the workload's own object records as build_hash; nil and ""
// without a build block. It reads the context and contacts nothing.
func (d *Driver) PlanImage(addr string, w cty.Value) (*drivers.Object, string, error) {
	build := drivers.WorkloadAttr(w, "build")
	if build.IsNull() {
		return nil, "", nil
	}
	objs, err := d.planWorkload(addr, addrs.NetworkOf(addr), w)
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
