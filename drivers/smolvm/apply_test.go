package smolvm

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/zclconf/go-cty/cty"

	"github.com/bottlefile/bottlefile/drivers"
)

// sensitive stands in for the core's sensitive mark: the driver treats
// any mark as sensitive.
const sensitive = "sensitive"

func create(t *testing.T, d *Driver, lineage string, obj drivers.Object) drivers.ApplyResponse {
	t.Helper()
	resp, err := d.Apply(context.Background(), drivers.ApplyRequest{Op: drivers.OpCreate, Lineage: lineage, Object: obj, Hash: "cafe01"})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	return resp
}

// TestCallForms checks the exact argument lists of a create, start,
// readiness and delete cycle against the documented forms: the name as
// --name (never positional, and no -n on exec), the workload after "--",
// the three labels, and -f on delete.
func TestCallForms(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	d := f.driver(t)
	lineage := "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"
	name := "bf-0f1e2d3c-coder"

	a := agentSpec("coder", "ghcr.io/acme/agent:1.4")
	a.Workload = drivers.WithWorkloadAttr(a.Workload, "command", cty.ListVal([]cty.Value{cty.StringVal("claude"), cty.StringVal("--net")}))
	a.Workload = drivers.WithWorkloadAttr(a.Workload, "entrypoint", cty.ListVal([]cty.Value{cty.StringVal("/bin/tini"), cty.StringVal("--")}))
	a.Workload = drivers.WithWorkloadAttr(a.Workload, "env", cty.MapVal(map[string]cty.Value{
		"B_PLAIN": cty.StringVal("two words"),
		"A_PLAIN": cty.StringVal("1"),
		"API_KEY": cty.StringVal("sk-very-secret").Mark(sensitive),
	}))
	a.Workload = drivers.WithWorkloadAttr(a.Workload, "workdir", cty.StringVal("/workspace"))
	a.Workload = drivers.WithWorkloadAttr(a.Workload, "cpus", cty.NumberIntVal(2))
	a.Workload = drivers.WithWorkloadAttr(a.Workload, "memory", cty.NumberIntVal(4<<30+1)) // rounds up to 4097 MiB
	a.Workload = drivers.WithWorkloadAttr(a.Workload, "labels", cty.MapVal(map[string]cty.Value{"team": cty.StringVal("infra")}))
	obj := planOne(t, d, a)

	f.resetCalls(t)
	resp := create(t, d, lineage, obj)
	if resp.ID != name {
		t.Fatalf("create returned id %q, want %q", resp.ID, name)
	}
	want := [][]string{
		{"machine", "ls", "--json"},
		{"machine", "create", "--name", name, "--image", "ghcr.io/acme/agent:1.4",
			"--cpus", "2", "--mem", "4097",
			"-e", "API_KEY", "-e", "A_PLAIN=1", "-e", "B_PLAIN=two words",
			"-w", "/workspace",
			"--label", "team=infra",
			"--label", "io.bottlefile.lineage=" + lineage,
			"--label", "io.bottlefile.address=agent.coder",
			"--label", "io.bottlefile.config-hash=cafe01",
			"--label", "io.bottlefile.runtime=vm",
			"--", "/bin/tini", "--", "claude", "--net"},
		{"machine", "start", "--name", name},
		{"machine", "exec", "--name", name, "--", "true"},
	}
	checkCalls(t, f.calls(t), want)

	// What the machine got: labels from ls, env from inside the guest.
	m := f.machines(t)
	if len(m) != 1 || m[0].Labels["team"] != "infra" || m[0].Labels[drivers.LabelAddress] != "agent.coder" || m[0].State != "running" {
		t.Errorf("machine after create: %+v", m)
	}
	out, _, code := f.cli(t, "", "machine", "exec", "--name", name, "--", "env")
	if code != 0 || !strings.Contains(out, "API_KEY=sk-very-secret\n") || !strings.Contains(out, "B_PLAIN=two words\n") {
		t.Errorf("guest env: exit %d\n%s", code, out)
	}

	f.resetCalls(t)
	if _, err := d.Apply(context.Background(), drivers.ApplyRequest{Op: drivers.OpStart, Lineage: lineage, Object: obj, ID: name}); err != nil {
		t.Fatalf("start: %v", err)
	}
	if _, err := d.Apply(context.Background(), drivers.ApplyRequest{Op: drivers.OpDelete, Lineage: lineage, ID: name, Object: drivers.Object{Addr: "agent.coder", Kind: "machine"}}); err != nil {
		t.Fatalf("delete: %v", err)
	}
	checkCalls(t, f.calls(t), [][]string{
		{"machine", "start", "--name", name},
		{"machine", "exec", "--name", name, "--", "true"},
		{"machine", "delete", "--name", name, "-f"},
	})
}

