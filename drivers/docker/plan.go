package docker

import (
	"context"
	"fmt"
	"strings"

	"github.com/zclconf/go-cty/cty"

	"github.com/bottlefile/bottlefile/addrs"
	"github.com/bottlefile/bottlefile/drivers"
)

// Plan expands one agent into its network, its image when it is built, its
// container, and what makes it a bottle (bottle.go): its sidecars, its
// egress gateway and the runtime's egress network. It reads build contexts
// and the gateway binary to hash them, and makes one read-only engine call
// per driver instance (the isolation check); it changes nothing.
func (d *Driver) Plan(ctx context.Context, req drivers.PlanRequest) (drivers.PlanResponse, error) {
	resp, err := d.plan(ctx, req)
	return resp, d.unreachable(err)
}

func (d *Driver) plan(ctx context.Context, req drivers.PlanRequest) (drivers.PlanResponse, error) {
	a := req.Agent
	addr := a.Addr
	if addr == "" {
		addr = addrs.Agent(a.Name).String()
	}
	if a.Name == "" || !namePart.MatchString(a.Name) {
		return drivers.PlanResponse{}, fmt.Errorf("%s: the agent name %q cannot name a docker container (use letters, digits, '_', '.', '-')", addr, a.Name)
	}
	if _, err := addrPart(addr, kindContainer); err != nil {
		return drivers.PlanResponse{}, fmt.Errorf("%s: %w", addr, err)
	}
	if err := checkLabels(a.Labels); err != nil {
		return drivers.PlanResponse{}, fmt.Errorf("%s: labels: %w", addr, err)
	}
	if err := checkLimits(a.CPUs, a.Memory); err != nil {
		return drivers.PlanResponse{}, fmt.Errorf("%s: %w", addr, err)
	}

	netAddr := addr + ".network"
	network := drivers.Object{
		Addr:  netAddr,
		Kind:  kindNetwork,
		Attrs: map[string]cty.Value{"internal": cty.True},
	}

	ctr := workloadObject(addr, netAddr, drivers.SidecarSpec{
		Image: a.Image, Command: a.Command, Entrypoint: a.Entrypoint, Env: a.Env,
		Workdir: a.Workdir, User: a.User, CPUs: a.CPUs, Memory: a.Memory, Labels: a.Labels,
	})
	objects := []drivers.Object{network}

	if a.Build != nil {
		bc, err := resolveBuildContext(a.Build.Context, a.Build.Dockerfile)
		if err != nil {
			return drivers.PlanResponse{}, fmt.Errorf("%s: build: %w", addr, err)
		}
		sum, err := hashContext(bc)
		if err != nil {
			return drivers.PlanResponse{}, fmt.Errorf("%s: build: %w", addr, err)
		}
		imgAddr := addr + ".image"
		objects = append(objects, drivers.Object{
			Addr: imgAddr,
			Kind: kindImage,
			Attrs: map[string]cty.Value{
				"context":      cty.StringVal(a.Build.Context),
				"dockerfile":   cty.StringVal(bc.dockerfile),
				"context_hash": cty.StringVal(sum),
			},
		})
		ctr.Attrs["image"] = cty.NullVal(cty.String)
		ctr.Attrs["build_hash"] = cty.StringVal(sum)
		ctr.DependsOn = append(ctr.DependsOn, imgAddr)
		d.log.Debug("hashed build context", "addr", imgAddr, "context", bc.dir, "hash", shortHash(sum))
	} else if a.Image == cty.NilVal || a.Image.IsNull() {
		return drivers.PlanResponse{}, fmt.Errorf("%s: needs an image or a build block", addr)
	} else if s, err := drivers.String(a.Image); err == nil && strings.TrimSpace(s) == "" {
		return drivers.PlanResponse{}, fmt.Errorf("%s: image is empty", addr)
	}
	objects = append(objects, ctr)
	objects, err := d.planBottle(ctx, a, addr, netAddr, objects)
	if err != nil {
		return drivers.PlanResponse{}, err
	}
	return drivers.PlanResponse{Objects: objects}, nil
}

// orNull gives a typed null for a value the core left unset (cty.NilVal),
// and the value itself, marks and unknowns included, otherwise.
func orNull(v cty.Value, ty cty.Type) cty.Value {
	if v == cty.NilVal {
		return cty.NullVal(ty)
	}
	return v
}

// checkLabels rejects agent labels that would shadow bottlefile's own.
// Unknown values are left for apply.
func checkLabels(v cty.Value) error {
	if v == cty.NilVal {
		return nil
	}
	m, err := drivers.StringMap(v)
	if err != nil {
		if !v.IsWhollyKnown() {
			return nil
		}
		return err
	}
	for k := range m {
		if strings.HasPrefix(k, "io.bottlefile.") {
			return fmt.Errorf("label %q is reserved: io.bottlefile.* labels are set by bottlefile", k)
		}
	}
	return nil
}

// checkLimits rejects negative or fractional limits that are known.
func checkLimits(cpus, memory cty.Value) error {
	if cpus != cty.NilVal && cpus.IsWhollyKnown() {
		f, err := drivers.Float(cpus)
		if err != nil {
			return fmt.Errorf("cpus: %w", err)
		}
		if f < 0 {
			return fmt.Errorf("cpus: must not be negative, got %g", f)
		}
	}
	if memory != cty.NilVal && memory.IsWhollyKnown() {
		m, err := drivers.Int(memory)
		if err != nil {
			return fmt.Errorf("memory: %w", err)
		}
		if m < 0 {
			return fmt.Errorf("memory: must not be negative, got %d", m)
		}
	}
	return nil
}

// workloadObject is the container object of an agent or a sidecar on the
// bottle's network: the attributes both have, as the configuration wrote
// them (marks and unknowns kept), and the limits that change in place.
func workloadObject(addr, netAddr string, w drivers.SidecarSpec) drivers.Object {
	return drivers.Object{
		Addr:      addr,
		Kind:      kindContainer,
		Workload:  true,
		InPlace:   []string{"cpus", "memory"},
		DependsOn: []string{netAddr},
		Attrs: map[string]cty.Value{
			"image":      orNull(w.Image, cty.String),
			"build_hash": cty.NullVal(cty.String),
			"command":    orNull(w.Command, cty.List(cty.String)),
			"entrypoint": orNull(w.Entrypoint, cty.List(cty.String)),
			"env":        orNull(w.Env, cty.Map(cty.String)),
			"workdir":    orNull(w.Workdir, cty.String),
			"user":       orNull(w.User, cty.String),
			"cpus":       orNull(w.CPUs, cty.Number),
			"memory":     orNull(w.Memory, cty.Number),
			"labels":     orNull(w.Labels, cty.Map(cty.String)),
			"network":    cty.StringVal(netAddr),
		},
	}
}
