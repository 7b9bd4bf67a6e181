package smolvm

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/bottlefile/bottlefile/drivers/smolvm/smolvmtest"
)

// The fake must be as strict as the real CLI, or the driver's tests prove
// nothing about the argument contract. These tests run it directly.

func TestFakeRejectsPositionalNames(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	for _, args := range [][]string{
		{"machine", "create", "coder"},
		{"machine", "create", "coder", "--image", "alpine:3"},
		{"machine", "start", "coder"},
		{"machine", "stop", "coder"},
		{"machine", "delete", "coder", "-f"},
		{"machine", "rm", "coder"},
		{"machine", "status", "coder"},
		{"machine", "exec", "coder", "--", "true"},
	} {
		_, stderr, code := f.cli(t, "", args...)
		if code != 2 || !strings.HasPrefix(stderr, "error: unexpected argument 'coder' found") || !strings.Contains(stderr, "Usage: smolvm machine") {
			t.Errorf("%q: exit %d, stderr %q; want a clap usage error (exit 2)", args, code, stderr)
		}
	}
	if len(f.machines(t)) != 0 {
		t.Error("a rejected call created a machine")
	}
}

func TestFakeUsageErrors(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"machine", "exec", "-n", "x", "--", "true"}, "unexpected argument '-n' found"},
		{[]string{"machine", "create", "--name", "x", "--bogus"}, "unexpected argument '--bogus' found"},
		{[]string{"machine", "create", "--name"}, "a value is required for '--name <NAME>'"},
		{[]string{"machine", "create", "--name", "a", "--name", "b"}, "cannot be used multiple times"},
		{[]string{"machine", "create", "--name", "x", "--cpus", "two"}, "invalid value 'two' for '--cpus <N>'"},
		{[]string{"machine", "create", "--name", "x", "--cpus", "300"}, "number too large"},
		{[]string{"machine", "create", "--name", "x", "--label", "novalue"}, "expected KEY=VALUE"},
		{[]string{"machine", "create", "--name", "x", "--allow-cidr", "nonsense"}, "invalid value 'nonsense' for '--allow-cidr <CIDR>'"},
		{[]string{"machine", "create", "--name", "x", "--from", "p.smolmachine", "--image", "alpine"}, "cannot be used with '--image <IMAGE>'"},
		{[]string{"machine", "create", "--name", "x", "--net-backend", "slirp"}, "possible values: tsi, virtio-net"},
		{[]string{"machine", "delete", "-f"}, "required arguments were not provided:\n  --name <NAME>"},
		{[]string{"machine", "exec", "--name", "x"}, "required arguments were not provided:\n  <COMMAND>..."},
		{[]string{"machine", "ls", "--", "x"}, "unexpected argument 'x' found"},
		{[]string{"machine", "frobnicate"}, "unrecognized subcommand 'frobnicate'"},
		{[]string{"--bogus"}, "unexpected argument '--bogus' found"},
		{[]string{"pack", "create", "-o", "out"}, "required arguments were not provided"},
		{[]string{"pack", "create", "--from-vm", "x"}, "--output <PATH>"},
	} {
		_, stderr, code := f.cli(t, "", tc.args...)
		if code != 2 || !strings.HasPrefix(stderr, "error: ") || !strings.Contains(stderr, tc.want) {
			t.Errorf("%q: exit %d, stderr %q; want exit 2 with %q", tc.args, code, stderr, tc.want)
		}
	}
}

func TestFakeNameRules(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	for _, name := range []string{"-x", "_x", "x-", "a--b", "a.b", "a b", strings.Repeat("n", 129), "ünicode"} {
		_, stderr, code := f.cli(t, "", "machine", "create", "--name="+name)
		if code != 1 || !strings.HasPrefix(stderr, "Error: config operation failed: create machine: invalid machine name") {
			t.Errorf("name %q: exit %d, stderr %q", name, code, stderr)
		}
	}
	for _, name := range []string{"a", "A_b-9", strings.Repeat("n", 128)} {
		if _, stderr, code := f.cli(t, "", "machine", "create", "-n", name); code != 0 {
			t.Errorf("name %q: exit %d, stderr %q", name, code, stderr)
		}
	}
	_, stderr, code := f.cli(t, "", "machine", "create", "--name", "a")
	if code != 1 || stderr != "Error: config operation failed: create machine: machine 'a' already exists\n" {
		t.Errorf("duplicate name: exit %d, stderr %q", code, stderr)
	}
	// Without --name the fake, like smolvm, makes up vm-<8 hex>.
	out, _, code := f.cli(t, "", "machine", "create")
	if code != 0 || !strings.HasPrefix(out, "Created machine: vm-") {
		t.Errorf("create without a name: exit %d, %q", code, out)
	}
}

