package smolvm

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/zclconf/go-cty/cty"

	"github.com/bottlefile/bottlefile/addrs"
	"github.com/bottlefile/bottlefile/drivers"
)

// Limits smolvm puts on resources: --cpus is a u8, --mem a u32 of MiB.
const (
	maxCPUs   = 255
	mib       = 1 << 20
	maxMemMiB = math.MaxUint32
)

// Plan expands one agent into its machine. It never calls the CLI: the
// checks it makes are on the agent's values alone.
func (d *Driver) Plan(ctx context.Context, req drivers.PlanRequest) (drivers.PlanResponse, error) {
	a := req.Agent
	addr := a.Addr
	if addr == "" {
		addr = addrs.Agent(a.Name).String()
	}
	fail := func(format string, args ...any) (drivers.PlanResponse, error) {
		return drivers.PlanResponse{}, fmt.Errorf("%s: %s", addr, fmt.Sprintf(format, args...))
	}
	if err := checkPlanName(addr, a.Name); err != nil {
		return fail("%v", err)
	}
	// Sidecars, build, user and what egress rules can say: what smolvm
	// declares it cannot do (Declaration), which the planner checked
	// already, on the block that asks.
	if err := drivers.Err(drivers.CheckAgent(d.Name(), Declaration().Capabilities, a)); err != nil {
		if re := (*drivers.RuleError)(nil); errors.As(err, &re) {
			return drivers.PlanResponse{}, err // the planner points at the rule
		}
		return fail("%v", err)
	}
	attr := func(name string) cty.Value { return drivers.WorkloadAttr(a.Workload, name) }
	image := attr("image")
	if image.IsNull() {
		return fail("needs an image: a registry reference, a docker-save tar or a .smolmachine")
	}
	if image.IsWhollyKnown() {
		s, err := drivers.String(image)
		if err != nil {
			return fail("image: %v", err)
		}
		if _, _, err := imageSource(s, ""); err != nil {
			return fail("image: %v", err)
		}
	}
	if err := checkEgress(attr("egress")); err != nil {
		return drivers.PlanResponse{}, err // a *drivers.RuleError: the planner points at the rule
	}
	if err := checkKeys("labels", attr("labels"), true); err != nil {
		return fail("%v", err)
	}
	if err := checkKeys("env", attr("env"), false); err != nil {
		return fail("%v", err)
	}
	if cpus := attr("cpus"); cpus.IsWhollyKnown() {
		f, err := drivers.Float(cpus)
		if err != nil {
			return fail("cpus: %v", err)
		}
		if _, err := cpuCount(f); err != nil {
			return fail("%v", err)
		}
	}
	if memory := attr("memory"); memory.IsWhollyKnown() {
		m, err := drivers.Int(memory)
		if err != nil {
			return fail("memory: %v", err)
		}
		if _, err := memoryMiB(m); err != nil {
			return fail("%v", err)
		}
	}

	return drivers.PlanResponse{Objects: []drivers.Object{{
		Addr:     addr,
		Kind:     kindMachine,
		Workload: true,
		// No attribute changes in place: "machine update" needs a stopped
		// machine and cannot change the image, workload or labels, so
		// every change replaces the machine.
		InPlace: nil,
		Attrs:   drivers.WorkloadAttrs(a.Workload, machineAttrs...),
	}}}, nil
}

// machineAttrs are the workload attributes a machine object records. (user
// is refused above; build too.)
var machineAttrs = []string{"image", "command", "entrypoint", "env", "workdir", "cpus", "memory", "labels", "egress"}

// checkKeys rejects map keys that cannot be passed as KEY=VALUE, and, for
// labels, keys that would shadow bottlefile's own. Values still unknown
// are left for apply.
func checkKeys(what string, v cty.Value, labels bool) error {
	if v == cty.NilVal || !v.IsWhollyKnown() {
		return nil
	}
	m, err := drivers.StringMap(v)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	for k, val := range m {
		if err := checkKey(what, k, val, labels); err != nil {
			return err
		}
	}
	return nil
}

func checkKey(what, k, v string, labels bool) error {
	switch {
	case k == "":
		return fmt.Errorf("%s: a key is empty", what)
	case strings.ContainsAny(k, "=\x00"):
		return fmt.Errorf("%s: key %q contains '=' or a NUL byte, which smolvm's KEY=VALUE form cannot carry", what, k)
	case strings.ContainsRune(v, 0):
		return fmt.Errorf("%s: the value of %q contains a NUL byte", what, k)
	case labels && strings.HasPrefix(k, drivers.LabelPrefix):
		return fmt.Errorf("%s: label %q is reserved: %s* labels are set by bottlefile", what, k, drivers.LabelPrefix)
	}
	return nil
}

// cpuCount checks cpus: whole vCPUs from 1 to 255, or 0 for smolvm's
// default.
func cpuCount(f float64) (int, error) {
	if f < 0 || f > maxCPUs || f != math.Trunc(f) || math.IsNaN(f) {
		return 0, fmt.Errorf("cpus: smolvm gives a machine whole vCPUs from 1 to %d; %g is not one of them", maxCPUs, f)
	}
	return int(f), nil
}

// memoryMiB turns memory in bytes into smolvm's MiB, rounding up; 0 is
// smolvm's default.
func memoryMiB(bytes int64) (int64, error) {
	if bytes < 0 {
		return 0, fmt.Errorf("memory: must not be negative, got %d", bytes)
	}
	m := bytes / mib
	if bytes%mib != 0 {
		m++
	}
	if m > maxMemMiB {
		return 0, fmt.Errorf("memory: %d bytes is more than smolvm's limit of %d MiB", bytes, int64(maxMemMiB))
	}
	return m, nil
}
