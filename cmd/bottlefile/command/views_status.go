package command

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/bottlefile/bottlefile/operations"
	"github.com/bottlefile/bottlefile/planner"
	"github.com/bottlefile/bottlefile/units"
)

// statusView renders what status reports: an aligned table for people,
// or one JSON document.
type statusView interface {
	Status(bottles []operations.BottleStatus, at time.Time) error
}

func newStatusView(asJSON bool, w io.Writer) statusView {
	if asJSON {
		return jsonStatusView{w}
	}
	return humanStatusView{w}
}

type humanStatusView struct{ w io.Writer }

func (v humanStatusView) Status(bottles []operations.BottleStatus, at time.Time) error {
	if len(bottles) == 0 {
		_, err := fmt.Fprintln(v.w, "The Bottlefile declares no agent and the state records none.")
		return err
	}
	renderStatus(v.w, bottles, at)
	return nil
}

type jsonStatusView struct{ w io.Writer }

func (v jsonStatusView) Status(bottles []operations.BottleStatus, at time.Time) error {
	return writeStatusJSON(v.w, bottles, at)
}

// renderStatus writes one line per bottle and one per workload below it,
// aligned.
func renderStatus(w io.Writer, bottles []operations.BottleStatus, at time.Time) {
	var buf strings.Builder
	tw := tabwriter.NewWriter(&buf, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "BOTTLE / WORKLOAD\tSTATE\tSINCE\tWRITTEN\tBOOTED FROM\tNEWEST SNAPSHOT\tEGRESS\tDENIALS (1H)")
	for _, b := range bottles {
		running := 0
		for _, wl := range b.Workloads {
			if wl.State == operations.WorkloadRunning {
				running++
			}
		}
		state := fmt.Sprintf("%d of %d running", running, len(b.Workloads))
		if len(b.Workloads) == 1 && b.Workloads[0].State == operations.WorkloadNotCreated {
			state = operations.WorkloadNotCreated
		}
		if b.Idle != nil {
			state += ", idle " + planner.ShortDuration(*b.Idle)
		}
		since := ""
		if archived, at := archivedBottle(b, at); archived != "" {
			state, since = archived, at
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t\t%s\t%s\t%s\t%s\n", b.Addr, state, since, bootedFrom(b), newestSnapshot(b, at), egressRules(b), denials(b))
		for _, wl := range b.Workloads {
			if wl.State == operations.WorkloadNotCreated {
				continue
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t\t\t\t\n", wl.Addr, workloadState(wl), workloadSince(wl, at), written(wl.Written))
		}
	}
	tw.Flush()
	// Workload lines leave the bottle columns empty: no trailing blanks.
	for _, line := range strings.SplitAfter(buf.String(), "\n") {
		if line != "" {
			fmt.Fprintln(w, strings.TrimRight(line, " \n"))
		}
	}
	// A gateway whose files were changed by hand, under the table: too
	// long for a column, and the next apply acts on it.
	for _, b := range bottles {
		for _, wl := range b.Workloads {
			if wl.Drift != "" {
				fmt.Fprintf(w, "\n%s: %s; the next apply writes them again.\n", wl.Addr, wl.Drift)
			}
		}
	}
}

// archivedBottle is "archived" and how long ago ("3d ago") for a bottle
// whose agent is archived; "" otherwise.
func archivedBottle(b operations.BottleStatus, at time.Time) (state, since string) {
	for _, wl := range b.Workloads {
		if wl.Role == "agent" && wl.State == operations.WorkloadArchived {
			since = "-"
			if !wl.Finished.IsZero() {
				since = age(wl.Finished, at)
			}
			return operations.WorkloadArchived, since
		}
	}
	return "", ""
}

// workloadState is a workload's state, and where it runs on a runtime of
// several machines ("running on node2").
func workloadState(wl operations.WorkloadStatus) string {
	state := wl.State
	switch {
	case wl.StoppedFor != "":
		state = "stopped (" + wl.StoppedFor + ")"
	case wl.State == operations.WorkloadExited && wl.ExitCode != nil:
		state = fmt.Sprintf("exited (%d)", *wl.ExitCode)
	case wl.State == operations.WorkloadExited && wl.RuntimeState != "" && wl.RuntimeState != "exited":
		state = "exited (" + wl.RuntimeState + ")"
	}
	if wl.Node != "" {
		state += " on " + wl.Node
	}
	return state
}

// workloadSince is how long a workload has been up, or how long ago it
// stopped or was created.
func workloadSince(wl operations.WorkloadStatus, at time.Time) string {
	switch {
	case wl.State == operations.WorkloadRunning && !wl.Started.IsZero():
		return "up " + strings.TrimSuffix(age(wl.Started, at), " ago")
	case (wl.State == operations.WorkloadExited || wl.State == operations.WorkloadArchived) && !wl.Finished.IsZero():
		return age(wl.Finished, at)
	case wl.State == operations.WorkloadNeverStarted && !wl.Created.IsZero():
		return "created " + age(wl.Created, at)
	}
	return "-"
}

func written(n *int64) string {
	if n == nil {
		return "-"
	}
	return units.FormatBytes(*n)
}

func bootedFrom(b operations.BottleStatus) string {
	switch {
	case b.BootSnapshot != "":
		return "snapshot " + b.BootSnapshot
	case b.BootImage != "":
		return "image " + b.BootImage
	}
	return "-"
}

func newestSnapshot(b operations.BottleStatus, at time.Time) string {
	if b.Newest == nil {
		return "none"
	}
	line := b.Newest.Addr + " " + age(b.Newest.Taken, at)
	if b.Newest.Size >= 0 {
		// What it adds over its base image (README, Snapshots).
		line += ", " + units.FormatBytes(b.Newest.Size)
	}
	return line
}

func egressRules(b operations.BottleStatus) string {
	switch {
	case !b.EgressKnown:
		return "-"
	case len(b.Egress) == 0:
		return "none allowed"
	}
	return strings.Join(b.Egress, ",")
}

func denials(b operations.BottleStatus) string {
	if b.Denials == nil {
		return "-"
	}
	return fmt.Sprint(*b.Denials)
}

// statusJSON is status -json: one document; the field names are stable.
type statusJSON struct {
	FormatVersion string       `json:"format_version"`
	Bottles       []bottleJSON `json:"bottles"`
}

type bottleJSON struct {
	Address        string          `json:"address"`
	Runtime        string          `json:"runtime"`
	Driver         string          `json:"driver"`
	BootedFrom     bootedFromJSON  `json:"booted_from"`
	NewestSnapshot *newestSnapJSON `json:"newest_snapshot"` // null when none
	// Egress is null when no rules are recorded; [] when all is denied.
	Egress []string `json:"egress"`
	// DenialsLastHour is null when the gateway's decisions could not be read.
	DenialsLastHour *int           `json:"denials_last_hour"`
	Workloads       []workloadJSON `json:"workloads"`
	// IdleSeconds is how long an agent with an idle policy has gone
	// unused, while it runs and its runtime tells.
	IdleSeconds *int64 `json:"idle_seconds,omitempty"`
}

type bootedFromJSON struct {
	Image    *string `json:"image"`
	Snapshot *string `json:"snapshot"`
}

type newestSnapJSON struct {
	Address string  `json:"address"`
	Taken   *string `json:"taken"`
	// SizeBytes is what it adds over its base image; null when not
	// recorded.
	SizeBytes *int64 `json:"size_bytes"`
}

type workloadJSON struct {
	Address      string  `json:"address"`
	Role         string  `json:"role"`
	ID           string  `json:"id"`
	State        string  `json:"state"`
	RuntimeState string  `json:"runtime_state"`
	ExitCode     *int    `json:"exit_code"`
	Created      *string `json:"created"`
	Started      *string `json:"started"`
	Finished     *string `json:"finished"`
	// UptimeSeconds is set while it runs and its start is known.
	UptimeSeconds *int64 `json:"uptime_seconds"`
	WrittenBytes  *int64 `json:"written_bytes"`
	// Node is where it runs, on a runtime of several machines.
	Node string `json:"node,omitempty"`
	// Drift says what of a gateway's files were changed by hand.
	Drift string `json:"drift,omitempty"`
	// StoppedFor is why it was stopped on purpose, when by a policy
	// ("idle").
	StoppedFor string `json:"stopped_for,omitempty"`
}

func writeStatusJSON(w io.Writer, bottles []operations.BottleStatus, at time.Time) error {
	doc := statusJSON{FormatVersion: "1.0", Bottles: []bottleJSON{}}
	for _, b := range bottles {
		j := bottleJSON{
			Address: b.Addr, Runtime: b.Runtime, Driver: b.Driver,
			BootedFrom:      bootedFromJSON{Image: optString(b.BootImage), Snapshot: optString(b.BootSnapshot)},
			DenialsLastHour: b.Denials, Workloads: []workloadJSON{},
		}
		if b.Idle != nil {
			idle := int64(b.Idle.Seconds())
			j.IdleSeconds = &idle
		}
		if b.EgressKnown {
			j.Egress = append([]string{}, b.Egress...)
		}
		if b.Newest != nil {
			j.NewestSnapshot = &newestSnapJSON{Address: b.Newest.Addr, Taken: optTime(b.Newest.Taken)}
			if b.Newest.Size >= 0 {
				size := b.Newest.Size
				j.NewestSnapshot.SizeBytes = &size
			}
		}
		for _, wl := range b.Workloads {
			wj := workloadJSON{
				Address: wl.Addr, Role: wl.Role, ID: wl.ID, State: wl.State, RuntimeState: wl.RuntimeState,
				ExitCode: wl.ExitCode, Created: optTime(wl.Created), Started: optTime(wl.Started),
				Finished: optTime(wl.Finished), WrittenBytes: wl.Written, Node: wl.Node, Drift: wl.Drift, StoppedFor: wl.StoppedFor,
			}
			if wl.State == operations.WorkloadRunning && !wl.Started.IsZero() {
				up := int64(max(0, at.Sub(wl.Started).Seconds()))
				wj.UptimeSeconds = &up
			}
			j.Workloads = append(j.Workloads, wj)
		}
		doc.Bottles = append(doc.Bottles, j)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(doc)
}

func optString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func optTime(t time.Time) *string {
	if t.IsZero() {
		return nil
	}
	s := t.UTC().Format(time.RFC3339)
	return &s
}