func TestFakeDeletePrompts(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	f.cli(t, "", "machine", "create", "--name", "x", "--image", "alpine:3")
	f.cli(t, "", "machine", "start", "--name", "x")
	for _, answer := range []string{"", "n\n", "no\n", "nope\n"} {
		out, stderr, code := f.cli(t, answer, "machine", "delete", "--name", "x")
		if code != 0 || stderr != "Delete machine 'x'? [y/N] " || !strings.Contains(out, "Cancelled") {
			t.Errorf("answer %q: exit %d, stdout %q, stderr %q", answer, code, out, stderr)
		}
		if m := f.machines(t); len(m) != 1 {
			t.Fatalf("answer %q deleted the machine", answer)
		}
	}
	// The real CLI stops a running machine before it asks.
	if m := f.machines(t); m[0].State != "stopped" {
		t.Errorf("state after a cancelled delete: %q", m[0].State)
	}
	if out, _, code := f.cli(t, "y\n", "machine", "rm", "-n", "x"); code != 0 || !strings.Contains(out, "Deleted machine: x") || len(f.machines(t)) != 0 {
		t.Errorf("answer y: exit %d, %q", code, out)
	}
	f.cli(t, "", "machine", "create", "--name", "y")
	if _, stderr, code := f.cli(t, "", "machine", "delete", "--name", "y", "-f"); code != 0 || stderr != "" || len(f.machines(t)) != 0 {
		t.Errorf("delete -f: exit %d, stderr %q", code, stderr)
	}
	if _, stderr, code := f.cli(t, "", "machine", "delete", "--name", "y", "--force"); code != 1 || stderr != "Error: vm not found: y\n" {
		t.Errorf("delete of an unknown machine: exit %d, stderr %q", code, stderr)
	}
}

