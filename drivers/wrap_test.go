package drivers_test

import (
	"bytes"
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/docker"
	"github.com/bottlefile/bottlefile/drivers/drivertest"
	"github.com/bottlefile/bottlefile/drivers/smolvm"
)

// bare is a driver with no optional interface at all.
type bare struct{ drivers.Driver }

// optional lists every optional interface of package drivers, each as a
// check of whether a driver has it through As.
var optional = map[string]func(drivers.Driver) bool{
	"Closer":           func(d drivers.Driver) bool { _, ok := drivers.As[drivers.Closer](d); return ok },
	"WrittenReader":    func(d drivers.Driver) bool { _, ok := drivers.As[drivers.WrittenReader](d); return ok },
	"SnapshotExporter": func(d drivers.Driver) bool { _, ok := drivers.As[drivers.SnapshotExporter](d); return ok },
	"SnapshotImporter": func(d drivers.Driver) bool { _, ok := drivers.As[drivers.SnapshotImporter](d); return ok },
	"LogReader":        func(d drivers.Driver) bool { _, ok := drivers.As[drivers.LogReader](d); return ok },
	"ExitDescriber":    func(d drivers.Driver) bool { _, ok := drivers.As[drivers.ExitDescriber](d); return ok },
	"Settler":          func(d drivers.Driver) bool { _, ok := drivers.As[drivers.Settler](d); return ok },
	"Execer":           func(d drivers.Driver) bool { _, ok := drivers.As[drivers.Execer](d); return ok },
	"BottleForgetter":  func(d drivers.Driver) bool { _, ok := drivers.As[drivers.BottleForgetter](d); return ok },
	"EngineIdentifier": func(d drivers.Driver) bool { _, ok := drivers.As[drivers.EngineIdentifier](d); return ok },
	"EngineNamer":      func(d drivers.Driver) bool { _, ok := drivers.As[drivers.EngineNamer](d); return ok },
	"Stopper":          func(d drivers.Driver) bool { _, ok := drivers.As[drivers.Stopper](d); return ok },
	"ActivityReader":   func(d drivers.Driver) bool { _, ok := drivers.As[drivers.ActivityReader](d); return ok },
}

// TestWrapperKeepsOptionalInterfaces: a wrapped driver has exactly the
// optional interfaces its inner driver has, through As, also wrapped
// twice, and keeps the inner driver's name and declaration.
func TestWrapperKeepsOptionalInterfaces(t *testing.T) {
	dk, _ := docker.New(nil)
	sv, _ := smolvm.New(nil)
	for name, inner := range map[string]drivers.Driver{
		"docker": dk, "smolvm": sv, "fake": &drivertest.Fake{}, "bare": bare{&drivertest.Fake{}},
	} {
		t.Run(name, func(t *testing.T) {
			once := &drivers.Wrapper{Inner: inner}
			twice := &drivers.Wrapper{Inner: once}
			has := 0
			for iface, check := range optional {
				want := check(inner)
				if want {
					has++
				}
				if got := check(once); got != want {
					t.Errorf("wrapped: As[%s] = %v, the inner driver: %v", iface, got, want)
				}
				if got := check(twice); got != want {
					t.Errorf("wrapped twice: As[%s] = %v, the inner driver: %v", iface, got, want)
				}
			}
			if name != "bare" && has == 0 {
				t.Errorf("the %s driver has no optional interface: the test checks nothing", name)
			}
			if once.Name() != inner.Name() {
				t.Errorf("Name = %q, want %q", once.Name(), inner.Name())
			}
			if got, want := once.Declare().Capabilities.Snapshots, inner.Declare().Capabilities.Snapshots; got != want {
				t.Errorf("Declare().Capabilities.Snapshots = %+v, want %+v", got, want)
			}
		})
	}
}

