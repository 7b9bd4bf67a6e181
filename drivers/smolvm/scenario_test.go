package smolvm

import (
	"context"
	"testing"
	"time"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/drivertest"
)

// TestConformance runs the suite every driver passes against the fake.
func TestConformance(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	drivertest.TestDriver(t, drivertest.Harness{
		NewDriver: func(t *testing.T) drivers.Driver { return f.withState(t, "vm", t.TempDir()) },
		Image:     "alpine:3",
		StopOutside: func(t *testing.T, _ string, obj drivers.LiveObject) {
			if _, stderr, code := f.cli(t, "", "machine", "stop", "--name", obj.ID); code != 0 {
				t.Fatalf("stopping %s outside the driver: exit %d: %s", obj.ID, code, stderr)
			}
		},
		ImportArchive: func(t *testing.T) []byte { return dockerSave(t) },
		RemoveOutside: func(t *testing.T, _ string, obj drivers.LiveObject) {
			if _, stderr, code := f.cli(t, "", "machine", "delete", "--name", obj.ID, "-f"); code != 0 {
				t.Fatalf("deleting %s outside the driver: exit %d: %s", obj.ID, code, stderr)
			}
		},
	})
}

// TestScenario goes beyond the conformance suite with what only a
// workload-owning driver does: a machine stopped outside bottlefile reads
// as not running and starts again, deletes are idempotent, and a delete
// without a recorded id finds the machine by name.
func TestScenario(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	runScenario(t, f.driver(t), "alpine:3", func(name string) {
		if _, stderr, code := f.cli(t, "", "machine", "stop", "--name", name); code != 0 {
			t.Fatalf("stopping %s outside the driver: exit %d: %s", name, code, stderr)
		}
	})
}

// runScenario is shared with the real-binary test. stopOutside stops a
// machine behind the driver's back.
func runScenario(t *testing.T, d drivers.Driver, image string, stopOutside func(name string)) {
	t.Helper()
	ctx := t.Context()
	lineage := newLineage()
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		read, err := d.Read(cctx, drivers.ReadRequest{Lineage: lineage})
		if err != nil {
			t.Errorf("cleanup: %v", err)
			return
		}
		for _, o := range read.Objects {
			if _, err := d.Apply(cctx, drivers.ApplyRequest{Op: drivers.OpDelete, Lineage: lineage, ID: o.ID, Object: drivers.Object{Addr: o.Addr, Kind: o.Kind}}); err != nil {
				t.Errorf("cleanup: %v", err)
			}
		}
	})
	read := func() []drivers.LiveObject {
		t.Helper()
		resp, err := d.Read(ctx, drivers.ReadRequest{Lineage: lineage})
		if err != nil {
			t.Fatalf("Read: %v", err)
		}
		return resp.Objects
	}

	obj := planOne(t, d, agentSpec("coder", image))
	if len(read()) != 0 {
		t.Fatal("Read of a fresh lineage is not empty")
	}
	created, err := d.Apply(ctx, drivers.ApplyRequest{Op: drivers.OpCreate, Lineage: lineage, Object: obj, Hash: "hash-1"})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	live := read()
	if len(live) != 1 {
		t.Fatalf("Read after create: %v", live)
	}
	if got := live[0]; got.Addr != "agent.coder" || got.Kind != "machine" || got.ID != created.ID || got.Name != created.ID || got.Hash != "hash-1" || !got.Running || got.ImageID != image {
		t.Fatalf("Read after create: %+v (create returned id %q)", got, created.ID)
	}
	if created.Computed["name"] != created.ID {
		t.Errorf("Computed = %v, want name %q", created.Computed, created.ID)
	}

	stopOutside(created.ID)
	if live := read(); len(live) != 1 || live[0].Running {
		t.Fatalf("Read after a stop outside bottlefile: %+v", live)
	}
	started, err := d.Apply(ctx, drivers.ApplyRequest{Op: drivers.OpStart, Lineage: lineage, Object: obj, Hash: "hash-1", ID: created.ID})
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	if started.ID != created.ID {
		t.Errorf("start returned id %q, want %q", started.ID, created.ID)
	}
	if live := read(); len(live) != 1 || !live[0].Running {
		t.Fatalf("Read after start: %+v", live)
	}

	del := drivers.ApplyRequest{Op: drivers.OpDelete, Lineage: lineage, ID: created.ID, Object: drivers.Object{Addr: obj.Addr, Kind: obj.Kind}}
	if _, err := d.Apply(ctx, del); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if live := read(); len(live) != 0 {
		t.Fatalf("Read after delete: %+v", live)
	}
	if _, err := d.Apply(ctx, del); err != nil {
		t.Errorf("deleting a machine that is already gone: %v", err)
	}
	del.ID = ""
	if _, err := d.Apply(ctx, del); err != nil {
		t.Errorf("deleting with no recorded id when nothing exists: %v", err)
	}

	// A delete with no recorded id (a crash before the record) finds the
	// machine by the name the lineage gives it.
	if _, err := d.Apply(ctx, drivers.ApplyRequest{Op: drivers.OpCreate, Lineage: lineage, Object: obj, Hash: "hash-2"}); err != nil {
		t.Fatalf("create again: %v", err)
	}
	if _, err := d.Apply(ctx, del); err != nil {
		t.Fatalf("delete with no recorded id: %v", err)
	}
	if live := read(); len(live) != 0 {
		t.Fatalf("Read after delete with no recorded id: %+v", live)
	}
}
