package command

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/bottlefile/bottlefile/operations"
)

// now is the clock snapshot list measures ages with; tests fix it.
var now = time.Now

// SnapshotListCommand lists the recorded snapshots.
type SnapshotListCommand struct{ Meta *Meta }

func (c *SnapshotListCommand) Synopsis() string { return "List the recorded snapshots" }

func (c *SnapshotListCommand) Help() string {
	return strings.TrimSpace(`
Usage: bottlefile [global options] snapshot list [options] [ADDR]

  Lists the snapshots the state records: the policy snapshots
  (agent.NAME.snapshot.N) and the snapshot blocks (snapshot.NAME). With
  ADDR, only those of agent ADDR, or the one at ADDR. For each: what took
  it (before replace, before destroy, migrate, take, import, or its
  block), its size, how long ago it was taken, and the workloads that were
  created from it. It reads the state only; no runtime is asked.

Options:

  -json                Print one JSON document.
  -lock-timeout=DUR    Wait this long for the state lock (default 0s).
`)
}

func (c *SnapshotListCommand) Run(args []string) int {
	m := c.Meta
	fs := newFlagSet("snapshot list")
	m.noColorFlag(fs)
	asJSON := fs.Bool("json", false, "")
	lockTimeout := fs.Duration("lock-timeout", 0, "")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return m.fail("Invalid command line", fmt.Errorf("%v. Run with -help to see the options", err))
	}
	if len(pos) > 1 {
		return m.fail("Invalid command line", errors.New("snapshot list takes at most one address: agent.NAME, or a snapshot's"))
	}
	addr := ""
	if len(pos) == 1 {
		addr = pos[0]
	}
	dir, err := m.dir()
	if err != nil {
		return m.fail("Cannot find the working directory", err)
	}
	snaps, err := operations.ListSnapshots(dir, addr, *lockTimeout)
	if err != nil {
		return m.fail("Cannot list snapshots", err)
	}
	if err := newSnapshotsView(*asJSON, m.Stdout).Snapshots(snaps, addr, now()); err != nil {
		return m.fail("Cannot write the list", err)
	}
	return 0
}
