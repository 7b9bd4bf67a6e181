package command

import (
	"fmt"
	"strings"

	"github.com/hashicorp/cli"

	"github.com/bottlefile/bottlefile/state"
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
  pull          Print the whole state as JSON.
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
	if m.showDiags(nil, finishParse(newFlagSet("state list"), args, 0)) {
		return 1
	}
	return m.withState(true, func(s *state.Store, recs []state.Record) int {
		for _, r := range recs {
			fmt.Fprintln(m.Stdout, r.Addr)
		}
		return 0
	})
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
	if m.showDiags(nil, finishParse(fs, args, 1)) {
		return 1
	}
	if fs.NArg() != 1 {
		return m.fail("Invalid command line", fmt.Errorf("state show needs one address"))
	}
	addr := fs.Arg(0)
	return m.withState(true, func(s *state.Store, recs []state.Record) int {
		for _, r := range recs {
			if r.Addr == addr {
				renderRecord(m, r)
				return 0
			}
		}
		return m.fail("No such record", fmt.Errorf("the state records no object at %s; `bottlefile state list` lists them", addr))
	})
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
	s, err := state.Open(dir, state.Options{LockTimeout: *lockTimeout})
	if err != nil {
		return m.fail("Cannot open state", err)
	}
	defer s.Close()
	for _, addr := range fs.Args() {
		_, ok, err := s.Get(addr)
		if err != nil {
			return m.fail("Cannot read state", err)
		}
		if !ok {
			return m.fail("No such record", fmt.Errorf("the state records no object at %s", addr))
		}
		if err := s.Delete(addr); err != nil {
			return m.fail("Cannot write state", err)
		}
		fmt.Fprintf(m.Stdout, "Removed %s from the state.\n", addr)
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
	if m.showDiags(nil, finishParse(newFlagSet("state pull"), args, 0)) {
		return 1
	}
	return m.withState(true, func(s *state.Store, recs []state.Record) int { return writeStateJSON(m, s, recs) })
}

// withState opens the state, reads every record and runs fn.
func (m *Meta) withState(readOnly bool, fn func(*state.Store, []state.Record) int) int {
	dir, err := m.dir()
	if err != nil {
		return m.fail("Cannot find the directory", err)
	}
	s, err := state.Open(dir, state.Options{ReadOnly: readOnly})
	if err != nil {
		return m.fail("Cannot open state", err)
	}
	defer s.Close()
	recs, err := s.Records()
	if err != nil {
		return m.fail("Cannot read state", err)
	}
	return fn(s, recs)
}
