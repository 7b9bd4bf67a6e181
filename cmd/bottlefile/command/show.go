package command

import (
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
	if err := newStateView(*asJSON, m.Stdout).State(st); err != nil {
		return m.fail("Cannot write the state", err)
	}
	return 0
}
