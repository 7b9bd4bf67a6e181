package operations

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"

	"github.com/bottlefile/bottlefile/addrs"
	"github.com/bottlefile/bottlefile/drivers"
)

// Live is one object of this state's lineage as its runtime reports it
// now. It is what the day-to-day commands act on: logs reads its log,
// status lists it, exec runs in it, egress denials reads a gateway's.
type Live struct {
	Addr    string
	Kind    string
	ID      string
	Runtime string // the runtime's name in the Bottlefile
	Driver  string // the name of the runtime's driver
	Running bool   // workloads only
	// Unfinished marks an object an apply was cut off while setting up.
	Unfinished bool

	lineage string
	obj     drivers.LiveObject
	driver  drivers.Driver
}

// Lineage is the lineage of the state: "" when nothing was ever applied
// here, and so nothing is live.
func (op *Operation) Lineage() string {
	switch {
	case op == nil:
		return ""
	case op.Store == nil:
		return op.released
	}
	return op.Store.Lineage()
}

// ReleaseState closes the state early, releasing its lock: for a command
// that goes on with what it found (logs -f follows a log) and needs the
// state no more. Lineage still answers; Close is still safe.
func (op *Operation) ReleaseState() {
	if op == nil || op.Store == nil {
		return
	}
	op.released = op.Store.Lineage()
	op.Store.Close()
	op.Store = nil
}

// FindLive finds the live object at addr (agent.NAME, a sidecar's or a
// gateway's address). It asks the runtime the state records addr on first,
// then every other runtime in name order, and stops at the first that has
// it, so a runtime after that is never contacted. An object no runtime
// reports is an error that says so.
func (op *Operation) FindLive(ctx context.Context, addr string) (Live, hcl.Diagnostics) {
	lineage := op.Lineage()
	if lineage == "" {
		return Live{}, hcl.Diagnostics{errNothingApplied()}
	}
	var order []string
	if op.Store != nil {
		rec, ok, err := op.Store.Get(addr)
		if err != nil {
			return Live{}, hcl.Diagnostics{errorDiag("Cannot read state", err.Error())}
		}
		if ok {
			order = append(order, rec.Runtime)
		}
	}
	for _, name := range op.runtimeNames() {
		if len(order) == 0 || order[0] != name {
			order = append(order, name)
		}
	}
	known := op.knownAddresses()
	for _, name := range order {
		objs, diags := op.readRuntime(ctx, name, lineage)
		if diags.HasErrors() {
			return Live{}, diags
		}
		for _, l := range objs {
			if l.Addr == addr {
				return l, nil
			}
			known = append(known, l.Addr)
		}
	}
	return Live{}, hcl.Diagnostics{unknownAddress("No such workload", fmt.Sprintf("Nothing of this state (lineage %s) carries the address %s on any runtime; check the address with `bottlefile state list`, or apply first.", lineage, addr), addr, known)}
}

// LiveObjects asks every runtime, in name order, for what it holds of this
// state's lineage: all of it, or with agent (agent.NAME), the objects of
// that agent (the agent, its sidecars, its gateway and network). Each
// runtime's objects come in address order.
func (op *Operation) LiveObjects(ctx context.Context, agent string) ([]Live, hcl.Diagnostics) {
	lineage := op.Lineage()
	if lineage == "" {
		return nil, hcl.Diagnostics{errNothingApplied()}
	}
	var out []Live
	known := op.knownAddresses()
	for _, name := range op.runtimeNames() {
		objs, diags := op.readRuntime(ctx, name, lineage)
		if diags.HasErrors() {
			return nil, diags
		}
		for _, l := range objs {
			known = append(known, l.Addr)
			if agent == "" || l.Addr == agent || strings.HasPrefix(l.Addr, agent+".") {
				out = append(out, l)
			}
		}
	}
	if agent != "" && len(out) == 0 && !slices.Contains(known, agent) {
		return nil, hcl.Diagnostics{unknownAddress("No such agent", fmt.Sprintf("Neither the configuration, the state nor any runtime knows %s.", agent), agent, known)}
	}
	return out, nil
}

// knownAddresses are the addresses the configuration declares and the
// state records: what an address on the command line is checked against.
func (op *Operation) knownAddresses() []string {
	var known []string
	if op.Config != nil {
		for name := range op.Config.Agents {
			known = append(known, addrs.Agent(name).String())
		}
		for name := range op.Config.Snapshots {
			known = append(known, addrs.Snapshot(name).String())
		}
	}
	if op.Store != nil {
		if recs, err := op.Store.Records(); err == nil {
			for _, r := range recs {
				known = append(known, r.Addr)
			}
		}
	}
	return known
}

// readRuntime reads what runtime name holds of lineage, in address order.
func (op *Operation) readRuntime(ctx context.Context, name, lineage string) ([]Live, hcl.Diagnostics) {
	return op.readRuntimeWith(ctx, name, drivers.ReadRequest{Lineage: lineage})
}

