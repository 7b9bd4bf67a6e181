package command

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/bottlefile/bottlefile/operations"
	"github.com/bottlefile/bottlefile/units"
)

// snapshotsView renders snapshot list: an aligned table for people, or
// one JSON document.
type snapshotsView interface {
	// Snapshots lists snaps, those of agent addr when it is not "", with
	// their ages at at.
	Snapshots(snaps []operations.Snapshot, addr string, at time.Time) error
}

func newSnapshotsView(asJSON bool, w io.Writer) snapshotsView {
	if asJSON {
		return jsonSnapshotsView{w}
	}
	return humanSnapshotsView{w}
}

type humanSnapshotsView struct{ w io.Writer }

func (v humanSnapshotsView) Snapshots(snaps []operations.Snapshot, addr string, at time.Time) error {
	renderSnapshots(v.w, snaps, addr, at)
	return nil
}

type jsonSnapshotsView struct{ w io.Writer }

func (v jsonSnapshotsView) Snapshots(snaps []operations.Snapshot, _ string, _ time.Time) error {
	return writeSnapshotsJSON(v.w, snaps)
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
