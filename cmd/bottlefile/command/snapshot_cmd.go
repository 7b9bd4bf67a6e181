package command

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/hashicorp/cli"

	"github.com/bottlefile/bottlefile/operations"
	"github.com/bottlefile/bottlefile/units"

	"github.com/bottlefile/bottlefile/atomicfile"
)

// SnapshotCommand is the parent of the snapshot subcommands.
type SnapshotCommand struct{ Meta *Meta }

func (c *SnapshotCommand) Synopsis() string { return "List, take, remove and move snapshots" }

func (c *SnapshotCommand) Help() string {
	return strings.TrimSpace(`
Usage: bottlefile [global options] snapshot <subcommand> [args]

  list [-json] [ADDR]   List the recorded snapshots: what took each, its
                        size and age, and what was created from it.
  take ADDR             Snapshot agent ADDR now and record it (for hooks:
                        it does not ask).
  rm ADDR...            Remove recorded snapshots (asks first).
  export ADDR -o FILE   Write a recorded snapshot as a docker-save tar.
  import FILE           Load a snapshot tar into an agent's runtime and
                        record it as the agent's newest snapshot, so the
                        agent resumes from it when it is next created.

  Snapshot blocks and snapshot_policy take snapshots as part of a plan;
  take adds one on demand. export and import move one to a machine that
  shares no engine with this one:

    bottlefile snapshot export agent.coder.snapshot.3 -o coder.tar
    # on the other machine, in the directory of its Bottlefile:
    bottlefile snapshot import coder.tar
    bottlefile apply
`)
}

func (c *SnapshotCommand) Run(args []string) int { return cli.RunResultHelp }

// SnapshotExportCommand writes a snapshot as a docker-save tar.
type SnapshotExportCommand struct{ Meta *Meta }

func (c *SnapshotExportCommand) Synopsis() string {
	return "Write a recorded snapshot as a docker-save tar"
}

func (c *SnapshotExportCommand) Help() string {
	return strings.TrimSpace(`
Usage: bottlefile [global options] snapshot export [options] ADDR -o FILE

  Writes the snapshot the state records at ADDR (agent.NAME.snapshot.N or
  snapshot.NAME) as a docker-save tar, streamed from its runtime. FILE is
  written in full or not at all; "-o -" writes to standard output.

Options:

  -o FILE              Where to write the tar (required).
  -lock-timeout=DUR    Wait this long for the state lock (default 0s).
  -var NAME=VALUE      Set a variable. Repeatable.
  -var-file=FILE       Set variables from an HCL or JSON file.
`)
}

func (c *SnapshotExportCommand) Run(args []string) int {
	m := c.Meta
	fs := newFlagSet("snapshot export")
	m.noColorFlag(fs)
	out := fs.String("o", "", "")
	lockTimeout := fs.Duration("lock-timeout", 0, "")
	in := registerInputs(fs)
	addr, code := parseOneArg(m, fs, args, "snapshot export needs one snapshot address, like agent.coder.snapshot.1 (`bottlefile state list` lists them)")
	if code != 0 {
		return code
	}
	if *out == "" {
		return m.fail("Invalid command line", errors.New("snapshot export needs -o FILE (or -o - for standard output)"))
	}

	ctx := m.Ctx
	op, diags := m.open(ctx, true, *lockTimeout, *in)
	defer op.Close()
	if m.showDiags(op.Files(), diags) {
		return 1
	}
	exp, diags := op.PrepareExport(addr)
	if m.showDiags(op.Files(), diags) {
		return 1
	}

	info := m.Stdout
	var n int64
	if *out == "-" {
		info = m.Stderr
		cw := &countingWriter{w: m.Stdout}
		if err := exp.Write(ctx, cw); err != nil {
			return m.fail("Export failed", err)
		}
		n = cw.n
	} else {
		var err error
		n, err = writeAtomically(*out, func(w io.Writer) error { return exp.Write(ctx, w) })
		if err != nil {
			return m.fail("Export failed", err)
		}
	}
	where := *out
	if where == "-" {
		where = "standard output"
	}
	fmt.Fprintf(info, "Exported %s (%s, from runtime %q) to %s: %s.\n", addr, exp.Image, exp.Runtime, where, units.FormatBytes(n))
	return 0
}

// SnapshotImportCommand loads a snapshot tar and records it.
type SnapshotImportCommand struct{ Meta *Meta }

