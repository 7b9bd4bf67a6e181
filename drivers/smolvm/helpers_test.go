package smolvm

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/go-hclog"
	"github.com/zclconf/go-cty/cty"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/smolvm/smolvmtest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	smolvmtest.Cleanup()
	os.Exit(code)
}

// fake is one fake smolvm installation: the shared binary and a fresh
// state directory.
type fake struct {
	bin   string
	state string
	env   []string // FAKESMOLVM_STATE and any extra settings
}

func newFake(t testing.TB, env ...string) *fake {
	t.Helper()
	state := t.TempDir()
	return &fake{
		bin:   smolvmtest.Binary(t),
		state: state,
		env:   append([]string{"FAKESMOLVM_STATE=" + state}, env...),
	}
}

// unconfigured returns a driver whose CLI calls run the fake, with a short
// readiness timeout.
func (f *fake) unconfigured(t testing.TB) *Driver {
	d := newDriver(testLogger(t), func(binary string) runner { return execRunner{binary: binary, env: f.env} })
	d.defaultBinary = f.bin
	d.readyTimeout = 5 * time.Second
	d.readyInterval = 10 * time.Millisecond
	return d
}

// driver returns a driver configured with binary pointing at the fake.
func (f *fake) driver(t testing.TB) *Driver {
	t.Helper()
	d := f.unconfigured(t)
	err := d.Configure(context.Background(), drivers.ConfigureRequest{
		Runtime: "vm",
		Config:  cty.ObjectVal(map[string]cty.Value{"binary": cty.StringVal(f.bin)}),
	})
	if err != nil {
		t.Fatalf("Configure: %v", err)
	}
	return d
}

// calls returns the argument lists the fake recorded, in order.
func (f *fake) calls(t testing.TB) [][]string { return smolvmtest.Calls(t, f.state) }

func (f *fake) resetCalls(t testing.TB) { smolvmtest.ResetCalls(t, f.state) }

// cli runs the fake directly, with stdin, and returns what it printed and
// its exit code.
func (f *fake) cli(t testing.TB, stdin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(f.bin, args...)
	cmd.Env = append(os.Environ(), f.env...)
	cmd.Stdin = strings.NewReader(stdin)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	var exitErr *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exitErr):
		code = exitErr.ExitCode()
	default:
		t.Fatalf("running the fake: %v", err)
	}
	return o.String(), e.String(), code
}

// machines lists the fake's machines.
func (f *fake) machines(t testing.TB) []lsEntry {
	t.Helper()
	out, stderr, code := f.cli(t, "", "machine", "ls", "--json")
	if code != 0 {
		t.Fatalf("machine ls --json: exit %d: %s", code, stderr)
	}
	entries, err := parseList([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	return entries
}

// testLogger sends driver logs to the test log.
func testLogger(t testing.TB) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Output: testWriter{t}, Level: hclog.Debug})
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// agentSpec is a small agent for the tests.
func agentSpec(name, image string) drivers.AgentSpec {
	return drivers.AgentSpec{
		Addr: "agent." + name,
		Name: name,
		Workload: drivers.MustWorkload(map[string]cty.Value{
			"image":      cty.StringVal(image),
			"command":    cty.ListVal([]cty.Value{cty.StringVal("sleep"), cty.StringVal("600")}),
			"entrypoint": cty.NullVal(cty.List(cty.String)),
			"env":        cty.NullVal(cty.Map(cty.String)),
			"workdir":    cty.NullVal(cty.String),
			"user":       cty.NullVal(cty.String),
			"cpus":       cty.NullVal(cty.Number),
			"memory":     cty.NullVal(cty.Number),
			"labels":     cty.NullVal(cty.Map(cty.String)),
		}),
	}
}

// planOne plans an agent and returns its one object.
func planOne(t testing.TB, d drivers.Driver, a drivers.AgentSpec) drivers.Object {
	t.Helper()
	resp, err := d.Plan(context.Background(), drivers.PlanRequest{Agent: a})
	if err != nil {
		t.Fatalf("Plan: %v", err)
	}
	if len(resp.Objects) != 1 {
		t.Fatalf("Plan returned %d objects, want 1", len(resp.Objects))
	}
	return resp.Objects[0]
}

func newLineage() string { return uuid.NewString() }

func cfgBinary(path string) cty.Value {
	return cty.ObjectVal(map[string]cty.Value{"binary": cty.StringVal(path)})
}
