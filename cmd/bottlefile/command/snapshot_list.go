package command

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/bottlefile/bottlefile/operations"
	"github.com/bottlefile/bottlefile/units"
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
	if *asJSON {
		if err := writeSnapshotsJSON(m.Stdout, snaps); err != nil {
			return m.fail("Cannot write the list", err)
		}
		return 0
	}
	renderSnapshots(m.Stdout, snaps, addr, now())
	return 0
}

// renderSnapshots writes the snapshots as an aligned table.
func renderSnapshots(w io.Writer, snaps []operations.Snapshot, addr string, at time.Time) {
	if len(snaps) == 0 {
		if addr != "" {
			fmt.Fprintf(w, "The state records no snapshot of %s.\n", addr)
		} else {
			fmt.Fprintln(w, "The state records no snapshot.")
		}
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ADDRESS\tAGENT\tTRIGGER\tSIZE\tTAKEN\tBOOTED BY\tDESCRIPTION")
	for _, s := range snaps {
		size := "-"
		if s.Size >= 0 {
			size = units.FormatBytes(s.Size)
		}
		booted := "-"
		if len(s.BootedBy) > 0 {
			booted = strings.Join(s.BootedBy, ",")
		}
		description := s.Description
		if description == "" {
			description = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.Addr, s.Agent, s.Trigger, size, age(s.Taken, at), booted, description)
	}
	tw.Flush()
}

// age says how long before at t was: "40s ago", "12m ago", "3h ago",
// "5d ago"; "-" when unknown.
func age(t, at time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := at.Sub(t)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds ago", max(0, int(d.Seconds())))
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh ago", int(d.Hours()))
	}
	return fmt.Sprintf("%dd ago", int(d.Hours()/24))
}

// snapshotsJSON is snapshot list -json: one document; the field names are
// stable.
type snapshotsJSON struct {
	FormatVersion string         `json:"format_version"`
	Snapshots     []snapshotJSON `json:"snapshots"`
}

type snapshotJSON struct {
	Address     string   `json:"address"`
	Agent       string   `json:"agent"`
	Trigger     string   `json:"trigger"`
	Description string   `json:"description"`
	Runtime     string   `json:"runtime"`
	Image       string   `json:"image"`
	SizeBytes   *int64   `json:"size_bytes"` // null when not recorded
	Taken       *string  `json:"taken"`      // RFC 3339; null when not recorded
	BootedBy    []string `json:"booted_by"`
}

func writeSnapshotsJSON(w io.Writer, snaps []operations.Snapshot) error {
	doc := snapshotsJSON{FormatVersion: "1.0", Snapshots: []snapshotJSON{}}
	for _, s := range snaps {
		j := snapshotJSON{
			Address: s.Addr, Agent: s.Agent, Trigger: s.Trigger, Description: s.Description,
			Runtime: s.Runtime, Image: s.Image, BootedBy: s.BootedBy,
		}
		if j.BootedBy == nil {
			j.BootedBy = []string{}
		}
		if s.Size >= 0 {
			j.SizeBytes = &s.Size
		}
		if !s.Taken.IsZero() {
			taken := s.Taken.UTC().Format(time.RFC3339)
			j.Taken = &taken
		}
		doc.Snapshots = append(doc.Snapshots, j)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(doc)
}