func (c *SnapshotImportCommand) Synopsis() string {
	return "Load a snapshot tar as an agent's newest snapshot"
}

func (c *SnapshotImportCommand) Help() string {
	return strings.TrimSpace(`
Usage: bottlefile [global options] snapshot import [options] FILE

  Loads a docker-save tar (from snapshot export) into the runtime of an
  agent of this Bottlefile and records it as that agent's next policy
  snapshot, agent.NAME.snapshot.N. The next time the agent is created it
  resumes from it (unless resume = false): after a destroy, on a machine
  where it never ran, or after a migration. "-" reads the tar from standard
  input (then -agent is required).

  The agent is the one -agent names; else the one the tar was taken of,
  when this Bottlefile declares it; else the only agent there is.

Options:

  -agent=agent.NAME    The agent the snapshot is for.
  -lock-timeout=DUR    Wait this long for the state lock (default 0s).
  -var NAME=VALUE      Set a variable. Repeatable.
  -var-file=FILE       Set variables from an HCL or JSON file.
`)
}

func (c *SnapshotImportCommand) Run(args []string) int {
	m := c.Meta
	fs := newFlagSet("snapshot import")
	m.noColorFlag(fs)
	agentFlag := fs.String("agent", "", "")
	lockTimeout := fs.Duration("lock-timeout", 0, "")
	in := registerInputs(fs)
	file, code := parseOneArg(m, fs, args, "snapshot import needs one file: the tar snapshot export wrote (or - for standard input)")
	if code != 0 {
		return code
	}

	var src io.Reader
	var taken string // the address the tar says it was taken at, if any
	if file == "-" {
		if *agentFlag == "" {
			return m.fail("Invalid command line", errors.New("snapshot import - (standard input) needs -agent=agent.NAME"))
		}
		src = m.Stdin
	} else {
		f, err := os.Open(file)
		if err != nil {
			return m.fail("Cannot read the snapshot", err)
		}
		defer f.Close()
		taken = operations.TarAddress(f)
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return m.fail("Cannot read the snapshot", err)
		}
		src = f
	}

	op, diags := m.open(m.Ctx, false, *lockTimeout, *in)
	defer op.Close()
	if m.showDiags(op.Files(), diags) {
		return 1
	}
	start := time.Now()
	imp, diags := op.ImportSnapshot(m.Ctx, operations.ImportRequest{Agent: *agentFlag, Taken: taken, Source: file, Tar: src})
	if m.showDiags(op.Files(), diags) {
		return 1
	}
	size := "size unknown"
	if imp.Size >= 0 {
		size = units.FormatBytes(imp.Size)
	}
	fmt.Fprintf(m.Stdout, "Imported %s as %s on runtime %q (%s, %s) in %s.\n", file, imp.Addr, imp.Runtime, imp.Image, size, time.Since(start).Round(time.Millisecond))
	if imp.AgentExists {
		fmt.Fprintf(m.Stdout, "%s exists now; it resumes from its newest snapshot the next time it is created or replaced (a snapshot_policy may take a newer one first).\n", imp.Agent)
	} else {
		fmt.Fprintf(m.Stdout, "The next apply creates %s from it (unless resume = false).\n", imp.Agent)
	}
	return 0
}

// parseInterleaved parses flags that may come before or after the
// positional arguments ("export ADDR -o FILE"), and returns the latter.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if rest[0] == "--" {
			return append(pos, rest[1:]...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// parseOneArg parses the flags and the one positional argument of a
// command that takes exactly one; need says what it is when there is not
// one. A non-zero code is the command's exit code, the error shown.
func parseOneArg(m *Meta, fs *flag.FlagSet, args []string, need string) (string, int) {
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return "", m.fail("Invalid command line", fmt.Errorf("%v. Run with -help to see the options", err))
	}
	if len(pos) != 1 {
		return "", m.fail("Invalid command line", errors.New(need))
	}
	return pos[0], 0
}

// writeAtomically writes a file private to the user through a temporary
// one beside it, so the file is complete or absent, and returns the bytes
// written.
func writeAtomically(name string, write func(io.Writer) error) (int64, error) {
	var n int64
	err := atomicfile.WriteFunc(name, 0o600, func(w io.Writer) error {
		cw := &countingWriter{w: w}
		err := write(cw)
		n = cw.n
		return err
	})
	return n, err
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