// TestSecretsStayOffTheCommandLine checks that no sensitive value is ever
// in an argument list smolvm was given.
func TestSecretsStayOffTheCommandLine(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	d := f.driver(t)
	a := agentSpec("coder", "alpine:3")
	a.Workload = drivers.WithWorkloadAttr(a.Workload, "env", cty.MapVal(map[string]cty.Value{
		"TOKEN":  cty.StringVal("hunter2-token"),
		"SECRET": cty.StringVal("hunter2-secret"),
	}).Mark(sensitive)) // the whole map is sensitive
	create(t, d, newLineage(), planOne(t, d, a))
	for _, c := range f.calls(t) {
		if strings.Contains(strings.Join(c, " "), "hunter2") {
			t.Errorf("a secret went on the command line: %q", c)
		}
	}
	out, _, _ := f.cli(t, "", "machine", "exec", "--name", f.machines(t)[0].Name, "--", "env")
	if !strings.Contains(out, "TOKEN=hunter2-token") || !strings.Contains(out, "SECRET=hunter2-secret") {
		t.Errorf("the machine did not get the secret env:\n%s", out)
	}
}

func TestCreateFromLocalFiles(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	d := f.driver(t)
	base := t.TempDir()
	d.baseDir = base

	// A docker-save tar named relative to the Bottlefile's directory.
	if _, _, code := f.cli(t, "", "machine", "create", "--name", "src", "--image", "alpine:3"); code != 0 {
		t.Fatal("creating a source machine")
	}
	a := agentSpec("tar", "./agent.tar")
	a.Workload = drivers.WithWorkloadAttr(a.Workload, "command", cty.NullVal(cty.List(cty.String)))
	obj := planOne(t, d, a)
	_, err := d.Apply(context.Background(), drivers.ApplyRequest{Op: drivers.OpCreate, Lineage: newLineage(), Object: obj, Hash: "h"})
	if err == nil || !strings.Contains(err.Error(), base+"/agent.tar: no such file") {
		t.Fatalf("create from a missing tar: %v", err)
	}
	if len(f.machines(t)) != 1 {
		t.Errorf("the machine that failed to start was left behind: %+v", f.machines(t))
	}

	// A .smolmachine pack: --from, and the pack's files come with it.
	f.cli(t, "", "machine", "start", "--name", "src")
	f.cli(t, "", "machine", "exec", "--name", "src", "--", "touch", "/work/notes.txt")
	f.cli(t, "", "machine", "stop", "--name", "src")
	if _, stderr, code := f.cli(t, "", "pack", "create", "--from-vm", "src", "-o", base+"/packs/src"); code != 0 {
		t.Fatalf("pack create: %s", stderr)
	}
	f.resetCalls(t)
	lineage := newLineage()
	resp := create(t, d, lineage, planOne(t, d, agentSpec("restored", "packs/src.smolmachine")))
	calls := f.calls(t)
	if len(calls) < 2 || !slices.Contains(calls[1], "--from") || !slices.Contains(calls[1], base+"/packs/src.smolmachine") || slices.Contains(calls[1], "--image") {
		t.Errorf("create from a pack ran %q", calls)
	}
	if _, _, code := f.cli(t, "", "machine", "exec", "--name", resp.ID, "--", "test", "-e", "/work/notes.txt"); code != 0 {
		t.Error("the machine restored from the pack lacks the file the source machine had")
	}
}

