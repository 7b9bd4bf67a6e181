package command

import (
	"fmt"
	"strings"

	"github.com/bottlefile/bottlefile/lang"
)

// ValidateCommand checks the Bottlefile without touching state or runtimes.
type ValidateCommand struct {
	Meta *Meta
}

func (c *ValidateCommand) Synopsis() string { return "Check that the Bottlefile is valid" }

func (c *ValidateCommand) Help() string {
	return strings.TrimSpace(`
Usage: bottlefile [global options] validate

  Checks the Bottlefile and any *.bottle.hcl and *.bottle.json beside it:
  syntax, blocks, attributes, types and references. It reads no state and
  contacts no runtime.
`)
}

func (c *ValidateCommand) Run(args []string) int {
	m := c.Meta
	fs := newFlagSet("validate")
	if m.showDiags(nil, finishParse(fs, args, 0)) {
		return 1
	}
	parser := lang.NewParser()
	cfg, diags := parser.LoadDir(m.loadDir())
	if !diags.HasErrors() {
		_, moreDiags := cfg.NewScope(nil)
		diags = append(diags, moreDiags...)
	}
	if m.showDiags(parser.Files(), diags) {
		return 1
	}
	fmt.Fprintln(m.Stdout, "Success! The configuration is valid.")
	return 0
}
