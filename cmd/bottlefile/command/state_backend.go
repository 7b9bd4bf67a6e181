package command

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/bottlefile/bottlefile/operations"
)

// StatePushCommand writes a state document as the whole state.
type StatePushCommand struct{ Meta *Meta }

func (c *StatePushCommand) Synopsis() string { return "Write a state document as the whole state" }
func (c *StatePushCommand) Help() string {
	return strings.TrimSpace(`
Usage: bottlefile [global options] state push [-lock-timeout=DUR] FILE

  Writes FILE ("-" for standard input), a document as state pull prints it,
  as the whole state, where the configuration keeps it (the file, or the
  backend "pg" block's database). It refuses a state of another lineage
  (its records name other bottles) and one older than the state it
  replaces (a lower serial). Nothing on any runtime changes.

  -lock-timeout=DUR  Wait this long for the state lock.
`)
}

func (c *StatePushCommand) Run(args []string) int {
	m := c.Meta
	fs := newFlagSet("state push")
	m.noColorFlag(fs)
	lockTimeout := fs.Duration("lock-timeout", 0, "")
	if err := fs.Parse(args); err != nil {
		return m.fail("Invalid command line", err)
	}
	if fs.NArg() != 1 {
		return m.fail("Invalid command line", fmt.Errorf("state push takes one argument: the file to push, or - for standard input"))
	}
	var data []byte
	var err error
	if fs.Arg(0) == "-" {
		data, err = io.ReadAll(m.Stdin)
	} else {
		data, err = os.ReadFile(fs.Arg(0))
	}
	if err != nil {
		return m.fail("Cannot read the state to push", err)
	}
	var doc stateDocument
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		return m.fail("Invalid state document", fmt.Errorf("%s is not a state as state pull prints it: %v", fs.Arg(0), err))
	}
	if doc.FormatVersion != "1" {
		return m.fail("Invalid state document", fmt.Errorf("%s has format_version %q; this bottlefile reads \"1\"", fs.Arg(0), doc.FormatVersion))
	}
	dir, err := m.dir()
	if err != nil {
		return m.fail("Cannot find the directory", err)
	}
	st := &operations.State{Lineage: doc.Lineage, Serial: doc.Serial, Records: doc.Objects}
	if m.showDiags(nil, operations.StatePush(dir, st, *lockTimeout)) {
		return 1
	}
	fmt.Fprintf(m.Stdout, "Pushed lineage %s, serial %d, %s.\n", st.Lineage, st.Serial, plural(len(st.Records), "record", "records"))
	return 0
}

// StateMigrateCommand copies the state between backends.
type StateMigrateCommand struct{ Meta *Meta }

func (c *StateMigrateCommand) Synopsis() string {
	return "Copy the state between the file and PostgreSQL"
}
func (c *StateMigrateCommand) Help() string {
	return strings.TrimSpace(`
Usage: bottlefile [global options] state migrate -to=pg|file [-lock-timeout=DUR]

  Copies the state between the file .bottlefile/state.db and the PostgreSQL
  database the configuration's backend "pg" block names: -to=pg after
  adding the block (the team's state from then on), -to=file before
  removing it. Lineage, serial and records are copied as they are, so the
  bottles keep their state. The destination must hold nothing yet, or an
  older serial of the same lineage: a state of another lineage is never
  written over. The source is left as it was.

  -to=BACKEND        pg or file.
  -lock-timeout=DUR  Wait this long for each state's lock.
`)
}

func (c *StateMigrateCommand) Run(args []string) int {
	m := c.Meta
	fs := newFlagSet("state migrate")
	m.noColorFlag(fs)
	to := fs.String("to", "", "")
	lockTimeout := fs.Duration("lock-timeout", 0, "")
	if err := fs.Parse(args); err != nil {
		return m.fail("Invalid command line", err)
	}
	if fs.NArg() != 0 || *to == "" {
		return m.fail("Invalid command line", fmt.Errorf("state migrate takes -to=pg or -to=file, and no arguments"))
	}
	dir, err := m.dir()
	if err != nil {
		return m.fail("Cannot find the directory", err)
	}
	mig, diags := operations.StateMigrate(dir, *to, *lockTimeout)
	if m.showDiags(nil, diags) {
		return 1
	}
	fmt.Fprintf(m.Stdout, "Copied lineage %s, serial %d, %s\n  from %s\n  to   %s.\n",
		mig.State.Lineage, mig.State.Serial, plural(len(mig.State.Records), "record", "records"), mig.From, mig.To)
	if *to == operations.BackendPG {
		fmt.Fprintln(m.Stdout, "With the backend block, bottlefile uses the database from now on; the file is left as it was, and no longer read.")
	} else {
		fmt.Fprintln(m.Stdout, "Remove the backend block to use the file; the database state is left as it was.")
	}
	return 0
}

// plural is "1 record", "2 records".
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}
