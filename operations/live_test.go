package operations

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/drivertest"
	"github.com/bottlefile/bottlefile/state"
)

const twoRuntimes = `
runtime "here" {
  driver = "docker"
}

runtime "there" {
  driver = "smolvm"
}

agent "coder" {
  runtime = runtime.there
  image   = "busybox:1"
}
`

// logFake is the fake driver with a log: each object's log is its address.
type logFake struct{ *drivertest.Fake }

func (f logFake) Logs(ctx context.Context, lineage string, obj drivers.LiveObject, opts drivers.LogOptions, stdout, stderr io.Writer) error {
	if obj.Kind == drivertest.KindNetwork {
		return errors.New("a network keeps no log")
	}
	_, err := io.WriteString(stdout, f.Name()+" "+obj.Addr+"\n")
	return err
}

// noLogs is a driver that keeps no log.
type noLogs struct{ drivers.Driver }

// openTwo opens an operation on twoRuntimes whose runtimes are here and
// there, the state initialised with recs; it returns the lineage.
func openTwo(t *testing.T, here, there drivers.Driver, recs ...state.Record) (*Operation, string) {
	t.Helper()
	dir := writeRecords(t, recs...)
	if err := os.WriteFile(filepath.Join(dir, "Bottlefile"), []byte(twoRuntimes), 0o644); err != nil {
		t.Fatal(err)
	}
	reg := Registry{
		"docker": func(hclog.Logger) (drivers.Driver, error) { return here, nil },
		"smolvm": func(hclog.Logger) (drivers.Driver, error) { return there, nil },
	}
	op, diags := Open(context.Background(), Request{Dir: dir, LoadDir: dir, ReadOnly: true, Registry: reg})
	t.Cleanup(op.Close)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	return op, op.Lineage()
}

// TestFindLive: the runtime the state records an address on is asked
// first, then the others by name, and none after the one that has it.
func TestFindLive(t *testing.T) {
	here := &drivertest.Fake{DriverName: "docker"}
	there := &drivertest.Fake{DriverName: "smolvm"}
	op, lineage := openTwo(t, here, there,
		state.Record{Addr: "agent.coder", Kind: "container", Runtime: "there"})
	// A leftover on the runtime the agent moved away from.
	here.Put(lineage, drivers.LiveObject{Addr: "agent.coder", Kind: "container", ID: "old"})
	there.Put(lineage, drivers.LiveObject{Addr: "agent.coder", Kind: "container", ID: "new", Running: true})
	there.Put(lineage, drivers.LiveObject{Addr: "agent.coder.network", Kind: "network", ID: "net"})
	here.Put(lineage, drivers.LiveObject{Addr: "agent.gone", Kind: "container", ID: "gone"})

	l, diags := op.FindLive(context.Background(), "agent.coder")
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	if l.ID != "new" || l.Runtime != "there" || l.Driver != "smolvm" || !l.Running {
		t.Errorf("agent.coder: got %+v, want the one on the runtime the state records", l)
	}
	if here.ReadCalled {
		t.Errorf("runtime here was asked, though the recorded runtime had the object")
	}

	// Unrecorded: every runtime in name order, here before there.
	l, diags = op.FindLive(context.Background(), "agent.gone")
	if diags.HasErrors() || l.ID != "gone" || l.Runtime != "here" {
		t.Errorf("agent.gone: got %+v %v", l, diags)
	}

	_, diags = op.FindLive(context.Background(), "agent.nobody")
	if !diags.HasErrors() || diags[0].Summary != "No such workload" || !strings.Contains(diags[0].Detail, lineage) {
		t.Errorf("agent.nobody: %v", diags)
	}

	there.ReadFn = func(drivers.ReadRequest) (drivers.ReadResponse, error) {
		return drivers.ReadResponse{}, errors.New("engine down")
	}
	_, diags = op.FindLive(context.Background(), "agent.coder")
	if !diags.HasErrors() || diags[0].Summary != `Cannot refresh runtime "there"` {
		t.Errorf("a runtime that cannot be read: %v", diags)
	}
}

