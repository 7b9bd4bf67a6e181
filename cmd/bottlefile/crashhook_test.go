package main

import (
	"testing"

	"github.com/bottlefile/bottlefile/drivers"
)

// TestCrashHookKeepsOptionalInterfaces: the crash tests' wrapper leaves
// each real driver with every optional interface it has, so a crash test
// plans and applies through the same paths as production (a docker
// migration exports; a plan reads what a workload wrote).
func TestCrashHookKeepsOptionalInterfaces(t *testing.T) {
	t.Setenv(CrashAfterEnv, "1000")
	reg := registry()
	hooked := crashHook(reg)
	checks := map[string]func(drivers.Driver) bool{
		"Closer":           func(d drivers.Driver) bool { _, ok := drivers.As[drivers.Closer](d); return ok },
		"WrittenReader":    func(d drivers.Driver) bool { _, ok := drivers.As[drivers.WrittenReader](d); return ok },
		"SnapshotExporter": func(d drivers.Driver) bool { _, ok := drivers.As[drivers.SnapshotExporter](d); return ok },
		"SnapshotImporter": func(d drivers.Driver) bool { _, ok := drivers.As[drivers.SnapshotImporter](d); return ok },
		"LogReader":        func(d drivers.Driver) bool { _, ok := drivers.As[drivers.LogReader](d); return ok },
		"ExitDescriber":    func(d drivers.Driver) bool { _, ok := drivers.As[drivers.ExitDescriber](d); return ok },
		"Settler":          func(d drivers.Driver) bool { _, ok := drivers.As[drivers.Settler](d); return ok },
		"Execer":           func(d drivers.Driver) bool { _, ok := drivers.As[drivers.Execer](d); return ok },
	}
	for name, factory := range reg {
		inner, err := factory(nil)
		if err != nil {
			t.Fatal(err)
		}
		wrapped, err := hooked[name](nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := wrapped.(*drivers.Wrapper); !ok {
			t.Fatalf("%s: the crash hook did not wrap the driver (%T)", name, wrapped)
		}
		for iface, has := range checks {
			if got, want := has(wrapped), has(inner); got != want {
				t.Errorf("%s wrapped by the crash hook: has %s %v, unwrapped %v", name, iface, got, want)
			}
		}
		if got, want := wrapped.Declare().Capabilities.Egress, inner.Declare().Capabilities.Egress; got != want {
			t.Errorf("%s wrapped: egress capabilities %+v, want %+v", name, got, want)
		}
	}
}