func TestFakeLifecycle(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	run := func(stdin string, args ...string) (string, string, int) { return f.cli(t, stdin, args...) }

	if out, _, code := run("", "machine", "ls", "--json"); code != 0 || out != "[]\n" {
		t.Errorf("ls --json with no machines: %d %q", code, out)
	}
	if out, _, _ := run("", "machine", "list"); out != "No machines found\n" {
		t.Errorf("list: %q", out)
	}
	out, stderr, code := run("", "vm", "create", "--name", "x", "--image", "alpine:3", "--cpus", "2", "--mem", "512",
		"-e", "A=1", "-w", "/w", "--label", "k=v", "--allow-host", "api.example.com", "--allow-cidr", "10.0.0.0/8", "--", "sh", "-c", "--net")
	if code != 0 || out != "Created machine: x\n  CPUs: 2, Memory: 512 MiB\n" || !strings.Contains(stderr, "'--net' after '--' is part of the workload") {
		t.Fatalf("create: %d %q %q", code, out, stderr)
	}
	_, stderr, code = run("", "machine", "exec", "--name", "x", "--", "true")
	if code != 1 || stderr != "Error: machine 'x' is not running. Use 'smolvm machine start --name x' first.\n" {
		t.Errorf("exec on a created machine: %d %q", code, stderr)
	}
	if out, _, code := run("", "machine", "stop", "--name", "x"); code != 0 || out != "Machine 'x' is not running (state: created)\n" {
		t.Errorf("stop of a created machine: %d %q", code, out)
	}
	out, _, code = run("", "machine", "start", "--name", "x")
	if code != 0 || !strings.Contains(out, "Machine 'x' running (PID: ") {
		t.Errorf("start: %d %q", code, out)
	}
	if out, _, code := run("", "machine", "start", "-n", "x"); code != 0 || !strings.HasPrefix(out, "Machine 'x' already running (PID: ") {
		t.Errorf("start of a running machine: %d %q", code, out)
	}
	for cmd, want := range map[string]int{"true": 0, "false": 1, "anything": 0} {
		if _, _, code := run("", "machine", "exec", "--name", "x", "--", cmd); code != want {
			t.Errorf("exec %s: exit %d, want %d", cmd, code, want)
		}
	}
	if out, _, _ := run("", "machine", "exec", "--name=x", "-e", "B=2", "--", "echo", "hello", "--name"); out != "hello --name\n" {
		t.Errorf("exec echo: %q", out)
	}
	if out, _, _ := run("", "machine", "exec", "--name", "x", "-e", "B=2", "--", "env"); out != "A=1\nB=2\n" {
		t.Errorf("exec env: %q", out)
	}
	if out, _, _ := run("", "machine", "exec", "--name", "x", "--", "pwd"); out != "/w\n" {
		t.Errorf("exec pwd: %q", out)
	}

	out, _, code = run("", "machine", "status", "--name", "x", "--json")
	var st map[string]any
	if err := json.Unmarshal([]byte(out), &st); code != 0 || err != nil {
		t.Fatalf("status --json: %d %v %q", code, err, out)
	}
	for _, field := range []string{"name", "state", "cpus", "memory_mib", "pid", "created_at", "mounts", "ports", "storage_gb", "overlay_gb", "image", "entrypoint", "cmd", "ephemeral", "labels", "network", "restart_policy", "forkable"} {
		if _, ok := st[field]; !ok {
			t.Errorf("status --json lacks %q", field)
		}
	}
	if st["state"] != "running" || st["cpus"] != 2.0 || st["memory_mib"] != 512.0 || st["network"] != true || st["image"] != "alpine:3" {
		t.Errorf("status --json: %v", st)
	}
	if _, ok := st["allow_hosts"]; ok {
		t.Error("status --json shows the allow-list, which the real CLI does not")
	}
	if fmt.Sprint(st["cmd"]) != "[sh -c --net]" || fmt.Sprint(st["labels"]) != "map[k:v]" {
		t.Errorf("status --json cmd %v labels %v", st["cmd"], st["labels"])
	}
	if out, _, _ := run("", "machine", "status", "--name", "x"); !strings.HasPrefix(out, "Machine 'x': running (PID: ") {
		t.Errorf("status: %q", out)
	}
	if _, stderr, code := run("", "machine", "status", "--name", "nope", "--json"); code != 1 || stderr != "Error: vm not found: nope\n" {
		t.Errorf("status of an unknown machine: %d %q", code, stderr)
	}
	if out, _, code := run("", "machine", "stop", "--name", "x"); code != 0 || out != "Stopping machine 'x'...\nStopped machine: x\n" {
		t.Errorf("stop: %d %q", code, out)
	}
	if _, _, code := run("", "machine", "stop", "--name", "nope"); code != 1 {
		t.Errorf("stop of an unknown machine: exit %d", code)
	}

	// ls --json is a pretty (indented) array.
	out, _, _ = run("", "machine", "ls", "--json")
	if !strings.HasPrefix(out, "[\n  {\n    \"name\": \"x\",\n    \"state\": \"stopped\",") {
		t.Errorf("ls --json is not the pretty array:\n%s", out)
	}
	if out, _, code := run("", "--version"); code != 0 || out != "smolvm 1.9.3\n" {
		t.Errorf("--version: %d %q", code, out)
	}
}