// TestWrapperCallsThrough: an optional interface found through a wrapper
// is the wrapper's, which calls the inner driver; AfterApply sees every
// Apply.
func TestWrapperCallsThrough(t *testing.T) {
	f := &drivertest.Fake{}
	var seen []drivers.Op
	w := &drivers.Wrapper{Inner: f, AfterApply: func(req drivers.ApplyRequest, _ drivers.ApplyResponse, _ error) {
		seen = append(seen, req.Op)
	}}
	ex, ok := drivers.As[drivers.SnapshotExporter](w)
	if !ok {
		t.Fatal("As[SnapshotExporter] of a wrapped fake: not found")
	}
	if ex != drivers.SnapshotExporter(w) {
		t.Error("As returned the inner driver, not the wrapper: its watch would be bypassed")
	}
	// The fake has no such snapshot: the error is the fake's own.
	if err := ex.ExportSnapshot(context.Background(), "nothing", &bytes.Buffer{}); err == nil {
		t.Error("ExportSnapshot of an unknown snapshot through the wrapper succeeded")
	}
	if _, ok := drivers.As[drivers.ExitDescriber](w); ok {
		t.Error("As[ExitDescriber] found one through a wrapped fake, which has none")
	}
	if _, err := w.DescribeExit(context.Background(), "l", drivers.LiveObject{}); err == nil {
		t.Error("DescribeExit through a wrapper of a driver without it succeeded")
	}
	_, _ = w.Apply(context.Background(), drivers.ApplyRequest{Op: drivers.OpDelete, Lineage: "l", Object: drivers.Object{Addr: "agent.a", Kind: drivertest.KindContainer}})
	if len(seen) != 1 || seen[0] != drivers.OpDelete || f.ApplyCalls != 1 {
		t.Errorf("AfterApply saw %v, the fake %d Apply calls; want one delete", seen, f.ApplyCalls)
	}
	if w.Close(); !f.CloseCalled {
		t.Error("Close did not reach the fake")
	}
}

// TestWrapperKnowsEveryOptionalInterface: every interface package drivers
// declares besides Driver is in the table above, and a Wrapper has it
// itself, so a new optional interface cannot be left out of Wrapper.
func TestWrapperKnowsEveryOptionalInterface(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	found := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok {
				continue
			}
			for _, spec := range gd.Specs {
				ts, ok := spec.(*ast.TypeSpec)
				if !ok || !ts.Name.IsExported() || ts.Name.Name == "Driver" {
					continue
				}
				if _, ok := ts.Type.(*ast.InterfaceType); !ok {
					continue
				}
				found++
				if _, ok := optional[ts.Name.Name]; !ok {
					t.Errorf("%s (%s) is not in the table of optional interfaces: add it there and to Wrapper", ts.Name.Name, name)
				}
				iface, ok := optionalTypes[ts.Name.Name]
				if !ok {
					t.Errorf("%s (%s) is not in optionalTypes", ts.Name.Name, name)
					continue
				}
				if !reflect.TypeFor[*drivers.Wrapper]().Implements(iface) {
					t.Errorf("Wrapper does not implement %s: a wrapped driver would hide it from its callers' watch", ts.Name.Name)
				}
			}
		}
	}
	if found != len(optional) {
		t.Errorf("found %d optional interfaces in package drivers, the table has %d", found, len(optional))
	}
}

// optionalTypes are the optional interfaces' types, by name.
var optionalTypes = map[string]reflect.Type{
	"Closer":           reflect.TypeFor[drivers.Closer](),
	"WrittenReader":    reflect.TypeFor[drivers.WrittenReader](),
	"SnapshotExporter": reflect.TypeFor[drivers.SnapshotExporter](),
	"SnapshotImporter": reflect.TypeFor[drivers.SnapshotImporter](),
	"LogReader":        reflect.TypeFor[drivers.LogReader](),
	"ExitDescriber":    reflect.TypeFor[drivers.ExitDescriber](),
	"Settler":          reflect.TypeFor[drivers.Settler](),
	"Execer":           reflect.TypeFor[drivers.Execer](),
	"BottleForgetter":  reflect.TypeFor[drivers.BottleForgetter](),
	"EngineIdentifier": reflect.TypeFor[drivers.EngineIdentifier](),
	"EngineNamer":      reflect.TypeFor[drivers.EngineNamer](),
	"Stopper":          reflect.TypeFor[drivers.Stopper](),
	"ActivityReader":   reflect.TypeFor[drivers.ActivityReader](),
}
