package smolvm

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/zclconf/go-cty/cty"

	"github.com/bottlefile/bottlefile/drivers"
)

func TestPlanObject(t *testing.T) {
	t.Parallel()
	d := newDriver(nil, nil) // Plan needs neither Configure nor a runner
	a := agentSpec("coder", "ghcr.io/acme/agent:1.4")
	a.Workload = drivers.WithWorkloadAttr(a.Workload, "env", cty.MapVal(map[string]cty.Value{"KEY": cty.StringVal("secret").Mark(sensitive)}))
	a.Workload = drivers.WithWorkloadAttr(a.Workload, "workdir", cty.UnknownVal(cty.String))
	a.Workload = drivers.WithWorkloadAttr(a.Workload, "entrypoint", cty.NilVal) // unset by the core: a typed null
	obj := planOne(t, d, a)

	if obj.Addr != "agent.coder" || obj.Kind != "machine" || !obj.Workload || len(obj.InPlace) != 0 || len(obj.DependsOn) != 0 {
		t.Errorf("object: %+v", obj)
	}
	var names []string
	for n := range obj.Attrs {
		names = append(names, n)
	}
	slices.Sort(names)
	if want := []string{"command", "cpus", "egress", "entrypoint", "env", "image", "labels", "memory", "workdir"}; !slices.Equal(names, want) {
		t.Errorf("attributes %v, want %v", names, want)
	}
	if !obj.Attrs["env"].ContainsMarked() {
		t.Error("the sensitive mark on env was dropped")
	}
	if obj.Attrs["workdir"].IsKnown() {
		t.Error("an unknown workdir became known")
	}
	if e := obj.Attrs["entrypoint"]; !e.IsNull() || !e.Type().Equals(cty.List(cty.String)) {
		t.Errorf("entrypoint = %#v, want a null list of string", e)
	}
}

func TestPlanErrors(t *testing.T) {
	t.Parallel()
	d := newDriver(nil, nil)
	tests := []struct {
		name string
		edit func(a *drivers.AgentSpec)
		want string
	}{
		{"build", func(a *drivers.AgentSpec) {
			a.Workload = drivers.WithWorkloadAttr(a.Workload, "image", cty.NullVal(cty.String))
			a.Workload = drivers.WithWorkloadAttr(a.Workload, "build", drivers.BuildValue("/src", ""))
		}, "smolvm cannot build images"},
		{"no image", func(a *drivers.AgentSpec) {
			a.Workload = drivers.WithWorkloadAttr(a.Workload, "image", cty.NullVal(cty.String))
		}, "needs an image"},
		{"empty image", func(a *drivers.AgentSpec) {
			a.Workload = drivers.WithWorkloadAttr(a.Workload, "image", cty.StringVal(" "))
		}, "image: is empty"},
		{"stdin image", func(a *drivers.AgentSpec) {
			a.Workload = drivers.WithWorkloadAttr(a.Workload, "image", cty.StringVal("-"))
		}, "standard input"},
		{"user", func(a *drivers.AgentSpec) {
			a.Workload = drivers.WithWorkloadAttr(a.Workload, "user", cty.StringVal("agent"))
		}, "user is not supported by the smolvm driver: it has no user setting"},
		{"fractional cpus", func(a *drivers.AgentSpec) {
			a.Workload = drivers.WithWorkloadAttr(a.Workload, "cpus", cty.NumberFloatVal(1.5))
		}, "whole vCPUs from 1 to 255; 1.5"},
		{"too many cpus", func(a *drivers.AgentSpec) {
			a.Workload = drivers.WithWorkloadAttr(a.Workload, "cpus", cty.NumberIntVal(256))
		}, "whole vCPUs"},
		{"negative memory", func(a *drivers.AgentSpec) {
			a.Workload = drivers.WithWorkloadAttr(a.Workload, "memory", cty.NumberIntVal(-1))
		}, "memory: must not be negative"},
		{"huge memory", func(a *drivers.AgentSpec) {
			a.Workload = drivers.WithWorkloadAttr(a.Workload, "memory", cty.NumberIntVal(1<<53))
		}, "smolvm's limit"},
		{"reserved label", func(a *drivers.AgentSpec) {
			a.Workload = drivers.WithWorkloadAttr(a.Workload, "labels", cty.MapVal(map[string]cty.Value{"io.bottlefile.lineage": cty.StringVal("x")}))
		}, "reserved"},
		{"env key with =", func(a *drivers.AgentSpec) {
			a.Workload = drivers.WithWorkloadAttr(a.Workload, "env", cty.MapVal(map[string]cty.Value{"A=B": cty.StringVal("x")}))
		}, "contains '='"},
		{"dot in name", func(a *drivers.AgentSpec) { a.Name, a.Addr = "a.b", "" }, `contains '.'`},
		{"trailing hyphen", func(a *drivers.AgentSpec) { a.Name, a.Addr = "coder-", "" }, "must not end with '-'"},
		{"double hyphen", func(a *drivers.AgentSpec) { a.Name, a.Addr = "-coder", "" }, "must not contain '--'"},
		{"too long", func(a *drivers.AgentSpec) { a.Name, a.Addr = strings.Repeat("x", 117), "" }, "smolvm allows 128"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := agentSpec("coder", "alpine:3")
			tt.edit(&a)
			_, err := d.Plan(context.Background(), drivers.PlanRequest{Agent: a})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Plan: error %v, want one containing %q", err, tt.want)
			}
			if err != nil && !strings.HasPrefix(err.Error(), "agent.") {
				t.Errorf("error %q does not start with the agent's address", err)
			}
		})
	}
	// The longest name that fits, and unknown values, plan.
	a := agentSpec(strings.Repeat("x", 116), "alpine:3")
	for name, v := range map[string]cty.Value{"cpus": cty.UnknownVal(cty.Number), "memory": cty.UnknownVal(cty.Number), "image": cty.UnknownVal(cty.String)} {
		a.Workload = drivers.WithWorkloadAttr(a.Workload, name, v)
	}
	if _, err := d.Plan(context.Background(), drivers.PlanRequest{Agent: a}); err != nil {
		t.Errorf("Plan of a 116-character agent name with unknown values: %v", err)
	}
}

