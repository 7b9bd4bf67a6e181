package command

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/bottlefile/bottlefile/operations"
	"github.com/bottlefile/bottlefile/planner"
)

// stateView renders the state, as show prints it without a plan file:
// each record for people, or one JSON document (as state pull).
type stateView interface {
	State(st *operations.State) error
}

func newStateView(asJSON bool, w io.Writer) stateView {
	if asJSON {
		return jsonStateView{w}
	}
	return humanStateView{w}
}

type humanStateView struct{ w io.Writer }

func (v humanStateView) State(st *operations.State) error {
	if len(st.Records) == 0 {
		_, err := fmt.Fprintln(v.w, "The state is empty: nothing has been applied here.")
		return err
	}
	for i, r := range st.Records {
		if i > 0 {
			fmt.Fprintln(v.w)
		}
		writeRecord(v.w, r)
	}
	return nil
}

type jsonStateView struct{ w io.Writer }

func (v jsonStateView) State(st *operations.State) error { return writeStateJSON(v.w, st) }

// renderRecord prints one state record for humans.
func renderRecord(m *Meta, r operations.Record) { writeRecord(m.Stdout, r) }

func writeRecord(w io.Writer, r operations.Record) {
	fmt.Fprintf(w, "# %s (%s)\n", r.Addr, r.Kind)
	rows := [][2]string{
		{"id", r.ID}, {"driver", r.Driver}, {"runtime", r.Runtime}, {"config_hash", r.Hash},
		{"created_at", r.CreatedAt.Format("2006-01-02T15:04:05Z07:00")}, {"updated_at", r.UpdatedAt.Format("2006-01-02T15:04:05Z07:00")},
	}
	if len(r.DependsOn) > 0 {
		rows = append(rows, [2]string{"depends_on", strings.Join(r.DependsOn, ", ")})
	}
	if r.PreventDestroy {
		rows = append(rows, [2]string{"prevent_destroy", "true"})
	}
	for _, k := range sortedNames(r.Attrs) {
		if !isNull(r.Attrs[k]) {
			rows = append(rows, [2]string{k, planner.FormatJSON(r.Attrs[k])})
		}
	}
	for _, k := range sortedNames(r.Computed) {
		rows = append(rows, [2]string{k, r.Computed[k]})
	}
	width := 0
	for _, row := range rows {
		width = max(width, len(row[0]))
	}
	for _, row := range rows {
		fmt.Fprintf(w, "  %-*s = %s\n", width, row[0], row[1])
	}
}

// stateDocument is what state pull and show -json print.
type stateDocument struct {
	FormatVersion string              `json:"format_version"`
	Lineage       string              `json:"lineage"`
	Serial        uint64              `json:"serial"`
	Objects       []operations.Record `json:"objects"`
}

// writeState prints the state as state pull and show -json do.
func writeState(m *Meta, st *operations.State) int {
	if err := writeStateJSON(m.Stdout, st); err != nil {
		return m.fail("Cannot write the state", err)
	}
	return 0
}

func writeStateJSON(w io.Writer, st *operations.State) error {
	recs := st.Records
	if recs == nil {
		recs = []operations.Record{}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(stateDocument{FormatVersion: "1", Lineage: st.Lineage, Serial: st.Serial, Objects: recs})
}
