// Command fakesmolvm is a faithful stand-in for the smolvm CLI, for tests
// of bottlefile's smolvm driver on machines without smolvm or /dev/kvm.
//
// It implements, statefully and strictly, the v1.9.x surface the driver
// uses (the smolvm CLI fact sheet, reference/smolvm-cli.md, is the contract):
//
//	smolvm --version
//	smolvm machine (or vm) create|start|stop|delete|rm|exec|ls|list|status
//	smolvm pack create --from-vm NAME -o PATH   (or -I IMAGE)
//
// Like the real CLI it rejects positional machine names and unknown flags
// with a clap usage error (exit 2), prompts "[y/N]" on delete without -f,
// refuses exec on a machine that is not running (exit 1), has no -n short
// form on exec, takes everything after "--" on create as the workload, and
// prints ls --json as a pretty JSON array. Runtime errors print
// "Error: <msg>" on stderr and exit 1.
//
// Environment:
//
//	FAKESMOLVM_STATE           directory for state.json and calls.jsonl (required)
//	FAKESMOLVM_VERSION         what --version reports (default 1.9.3)
//	FAKESMOLVM_MISSING_IMAGES  comma-separated image references whose pull fails at start
//	FAKESMOLVM_BOOT_EXECS      how many execs after each start fail as "agent not ready"
//
// Every invocation appends {"args":[...]} to $FAKESMOLVM_STATE/calls.jsonl.
// A local image tar must be a docker-save archive (a manifest.json at its
// top) when the machine starts, as smolvm loads the image then.
// Guest commands are not run: exec answers true (0), false (1), echo,
// cat (stdin, forwarded only with -i), sh (-c SCRIPT, or stdin lines;
// echo and exit N),
// env, pwd, touch/rm/test -e on a per-machine file set that packs carry,
// and exits 0 for anything else.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// DefaultVersion is what --version reports without FAKESMOLVM_VERSION.
const DefaultVersion = "1.9.3"

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv))
}

// cli is one invocation.
type cli struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string
	st             *state
	version        string
}

// runtimeError prints the real CLI's error form and gives exit code 1.
func (c *cli) runtimeError(format string, a ...any) int {
	fmt.Fprintf(c.stderr, "Error: "+format+"\n", a...)
	return 1
}

// parse reads a subcommand's arguments. done reports that the command is
// over already, with its exit code: a usage error (2), or --help (0).
func (c *cli) parse(spec cmdSpec, args []string) (p *parsed, code int, done bool) {
	p, uerr := spec.parse(args)
	if uerr != nil {
		return nil, c.usage(uerr), true
	}
	if p.help {
		fmt.Fprintf(c.stdout, "Usage: %s\n", spec.usage)
		return nil, 0, true
	}
	return p, 0, false
}

// saveFailed is the real CLI's error when its database cannot be written.
func (c *cli) saveFailed(err error) int {
	return c.runtimeError("database operation failed: write: %v", err)
}

func (c *cli) usage(e *usageError) int {
	e.write(c.stderr)
	return 2
}

const topUsage = "smolvm <COMMAND>"

func run(args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) int {
	dir := getenv("FAKESMOLVM_STATE")
	if dir == "" {
		fmt.Fprintln(stderr, "fakesmolvm: set FAKESMOLVM_STATE to a directory for the fake's state")
		return 3
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fmt.Fprintf(stderr, "fakesmolvm: %v\n", err)
		return 3
	}
	unlock, err := lockDir(filepath.Join(dir, "lock"))
	if err != nil {
		fmt.Fprintf(stderr, "fakesmolvm: locking %s: %v\n", dir, err)
		return 3
	}
	defer unlock()
	if err := logCall(dir, args); err != nil {
		fmt.Fprintf(stderr, "fakesmolvm: recording the call: %v\n", err)
		return 3
	}
	st, err := loadState(dir)
	if err != nil {
		fmt.Fprintf(stderr, "fakesmolvm: %v\n", err)
		return 3
	}
	version := getenv("FAKESMOLVM_VERSION")
	if version == "" {
		version = DefaultVersion
	}
	c := &cli{stdin: stdin, stdout: stdout, stderr: stderr, getenv: getenv, st: st, version: version}
	code := c.dispatch(args)
	return code
}

// logCall appends one JSON line with the arguments to calls.jsonl.
func logCall(dir string, args []string) error {
	if args == nil {
		args = []string{}
	}
	b, err := json.Marshal(struct {
		Args []string `json:"args"`
	}{args})
	if err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(dir, "calls.jsonl"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func (c *cli) dispatch(args []string) int {
	if len(args) == 0 {
		fmt.Fprintf(c.stderr, "Usage: %s\n\nCommands:\n  machine  Manage machines\n  pack     Package machines\n", topUsage)
		return 2
	}
	switch args[0] {
	case "--version", "-V":
		if len(args) > 1 {
			return c.usage(&usageError{msg: fmt.Sprintf("unexpected argument '%s' found", args[1]), usage: topUsage})
		}
		fmt.Fprintf(c.stdout, "smolvm %s\n", c.version)
		return 0
	case "--help", "-h":
		fmt.Fprintf(c.stdout, "Usage: %s\n", topUsage)
		return 0
	case "machine", "vm":
		return c.machine(args[1:])
	case "pack":
		return c.pack(args[1:])
	case "serve", "config":
		fmt.Fprintf(c.stderr, "fakesmolvm: smolvm %s is not implemented by the fake\n", args[0])
		return 3
	}
	if len(args[0]) > 1 && args[0][0] == '-' {
		return c.usage(&usageError{msg: fmt.Sprintf("unexpected argument '%s' found", args[0]), usage: topUsage})
	}
	return c.usage(&usageError{msg: fmt.Sprintf("unrecognized subcommand '%s'", args[0]), usage: topUsage})
}

func (c *cli) machine(args []string) int {
	const usage = "smolvm machine <COMMAND>"
	if len(args) == 0 {
		fmt.Fprintf(c.stderr, "Usage: %s\n", usage)
		return 2
	}
	sub, rest := args[0], args[1:]
	switch sub {
	case "create":
		return c.create(rest)
	case "start":
		return c.start(rest)
	case "stop":
		return c.stop(rest)
	case "delete", "rm":
		return c.delete(rest)
	case "exec":
		return c.exec(rest)
	case "ls", "list":
		return c.ls(rest)
	case "status":
		return c.status(rest)
	case "update":
		return c.update(rest)
	case "run", "fork", "fork-release", "egress-events", "images", "prune",
		"shell", "sh", "cp", "monitor", "data-dir", "resize", "network-test":
		fmt.Fprintf(c.stderr, "fakesmolvm: smolvm machine %s is not implemented by the fake\n", sub)
		return 3
	}
	return c.usage(&usageError{msg: fmt.Sprintf("unrecognized subcommand '%s'", sub), usage: usage})
}