// TestLiveObjects: every runtime's objects of the lineage, by runtime then
// address; with an agent, only its own (not those of an agent whose name
// it starts).
func TestLiveObjects(t *testing.T) {
	here := &drivertest.Fake{DriverName: "docker"}
	there := &drivertest.Fake{DriverName: "smolvm"}
	op, lineage := openTwo(t, here, there)
	for _, o := range []struct {
		f    *drivertest.Fake
		addr string
	}{{there, "agent.coder"}, {there, "agent.coder.network"}, {here, "agent.coder.gateway"}, {here, "agent.coderx"}} {
		o.f.Put(lineage, drivers.LiveObject{Addr: o.addr, Kind: "container"})
	}
	here.Put("another-lineage", drivers.LiveObject{Addr: "agent.other", Kind: "container"})
	names := func(ls []Live) []string {
		var out []string
		for _, l := range ls {
			out = append(out, l.Runtime+" "+l.Addr)
		}
		return out
	}
	all, diags := op.LiveObjects(context.Background(), "")
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	want := []string{"here agent.coder.gateway", "here agent.coderx", "there agent.coder", "there agent.coder.network"}
	if got := names(all); !slices.Equal(got, want) {
		t.Errorf("all: got %q, want %q", got, want)
	}
	coder, _ := op.LiveObjects(context.Background(), "agent.coder")
	want = []string{"here agent.coder.gateway", "there agent.coder", "there agent.coder.network"}
	if got := names(coder); !slices.Equal(got, want) {
		t.Errorf("agent.coder: got %q, want %q", got, want)
	}
}

// TestLiveNothingApplied: a state with no lineage has nothing live, and no
// runtime is asked.
func TestLiveNothingApplied(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "Bottlefile"), []byte(twoRuntimes), 0o644); err != nil {
		t.Fatal(err)
	}
	here := &drivertest.Fake{DriverName: "docker"}
	there := &drivertest.Fake{DriverName: "smolvm"}
	op, diags := Open(context.Background(), Request{Dir: dir, LoadDir: dir, ReadOnly: true, Registry: Registry{"docker": here.Factory(), "smolvm": there.Factory()}})
	defer op.Close()
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	if _, diags := op.FindLive(context.Background(), "agent.coder"); !diags.HasErrors() || diags[0].Summary != "Nothing applied yet" {
		t.Errorf("FindLive: %v", diags)
	}
	if _, diags := op.LiveObjects(context.Background(), ""); !diags.HasErrors() {
		t.Errorf("LiveObjects: no error")
	}
	if here.ReadCalled || there.ReadCalled {
		t.Errorf("a runtime was asked")
	}
}

// TestLiveLogs: the log comes from the object's own runtime; a driver that
// keeps none, or an object that has none, is an error that says so; the
// state can be released before the log is read.
func TestLiveLogs(t *testing.T) {
	here := &drivertest.Fake{DriverName: "docker"}
	there := logFake{&drivertest.Fake{DriverName: "smolvm"}}
	op, lineage := openTwo(t, noLogs{here}, there)
	there.Put(lineage, drivers.LiveObject{Addr: "agent.coder", Kind: "container"})
	there.Put(lineage, drivers.LiveObject{Addr: "agent.coder.network", Kind: "network"})
	here.Put(lineage, drivers.LiveObject{Addr: "agent.old", Kind: "container"})

	l, diags := op.FindLive(context.Background(), "agent.coder")
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	op.ReleaseState()
	var out bytes.Buffer
	if diags := l.Logs(context.Background(), false, &out, io.Discard); diags.HasErrors() {
		t.Fatal(diags)
	}
	if out.String() != "smolvm agent.coder\n" {
		t.Errorf("log: %q", out.String())
	}
	if s, err := state.Open(op.Dir, state.Options{}); err != nil {
		t.Errorf("the state is still locked after ReleaseState: %v", err)
	} else {
		s.Close()
	}
	if op.Lineage() != lineage {
		t.Errorf("Lineage after ReleaseState: %q, want %q", op.Lineage(), lineage)
	}

	old, _ := op.FindLive(context.Background(), "agent.old")
	if diags := old.Logs(context.Background(), false, io.Discard, io.Discard); !diags.HasErrors() || diags[0].Summary != "Logs not available" || !strings.Contains(diags[0].Detail, `the docker driver of runtime "here"`) {
		t.Errorf("a driver with no logs: %v", diags)
	}

	nw, _ := op.LiveObjects(context.Background(), "agent.coder.network")
	if len(nw) != 1 {
		t.Fatalf("agent.coder.network: %+v", nw)
	}
	if diags := nw[0].Logs(context.Background(), false, io.Discard, io.Discard); !diags.HasErrors() || diags[0].Summary != "Cannot read the log" {
		t.Errorf("a network's log: %v", diags)
	}
}
