package command

import (
	"strings"

	"github.com/bottlefile/bottlefile/operations"
)

// ValidateCommand checks the Bottlefile without touching state or runtimes.
type ValidateCommand struct {
	Meta *Meta
}

func (c *ValidateCommand) Synopsis() string { return "Check that the Bottlefile is valid" }

func (c *ValidateCommand) Help() string {
	return strings.TrimSpace(`
Usage: bottlefile [global options] validate [-json]

  Checks the Bottlefile and any *.bottle.hcl and *.bottle.json beside it:
  syntax, blocks, attributes, types, references and egress rules; that
  every runtime names a known driver and sets only that driver's
  attributes; and that every agent asks its runtime's driver only for what
  the driver declares it can do (sidecars, build, attributes, the egress
  rules it can enforce). It reads no state and contacts no runtime.
  Variables need no values: every expression is checked with unknown ones.

Options:

  -json       Print the result as one JSON document with every diagnostic
              and its range.
  -no-color   Print without color.
`)
}

func (c *ValidateCommand) Run(args []string) int {
	m := c.Meta
	fs := newFlagSet("validate")
	m.noColorFlag(fs)
	asJSON := fs.Bool("json", false, "")
	if m.showDiags(nil, finishParse(fs, args, 0)) {
		return 1
	}
	parser, diags := operations.Validate(operations.ValidateRequest{LoadDir: m.loadDir(), Registry: m.Registry, Log: m.Log})
	if !newValidateView(*asJSON, m).Validated(parser.Files(), diags) {
		return 1
	}
	return 0
}
