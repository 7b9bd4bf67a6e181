package command

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/bottlefile/bottlefile/operations"
)

// StateRestoreBackupCommand puts .bottlefile/state.db.backup back.
type StateRestoreBackupCommand struct{ Meta *Meta }

func (c *StateRestoreBackupCommand) Synopsis() string {
	return "Put the state's backup back in place of the state"
}

func (c *StateRestoreBackupCommand) Help() string {
	return strings.TrimSpace(`
Usage: bottlefile [global options] state restore-backup [-auto-approve] [-lock-timeout=DUR]

  Puts .bottlefile/state.db.backup, the state as it was before the last
  apply, destroy or state rm, back as .bottlefile/state.db. The file it
  replaces is kept beside it as state.db.replaced-TIME. Objects made after
  the backup was taken carry the state's lineage label, so the next plan
  shows them to be adopted or removed.

  It asks first unless -auto-approve is given, and refuses while another
  bottlefile process holds the state lock.
`)
}

func (c *StateRestoreBackupCommand) Run(args []string) int {
	m := c.Meta
	fs := newFlagSet("state restore-backup")
	m.noColorFlag(fs)
	autoApprove := fs.Bool("auto-approve", false, "")
	lockTimeout := fs.Duration("lock-timeout", 0, "")
	if err := fs.Parse(args); err != nil {
		return m.fail("Invalid command line", err)
	}
	if fs.NArg() != 0 {
		return m.fail("Invalid command line", fmt.Errorf("state restore-backup takes no arguments"))
	}
	dir, err := m.dir()
	if err != nil {
		return m.fail("Cannot find the directory", err)
	}
	if m.showDiags(nil, operations.FileStateOnly(dir, "state restore-backup")) {
		return 1
	}
	backup, err := operations.ReadStateSummary(operations.StateBackupPath(dir))
	if errors.Is(err, os.ErrNotExist) {
		return m.fail("No backup", fmt.Errorf("%s does not exist: a backup is written before each apply, destroy or state rm that finds a state", operations.StateBackupPath(dir)))
	}
	if err != nil {
		return m.fail("Cannot use the backup", err)
	}
	if !*autoApprove {
		current := "does not exist"
		if sum, err := operations.ReadStateSummary(operations.StatePath(dir)); err == nil {
			current = "holds " + sum.String()
		} else if !errors.Is(err, os.ErrNotExist) {
			current = "cannot be read: " + strings.SplitN(err.Error(), "\n", 2)[0]
		}
		fmt.Fprintf(m.Stdout, "The state %s\n  %s.\nThe backup %s\n  holds %s.\n", operations.StatePath(dir), current, operations.StateBackupPath(dir), backup)
		fmt.Fprintf(m.Stdout, "\nDo you want to put the backup back as the state?\n  Only 'yes' will be accepted to approve.\n\n  Enter a value: ")
		line, _ := bufio.NewReader(m.Stdin).ReadString('\n')
		if strings.TrimSpace(line) != "yes" {
			fmt.Fprintln(m.Stdout, "\nRestore cancelled.")
			return 1
		}
	}
	res, err := operations.StateRestoreBackup(dir, *lockTimeout)
	if err != nil {
		return m.fail("Cannot restore the backup", err)
	}
	fmt.Fprintf(m.Stdout, "Restored the state from %s (%s).\n", operations.StateBackupPath(dir), res.Backup)
	if res.Kept != "" {
		fmt.Fprintf(m.Stdout, "The replaced state is kept as %s.\n", res.Kept)
	}
	fmt.Fprintln(m.Stdout, "Run plan to see how the state compares with what runs.")
	return 0
}

// StateRelocateCommand records the working directory as the state's own.
type StateRelocateCommand struct{ Meta *Meta }

func (c *StateRelocateCommand) Synopsis() string {
	return "Record a moved directory as the state's own"
}

func (c *StateRelocateCommand) Help() string {
	return strings.TrimSpace(`
Usage: bottlefile [global options] state relocate [-lock-timeout=DUR]

  The state records the directory it belongs to. Used from another one
  (the directory was moved, or the state copied), plan warns and apply and
  destroy refuse, since the state's lineage names the bottles of the
  original directory. After moving a directory, relocate records its new
  place. After copying one, do not: remove the copy's .bottlefile instead.
`)
}

func (c *StateRelocateCommand) Run(args []string) int {
	m := c.Meta
	fs := newFlagSet("state relocate")
	m.noColorFlag(fs)
	lockTimeout := fs.Duration("lock-timeout", 0, "")
	if err := fs.Parse(args); err != nil {
		return m.fail("Invalid command line", err)
	}
	if fs.NArg() != 0 {
		return m.fail("Invalid command line", fmt.Errorf("state relocate takes no arguments"))
	}
	dir, err := m.dir()
	if err != nil {
		return m.fail("Cannot find the directory", err)
	}
	prev, diags := operations.StateRelocate(dir, *lockTimeout)
	if m.showDiags(nil, diags) {
		return 1
	}
	if prev == "" || prev == dir {
		fmt.Fprintf(m.Stdout, "The state belongs to %s.\n", dir)
		return 0
	}
	fmt.Fprintf(m.Stdout, "The state now belongs to %s (it belonged to %s).\n", dir, prev)
	return 0
}
