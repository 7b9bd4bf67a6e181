package command

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/bottlefile/bottlefile/operations"
	"github.com/bottlefile/bottlefile/planner"
)

// ShowCommand shows a saved plan, or the state.
type ShowCommand struct {
	Meta *Meta
}

func (c *ShowCommand) Synopsis() string { return "Show a saved plan or the state" }

func (c *ShowCommand) Help() string {
	return strings.TrimSpace(`
Usage: bottlefile [global options] show [-json | -markdown] [PLANFILE]

  With PLANFILE, shows the saved plan as plan would. Without, shows what
  the state records. Sensitive values are never shown.

Options:

  -json       Print one JSON document (the plan -json format for a plan
              file, the state pull format for the state).
  -markdown   With PLANFILE, print the plan as Markdown for a pull
              request comment (as plan -markdown).
  -no-color   Print without color.
`)
}

func (c *ShowCommand) Run(args []string) int {
	m := c.Meta
	fs := newFlagSet("show")
	m.noColorFlag(fs)
	asJSON := fs.Bool("json", false, "")
	asMarkdown := fs.Bool("markdown", false, "")
	diags := finishParse(fs, args, 1)
	if *asJSON && *asMarkdown {
		diags = append(diags, argError("-json and -markdown cannot be used together"))
	}
	if *asMarkdown && fs.NArg() == 0 {
		diags = append(diags, argError("-markdown shows a saved plan: give the PLANFILE"))
	}
	if m.showDiags(nil, diags) {
		return 1
	}
	if fs.NArg() == 1 {
		saved, err := planner.ReadPlanFile(fs.Arg(0))
		if err != nil {
			return m.fail("Cannot read the saved plan", err)
		}
		f := formatHuman
		switch {
		case *asJSON:
			f = formatJSON
		case *asMarkdown:
			f = formatMarkdown
		}
		if err := newPlanView(f, m.Stdout, m.Color).Plan(saved.Plan()); err != nil {
			return m.fail("Cannot write the plan", err)
		}
		return 0
	}
	dir, err := m.dir()
	if err != nil {
		return m.fail("Cannot find the directory", err)
	}
	st, diags := operations.StatePull(dir)
	if m.showDiags(nil, diags) {
		return 1
	}
	if *asJSON {
		return writeState(m, st)
	}
	if len(st.Records) == 0 {
		fmt.Fprintln(m.Stdout, "The state is empty: nothing has been applied here.")
		return 0
	}
	for i, r := range st.Records {
		if i > 0 {
			fmt.Fprintln(m.Stdout)
		}
		renderRecord(m, r)
	}
	return 0
}

// renderRecord prints one state record for humans.
func renderRecord(m *Meta, r operations.Record) {
	w := m.Stdout
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
	recs := st.Records
	if recs == nil {
		recs = []operations.Record{}
	}
	enc := json.NewEncoder(m.Stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(stateDocument{FormatVersion: "1", Lineage: st.Lineage, Serial: st.Serial, Objects: recs}); err != nil {
		return m.fail("Cannot write the state", err)
	}
	return 0
}