// TestReadiness checks the bounded retry of the exec readiness check.
func TestReadiness(t *testing.T) {
	t.Parallel()
	t.Run("retries", func(t *testing.T) {
		t.Parallel()
		f := newFake(t, "FAKESMOLVM_BOOT_EXECS=2")
		d := f.driver(t)
		create(t, d, newLineage(), planOne(t, d, agentSpec("coder", "alpine:3")))
		n := 0
		for _, c := range f.calls(t) {
			if len(c) > 2 && slices.Equal(c[:2], []string{"machine", "exec"}) {
				n++
			}
		}
		if n != 3 {
			t.Errorf("%d readiness execs, want 3 (two refused while booting)", n)
		}
	})
	t.Run("gives up and cleans up", func(t *testing.T) {
		t.Parallel()
		f := newFake(t, "FAKESMOLVM_BOOT_EXECS=100000")
		d := f.driver(t)
		d.readyTimeout = 100 * time.Millisecond
		_, err := d.Apply(context.Background(), drivers.ApplyRequest{Op: drivers.OpCreate, Lineage: newLineage(), Object: planOne(t, d, agentSpec("coder", "alpine:3")), Hash: "h"})
		for _, want := range []string{"started but is not ready", "did not answer", "not ready yet"} {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("error %v does not contain %q", err, want)
			}
		}
		if m := f.machines(t); len(m) != 0 {
			t.Errorf("the machine that never became ready was left behind: %+v", m)
		}
	})
}

// TestStartFailureCleansUp: smolvm pulls at start; when that fails the
// created machine is deleted again, and the error carries smolvm's
// message.
func TestStartFailureCleansUp(t *testing.T) {
	t.Parallel()
	f := newFake(t, "FAKESMOLVM_MISSING_IMAGES=ghcr.io/acme/missing:1")
	d := f.driver(t)
	_, err := d.Apply(context.Background(), drivers.ApplyRequest{Op: drivers.OpCreate, Lineage: "0f1e2d3c-x", Object: planOne(t, d, agentSpec("coder", "ghcr.io/acme/missing:1")), Hash: "h"})
	for _, want := range []string{"starting machine bf-0f1e2d3c-coder for agent.coder", "pull image: ghcr.io/acme/missing:1: manifest unknown", "exit status 1"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not contain %q", err, want)
		}
	}
	calls := f.calls(t)
	if last := calls[len(calls)-1]; !slices.Equal(last, []string{"machine", "delete", "--name", "bf-0f1e2d3c-coder", "-f"}) {
		t.Errorf("last call %q, want the cleanup delete", last)
	}
	if m := f.machines(t); len(m) != 0 {
		t.Errorf("left behind: %+v", m)
	}
}

// TestCreateOverUnrecorded: a machine of this lineage left by a crash
// between create and record is replaced; anyone else's is refused.
func TestCreateOverUnrecorded(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	d := f.driver(t)
	lineage := newLineage()
	obj := planOne(t, d, agentSpec("coder", "alpine:3"))
	first := create(t, d, lineage, obj)
	second := create(t, d, lineage, obj)
	if first.ID != second.ID || len(f.machines(t)) != 1 {
		t.Errorf("create over an unrecorded machine: %v then %v; machines %+v", first, second, f.machines(t))
	}

	other := "abcdef01-0000-0000-0000-000000000000"
	if _, _, code := f.cli(t, "", "machine", "create", "--name", "bf-abcdef01-coder", "--image", "alpine:3"); code != 0 {
		t.Fatal("creating a foreign machine")
	}
	_, err := d.Apply(context.Background(), drivers.ApplyRequest{Op: drivers.OpCreate, Lineage: other, Object: obj, Hash: "h"})
	if err == nil || !strings.Contains(err.Error(), "does not belong to this state") {
		t.Errorf("create over a foreign machine: %v", err)
	}
	_, err = d.Apply(context.Background(), drivers.ApplyRequest{Op: drivers.OpDelete, Lineage: other, Object: drivers.Object{Addr: "agent.coder", Kind: "machine"}})
	if err == nil || !strings.Contains(err.Error(), "does not belong to this state") {
		t.Errorf("delete of a foreign machine with no recorded id: %v", err)
	}
	if len(f.machines(t)) != 2 {
		t.Errorf("machines: %+v", f.machines(t))
	}
}