func TestMachineName(t *testing.T) {
	t.Parallel()
	got, err := machineName("6F1E2D3C-4b5a-6978", "agent.coder_1")
	if err != nil || got != "bf-6f1e2d3c-coder_1" {
		t.Errorf("machineName = %q, %v", got, err)
	}
	for _, tc := range []struct{ lineage, addr string }{
		{"", "agent.coder"},
		{"abc", "snapshot.x"},
		{"abc", "agent.x-"},
		{"abcdefgh", "agent." + strings.Repeat("y", 117)},
	} {
		if name, err := machineName(tc.lineage, tc.addr); err == nil {
			t.Errorf("machineName(%q, %q) = %q, want an error", tc.lineage, tc.addr, name)
		}
	}
}

func TestMemoryAndCPUs(t *testing.T) {
	t.Parallel()
	for bytes, want := range map[int64]int64{0: 0, 1: 1, mib: 1, mib + 1: 2, 4 << 30: 4096, 1e9: 954} {
		if got, err := memoryMiB(bytes); err != nil || got != want {
			t.Errorf("memoryMiB(%d) = %d, %v; want %d", bytes, got, err, want)
		}
	}
	for _, ok := range []float64{0, 1, 255} {
		if _, err := cpuCount(ok); err != nil {
			t.Errorf("cpuCount(%g): %v", ok, err)
		}
	}
	for _, bad := range []float64{-1, 0.5, 256} {
		if _, err := cpuCount(bad); err == nil {
			t.Errorf("cpuCount(%g) accepted", bad)
		}
	}
}

func TestImageSource(t *testing.T) {
	t.Parallel()
	tests := []struct{ ref, image, from string }{
		{"alpine:3", "alpine:3", ""},
		{"ghcr.io/acme/agent@sha256:abc", "ghcr.io/acme/agent@sha256:abc", ""},
		{"/abs/agent.tar", "/abs/agent.tar", ""},
		{"./agent.tar.gz", "/base/agent.tar.gz", ""},
		{"agent.tgz", "/base/agent.tgz", ""},
		{"../rootfs", "/rootfs", ""},
		{"snap.smolmachine", "", "/base/snap.smolmachine"},
		{"/packs/snap.smolmachine", "", "/packs/snap.smolmachine"},
	}
	for _, tt := range tests {
		image, from, err := imageSource(tt.ref, "/base")
		if err != nil || image != tt.image || from != tt.from {
			t.Errorf("imageSource(%q) = %q, %q, %v; want %q, %q", tt.ref, image, from, err, tt.image, tt.from)
		}
	}
}
