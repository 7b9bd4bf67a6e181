package command

import (
	"fmt"
	"strings"

	"github.com/hashicorp/cli"

	"github.com/bottlefile/bottlefile/operations"
)

// StateCommand is the parent of the state subcommands.
type StateCommand struct {
	Meta *Meta
}

func (c *StateCommand) Synopsis() string { return "Inspect and edit the state" }

func (c *StateCommand) Help() string {
	return strings.TrimSpace(`
Usage: bottlefile [global options] state <subcommand> [args]

  list          List the addresses the state records.
  show ADDR     Show one record.
  rm ADDR...    Remove records. The objects are left alone; any that still
                carries this state's lineage is adopted or removed by the
                next apply, so rm is for records of runtimes that are gone.
  mv FROM TO    Move an agent's records, with everything it owns, to
                another agent address: what a moved block does, by hand.
  pull          Print the whole state as JSON.
  push FILE     Write a document as pull prints it as the whole state.
  migrate -to=pg|file
                Copy the state between the file and the database a
                backend "pg" block names.
  restore-backup
                Put .bottlefile/state.db.backup (the state before the last
                apply, destroy or rm) back as the state.
  relocate      Record a moved directory as the state's own.
`)
}

func (c *StateCommand) Run(args []string) int { return cli.RunResultHelp }

// StateListCommand lists the recorded addresses.
type StateListCommand struct{ Meta *Meta }

func (c *StateListCommand) Synopsis() string { return "List the addresses the state records" }
func (c *StateListCommand) Help() string {
	return "Usage: bottlefile [global options] state list\n\n  Lists the address of every object the state records, one per line."
}

func (c *StateListCommand) Run(args []string) int {
	m := c.Meta
	if m.showDiags(nil, finishParse(m.noColorFlags("state list"), args, 0)) {
		return 1
	}
	dir, err := m.dir()
	if err != nil {
		return m.fail("Cannot find the directory", err)
	}
	addrs, diags := operations.StateList(dir)
	if m.showDiags(nil, diags) {
		return 1
	}
	for _, addr := range addrs {
		fmt.Fprintln(m.Stdout, addr)
	}
	return 0
}

// StateShowCommand shows one record.
type StateShowCommand struct{ Meta *Meta }

func (c *StateShowCommand) Synopsis() string { return "Show one record of the state" }
func (c *StateShowCommand) Help() string {
	return "Usage: bottlefile [global options] state show ADDR\n\n  Shows what the state records of one object. Sensitive values are never shown."
}

func (c *StateShowCommand) Run(args []string) int {
	m := c.Meta
	fs := newFlagSet("state show")
	m.noColorFlag(fs)
	if m.showDiags(nil, finishParse(fs, args, 1)) {
		return 1
	}
	if fs.NArg() != 1 {
		return m.fail("Invalid command line", fmt.Errorf("state show needs one address"))
	}
	addr := fs.Arg(0)
	dir, err := m.dir()
	if err != nil {
		return m.fail("Cannot find the directory", err)
	}
	r, diags := operations.StateShow(dir, addr)
	if m.showDiags(nil, diags) {
		return 1
	}
	renderRecord(m, r)
	return 0
}

// StateRmCommand removes records.
type StateRmCommand struct{ Meta *Meta }

func (c *StateRmCommand) Synopsis() string { return "Remove records from the state" }
func (c *StateRmCommand) Help() string {
	return strings.TrimSpace(`
Usage: bottlefile [global options] state rm [-lock-timeout=DUR] ADDR...

  Removes the records of these objects. Nothing on any runtime changes.
`)
}

func (c *StateRmCommand) Run(args []string) int {
	m := c.Meta
	fs := newFlagSet("state rm")
	m.noColorFlag(fs)
	lockTimeout := fs.Duration("lock-timeout", 0, "")
	if err := fs.Parse(args); err != nil {
		return m.fail("Invalid command line", err)
	}
	if fs.NArg() == 0 {
		return m.fail("Invalid command line", fmt.Errorf("state rm needs at least one address"))
	}
	dir, err := m.dir()
	if err != nil {
		return m.fail("Cannot find the directory", err)
	}
	removed, diags := operations.StateRm(dir, fs.Args(), *lockTimeout)
	for _, addr := range removed {
		fmt.Fprintf(m.Stdout, "Removed %s from the state.\n", addr)
	}
	if m.showDiags(nil, diags) {
		return 1
	}
	return 0
}

// StateMvCommand moves an agent's records to another address.
type StateMvCommand struct{ Meta *Meta }

func (c *StateMvCommand) Synopsis() string { return "Move an agent's records to another address" }
func (c *StateMvCommand) Help() string {
	return strings.TrimSpace(`
Usage: bottlefile [global options] state mv [-lock-timeout=DUR] FROM TO

  Moves the records of the agent at FROM (agent.NAME), with its sidecars,
  gateway, network, images and policy snapshots, to the agent address TO,
  as a moved block would: rename the agent block to match, and the next
  plan has nothing to do. Nothing on any runtime changes; the objects keep
  their engine names. TO must not be recorded already.

Options:

  -lock-timeout=DUR  Wait this long for the state lock.
`)
}

func (c *StateMvCommand) Run(args []string) int {
	m := c.Meta
	fs := newFlagSet("state mv")
	m.noColorFlag(fs)
	lockTimeout := fs.Duration("lock-timeout", 0, "")
	if err := fs.Parse(args); err != nil {
		return m.fail("Invalid command line", err)
	}
	if fs.NArg() != 2 {
		return m.fail("Invalid command line", fmt.Errorf("state mv needs two addresses, FROM and TO"))
	}
	dir, err := m.dir()
	if err != nil {
		return m.fail("Cannot find the directory", err)
	}
	moved, diags := operations.StateMv(dir, fs.Arg(0), fs.Arg(1), *lockTimeout)
	if m.showDiags(nil, diags) {
		return 1
	}
	for _, mv := range moved {
		fmt.Fprintf(m.Stdout, "Moved %s to %s.\n", mv[0], mv[1])
	}
	return 0
}

// StatePullCommand prints the state.
type StatePullCommand struct{ Meta *Meta }

func (c *StatePullCommand) Synopsis() string { return "Print the whole state as JSON" }
func (c *StatePullCommand) Help() string {
	return "Usage: bottlefile [global options] state pull\n\n  Prints the lineage, serial and every record as one JSON document."
}

func (c *StatePullCommand) Run(args []string) int {
	m := c.Meta
	if m.showDiags(nil, finishParse(m.noColorFlags("state pull"), args, 0)) {
		return 1
	}
	dir, err := m.dir()
	if err != nil {
		return m.fail("Cannot find the directory", err)
	}
	st, diags := operations.StatePull(dir)
	if m.showDiags(nil, diags) {
		return 1
	}
	return writeState(m, st)
}