// TestErrorsNameTheMachine checks that a failing call's error says what
// was being done, to which machine, and smolvm's own message.
func TestErrorsNameTheMachine(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	d := f.driver(t)
	_, err := d.Apply(context.Background(), drivers.ApplyRequest{Op: drivers.OpStart, Lineage: "l", ID: "bf-gone-coder", Object: drivers.Object{Addr: "agent.coder", Kind: "machine"}})
	want := "starting machine bf-gone-coder of agent.coder: vm not found: bf-gone-coder (smolvm exit status 1)"
	if err == nil || err.Error() != want {
		t.Errorf("start of an unknown machine:\n got %v\nwant %s", err, want)
	}
	for _, op := range []drivers.Op{drivers.OpUpdate, "snapshot"} {
		if _, err := d.Apply(context.Background(), drivers.ApplyRequest{Op: op, Lineage: "l", Object: drivers.Object{Addr: "agent.coder", Kind: "machine"}}); err == nil {
			t.Errorf("Apply %s succeeded", op)
		}
	}
	if _, err := d.Apply(context.Background(), drivers.ApplyRequest{Op: drivers.OpCreate, Lineage: "l", Object: drivers.Object{Addr: "agent.coder.network", Kind: "network"}}); err == nil || !strings.Contains(err.Error(), `no object kind "network"`) {
		t.Errorf("Apply of another kind: %v", err)
	}
	if _, err := d.Apply(context.Background(), drivers.ApplyRequest{Op: drivers.OpCreate, Object: drivers.Object{Addr: "agent.coder", Kind: "machine"}}); err == nil || !strings.Contains(err.Error(), "lineage") {
		t.Errorf("Apply without a lineage: %v", err)
	}
}

func TestReadFilters(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	d := f.driver(t)
	lineage := newLineage()
	obj := planOne(t, d, agentSpec("coder", "alpine:3"))
	create(t, d, lineage, obj)
	create(t, d, newLineage(), obj)
	// Ours but unaddressed, and nobody's.
	f.cli(t, "", "machine", "create", "--name", "stray", "--label", drivers.LabelLineage+"="+lineage)
	f.cli(t, "", "machine", "create", "--name", "other")

	f.resetCalls(t)
	resp, err := d.Read(context.Background(), drivers.ReadRequest{Lineage: lineage})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Objects) != 1 || resp.Objects[0].Addr != "agent.coder" || resp.Objects[0].Hash != "cafe01" {
		t.Errorf("Read: %+v", resp.Objects)
	}
	checkCalls(t, f.calls(t), [][]string{{"machine", "ls", "--json"}})
}

// TestConcurrentApplies creates and deletes several agents at once, as
// the executor does with its parallelism.
func TestConcurrentApplies(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	d := f.driver(t)
	lineage := newLineage()
	const n = 8
	errs := make(chan error, n)
	for i := range n {
		go func() {
			obj := planOne(t, d, agentSpec(fmt.Sprintf("a%d", i), "alpine:3"))
			resp, err := d.Apply(context.Background(), drivers.ApplyRequest{Op: drivers.OpCreate, Lineage: lineage, Object: obj, Hash: "h"})
			if err == nil {
				_, err = d.Apply(context.Background(), drivers.ApplyRequest{Op: drivers.OpDelete, Lineage: lineage, ID: resp.ID, Object: obj})
			}
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if m := f.machines(t); len(m) != 0 {
		t.Errorf("left: %+v", m)
	}
}

func checkCalls(t *testing.T, got, want [][]string) {
	t.Helper()
	if slices.EqualFunc(got, want, slices.Equal) {
		return
	}
	g, _ := json.MarshalIndent(got, "", " ")
	w, _ := json.MarshalIndent(want, "", " ")
	t.Errorf("calls:\n%s\nwant:\n%s", g, w)
}