func TestFakePacks(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	dir := t.TempDir()
	f.cli(t, "", "machine", "create", "--name", "src", "--image", "alpine:3", "--", "sleep", "600")
	f.cli(t, "", "machine", "start", "--name", "src")
	f.cli(t, "", "machine", "exec", "--name", "src", "--", "touch", "/root/state")
	out := filepath.Join(dir, "snap")
	if _, stderr, code := f.cli(t, "", "pack", "create", "--from-vm", "src", "-o", out); code != 1 || !strings.Contains(stderr, "is running; stop it first") {
		t.Errorf("pack of a running machine: %d %q", code, stderr)
	}
	f.cli(t, "", "machine", "stop", "--name", "src")
	if _, stderr, code := f.cli(t, "", "pack", "create", "--from-vm", "src", "-o", out+".smolmachine"); code != 1 || !strings.Contains(stderr, "drop the .smolmachine suffix") {
		t.Errorf("pack -o x.smolmachine: %d %q", code, stderr)
	}
	if _, stderr, code := f.cli(t, "", "pack", "create", "--from-vm", "src", "-o", out); code != 0 {
		t.Fatalf("pack create: %d %q", code, stderr)
	}
	for _, p := range []string{out, out + ".smolmachine"} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("pack create did not write %s", p)
		}
	}
	_, stderr, code := f.cli(t, "", "machine", "create", "--name", "copy", "--from", out+".smolmachine", "--allow-host", "api.example.com", "--", "sleep", "1")
	if code != 0 {
		t.Fatalf("create --from: %d %q", code, stderr)
	}
	f.cli(t, "", "machine", "start", "--name", "copy")
	if _, _, code := f.cli(t, "", "machine", "exec", "--name", "copy", "--", "test", "-e", "/root/state"); code != 0 {
		t.Error("the restored machine lacks the packed file")
	}
	if _, _, code := f.cli(t, "", "machine", "exec", "--name", "copy", "--", "test", "-e", "/root/other"); code != 1 {
		t.Error("test -e of a missing file succeeded")
	}
	if _, stderr, code := f.cli(t, "", "machine", "create", "--name", "bad", "--from", filepath.Join(dir, "missing.smolmachine")); code != 1 || !strings.Contains(stderr, ".smolmachine not found") {
		t.Errorf("create --from a missing pack: %d %q", code, stderr)
	}
	// Allow hosts must resolve at create: a wildcard never does.
	if _, stderr, code := f.cli(t, "", "machine", "create", "--name", "w", "--allow-host", "*.example.com"); code != 1 || !strings.Contains(stderr, "failed to resolve") {
		t.Errorf("create --allow-host with a wildcard: %d %q", code, stderr)
	}
}

// TestFakeConcurrent runs many invocations at once: the file lock keeps
// the state and the call log whole.
func TestFakeConcurrent(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	const n = 20
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, stderr, code := f.cli(t, "", "machine", "create", "--name", fmt.Sprintf("m%d", i)); code != 0 {
				t.Errorf("create m%d: %s", i, stderr)
			}
		}()
	}
	wg.Wait()
	if got := len(f.machines(t)); got != n {
		t.Errorf("%d machines, want %d", got, n)
	}
	var names []string
	for _, c := range f.calls(t) {
		if c[1] == "create" {
			names = append(names, c[3])
		}
	}
	if len(names) != n {
		t.Errorf("%d create calls recorded, want %d", len(names), n)
	}
	slices.Sort(names)
	if len(slices.Compact(names)) != n {
		t.Error("duplicate create calls recorded")
	}
}

func TestFakeNeedsState(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(smolvmtest.Binary(t), "--version")
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "FAKESMOLVM_STATE=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	out, err := cmd.CombinedOutput()
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) || exitErr.ExitCode() != 3 || !strings.Contains(string(out), "FAKESMOLVM_STATE") {
		t.Errorf("without FAKESMOLVM_STATE: %v, %q", err, out)
	}
}

// TestFakeUpdate: update changes a stopped machine's env (remove, then
// set, -e KEY forwarding the host's value) and refuses a running one.
func TestFakeUpdate(t *testing.T) {
	t.Parallel()
	f := newFake(t, "HOSTKEY=from-host")
	if _, stderr, code := f.cli(t, "", "machine", "create", "--name", "u", "--image", "alpine:3", "-e", "A=1", "-e", "B=2"); code != 0 {
		t.Fatalf("create: %s", stderr)
	}
	if out, stderr, code := f.cli(t, "", "machine", "update", "--name", "u", "--remove-env", "A", "-e", "B=3", "-e", "HOSTKEY"); code != 0 || out != "Updated machine: u\n" {
		t.Fatalf("update: %d %q %q", code, out, stderr)
	}
	f.cli(t, "", "machine", "start", "--name", "u")
	out, _, _ := f.cli(t, "", "machine", "exec", "--name", "u", "--", "env")
	if strings.Contains(out, "A=1") || !strings.Contains(out, "B=3") || strings.Contains(out, "B=2") || !strings.Contains(out, "HOSTKEY=from-host") {
		t.Errorf("env after update: %q", out)
	}
	if _, stderr, code := f.cli(t, "", "machine", "update", "--name", "u", "-e", "C=1"); code != 1 || !strings.Contains(stderr, "stop it first") {
		t.Errorf("update of a running machine: %d %q", code, stderr)
	}
	if _, _, code := f.cli(t, "", "machine", "update", "-e", "C=1"); code != 2 {
		t.Errorf("update without --name: exit %d, want a usage error", code)
	}
}