// readRuntimeWith reads runtime name with req, in address order.
func (op *Operation) readRuntimeWith(ctx context.Context, name string, req drivers.ReadRequest) ([]Live, hcl.Diagnostics) {
	lineage := req.Lineage
	rt, ok := op.Runtimes[name]
	if !ok {
		return nil, nil
	}
	resp, err := rt.Driver.Read(ctx, req)
	if err != nil {
		return nil, hcl.Diagnostics{errorDiag(fmt.Sprintf("Cannot refresh runtime %q", name), err.Error())}
	}
	// What the state records is known by its id first: an object moved to
	// another address (a moved block, state mv) keeps the labels it was
	// made with. An object another runtime block on the same engine made
	// or records is that runtime's, not this one's.
	byID := map[string]Record{}
	if op.Store != nil {
		if recs, err := op.Store.Records(); err == nil {
			for _, r := range recs {
				if r.ID != "" {
					byID[r.ID] = r
				}
			}
		}
	}
	other := func(runtime string) bool {
		_, declared := op.Runtimes[runtime]
		return runtime != "" && runtime != name && declared
	}
	out := make([]Live, 0, len(resp.Objects))
	for _, obj := range resp.Objects {
		if obj.Leftover != "" {
			continue // what a cut-off run left is no address's object (the next apply removes it)
		}
		if r, ok := byID[obj.ID]; ok {
			if other(r.Runtime) {
				continue
			}
			obj.Addr = r.Addr
		} else if other(obj.Runtime) {
			continue
		}
		out = append(out, Live{
			Addr: obj.Addr, Kind: obj.Kind, ID: obj.ID, Runtime: name, Driver: rt.Driver.Name(),
			Running: obj.Running, Unfinished: obj.Unfinished,
			lineage: lineage, obj: obj, driver: rt.Driver,
		})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Addr < out[j].Addr })
	return out, nil
}

func (op *Operation) runtimeNames() []string {
	names := make([]string, 0, len(op.Runtimes))
	for name := range op.Runtimes {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

func errNothingApplied() *hcl.Diagnostic {
	return errorDiag("Nothing applied yet", "this state has no lineage: nothing was ever applied here, so nothing of it is live")
}

// Logs copies the object's log to stdout and stderr, as its workload wrote
// it; with follow, until ctx is done. An object whose driver keeps no log,
// or that keeps none itself (a network), is an error that says so.
func (l Live) Logs(ctx context.Context, follow bool, stdout, stderr io.Writer) hcl.Diagnostics {
	return l.LogsWith(ctx, LogOptions{Follow: follow}, stdout, stderr)
}

// LogsWith copies the object's log as Logs does, with options.
func (l Live) LogsWith(ctx context.Context, o LogOptions, stdout, stderr io.Writer) hcl.Diagnostics {
	if l.driver == nil {
		return hcl.Diagnostics{errorDiag("No such workload", "no live object was found")}
	}
	lr, ok := drivers.As[drivers.LogReader](l.driver)
	if !ok {
		return hcl.Diagnostics{errorDiag("Logs not available", fmt.Sprintf("the %s driver of runtime %q keeps no logs", l.Driver, l.Runtime))}
	}
	if err := lr.Logs(ctx, l.lineage, l.obj, o.driverOptions(), stdout, stderr); err != nil {
		return hcl.Diagnostics{errorDiag("Cannot read the log", err.Error())}
	}
	return nil
}

// ExecOptions is one command to run in a live workload.
type ExecOptions struct {
	// Command is the program and its arguments; empty runs the image's
	// shell, /bin/sh.
	Command []string
	// TTY gives the command a terminal of Height rows and Width columns
	// (0 when unknown); Stdin is then its keystrokes.
	TTY           bool
	Height, Width uint
	// Stdin, when not nil, is copied to the command's standard input.
	Stdin          io.Reader
	Stdout, Stderr io.Writer
}

// DefaultShell is what exec runs without a command.
const DefaultShell = "/bin/sh"

// Exec runs a command in the object (an agent or a sidecar) and returns
// its exit code. A driver that cannot exec, or a command that could not be
// run at all, is an error.
func (l Live) Exec(ctx context.Context, o ExecOptions) (int, hcl.Diagnostics) {
	if l.driver == nil {
		return 0, hcl.Diagnostics{errorDiag("No such workload", "no live object was found")}
	}
	x, ok := drivers.As[drivers.Execer](l.driver)
	if !ok {
		return 0, hcl.Diagnostics{errorDiag("Exec not available", fmt.Sprintf("the %s driver of runtime %q cannot run commands in its workloads", l.Driver, l.Runtime))}
	}
	if !l.Running {
		return 0, hcl.Diagnostics{errorDiag("Workload not running", fmt.Sprintf("%s is not running (%s); commands run only in a running workload: apply starts it again", l.Addr, stateWord(l.obj)))}
	}
	cmd := o.Command
	if len(cmd) == 0 {
		cmd = []string{DefaultShell}
	}
	code, err := x.Exec(ctx, l.lineage, l.obj, drivers.ExecRequest{
		Command: cmd, TTY: o.TTY, Height: o.Height, Width: o.Width,
		Stdin: o.Stdin, Stdout: o.Stdout, Stderr: o.Stderr,
	})
	if err != nil {
		return 0, hcl.Diagnostics{errorDiag("Cannot run the command", err.Error())}
	}
	return code, nil
}

// stateWord says how a workload that is not running stands.
func stateWord(o drivers.LiveObject) string {
	switch o.State {
	case "":
		return "stopped"
	case drivers.StateExited:
		return fmt.Sprintf("exited with code %d", o.ExitCode)
	case drivers.StateCreated:
		return "never started"
	}
	return o.State
}
