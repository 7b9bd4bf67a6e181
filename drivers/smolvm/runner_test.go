package smolvm

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bottlefile/bottlefile/drivers"
)

func TestCLIErrorMessage(t *testing.T) {
	t.Parallel()
	tests := []struct {
		err  cliError
		want string
	}{
		{cliError{Code: 1, Stderr: "Starting...\nError: vm not found: x\n"}, "vm not found: x (smolvm exit status 1)"},
		{cliError{Code: 1, Stderr: "Error: agent operation failed: start machine: source .smolmachine not found: /p\nThe file may have been moved or deleted.\n"},
			"agent operation failed: start machine: source .smolmachine not found: /p; The file may have been moved or deleted. (smolvm exit status 1)"},
		{cliError{Code: 2, Stderr: "error: unexpected argument 'x' found\n\nUsage: smolvm machine create [OPTIONS]\n\nFor more information, try '--help'.\n"},
			"unexpected argument 'x' found (smolvm exit status 2)"},
		{cliError{Code: 3, Stderr: "boom\nlast words\n"}, "last words (smolvm exit status 3)"},
		{cliError{Code: 4, Stdout: "only stdout\n"}, "only stdout (smolvm exit status 4)"},
		{cliError{Code: 5}, "no error message (smolvm exit status 5)"},
	}
	for _, tt := range tests {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("Error() = %q, want %q", got, tt.want)
		}
	}
	if (&cliError{Code: 1, Stderr: "guest said no\n"}).isRuntimeError() {
		t.Error("a guest's stderr counted as a smolvm error")
	}
}

func TestSubcommand(t *testing.T) {
	t.Parallel()
	for args, want := range map[string]string{
		"machine create --name x -- a b": "machine create",
		"--version":                      "--version",
		"machine ls --json":              "machine ls",
	} {
		if got := subcommand(strings.Fields(args)); got != want {
			t.Errorf("subcommand(%q) = %q, want %q", args, got, want)
		}
	}
}

// cannedRunner answers from a table, for tests of output parsing.
type cannedRunner struct {
	out   map[string]string // joined args -> stdout
	calls [][]string
}

func (r *cannedRunner) run(ctx context.Context, args []string, env []string) ([]byte, error) {
	r.calls = append(r.calls, args)
	out, ok := r.out[strings.Join(args, " ")]
	if !ok {
		return nil, &cliError{Args: args, Code: 2, Stderr: "error: unexpected call\n"}
	}
	return []byte(out), nil
}

// TestReadParsesList feeds Read the documented ls --json shape, with a
// notice line before it, through an injected runner.
func TestReadParsesList(t *testing.T) {
	t.Parallel()
	r := &cannedRunner{out: map[string]string{
		"--version": "smolvm 1.9.3\n",
		"machine ls --json": `note: 1 machine is unreachable
[
  {
    "name": "bf-aaaa-coder",
    "state": "unreachable",
    "cpus": 4, "memory_mib": 8192, "pid": 77, "created_at": 1, "mounts": 0, "ports": 0,
    "storage_gb": null, "overlay_gb": null, "image": "alpine:3", "entrypoint": [], "cmd": [],
    "ephemeral": false, "labels": {"io.bottlefile.lineage": "L", "io.bottlefile.address": "agent.coder", "io.bottlefile.config-hash": "h1"},
    "restart_policy": "never", "network": false, "future_field": {"x": 1}
  },
  {"name": "bf-aaaa-web", "state": "running", "image": null,
   "labels": {"io.bottlefile.lineage": "L", "io.bottlefile.address": "agent.web", "io.bottlefile.config-hash": "h2"}},
  {"name": "mine", "state": "running", "labels": {}},
  {"name": "old", "state": "stopped"}
]
`,
	}}
	d := newDriver(nil, func(string) runner { return r })
	if err := d.Configure(context.Background(), drivers.ConfigureRequest{Config: cfgBinary("/bin/sh")}); err != nil {
		t.Fatal(err)
	}
	resp, err := d.Read(context.Background(), drivers.ReadRequest{Lineage: "L"})
	if err != nil {
		t.Fatal(err)
	}
	want := []drivers.LiveObject{
		{Addr: "agent.coder", Kind: "machine", ID: "bf-aaaa-coder", Name: "bf-aaaa-coder", Hash: "h1", Running: false, ImageID: "alpine:3", State: "unreachable", Created: time.Unix(1, 0).UTC()},
		{Addr: "agent.web", Kind: "machine", ID: "bf-aaaa-web", Name: "bf-aaaa-web", Hash: "h2", Running: true, State: "running"},
	}
	if !slices.Equal(resp.Objects, want) {
		t.Errorf("Read:\n got %+v\nwant %+v", resp.Objects, want)
	}

	for _, bad := range []string{"", "No machines found\n", "[{", `{"name":"x"}`} {
		if _, err := parseList([]byte(bad)); err == nil {
			t.Errorf("parseList(%q) accepted", bad)
		}
	}
	if e, err := parseList([]byte("[]\n")); err != nil || len(e) != 0 {
		t.Errorf("parseList([]) = %v, %v", e, err)
	}
}
