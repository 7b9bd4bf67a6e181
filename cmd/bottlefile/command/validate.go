package command

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/hashicorp/hcl/v2"

	"github.com/bottlefile/bottlefile/lang"
	"github.com/bottlefile/bottlefile/operations"
)

// validateDocument is what validate -json prints.
type validateDocument struct {
	Valid        bool                  `json:"valid"`
	ErrorCount   int                   `json:"error_count"`
	WarningCount int                   `json:"warning_count"`
	Diagnostics  []lang.JSONDiagnostic `json:"diagnostics"`
}

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
	if *asJSON {
		doc := validateDocument{Valid: !diags.HasErrors(), Diagnostics: lang.JSONDiagnostics(parser.Files(), diags)}
		for _, d := range diags {
			if d.Severity == hcl.DiagError {
				doc.ErrorCount++
			} else {
				doc.WarningCount++
			}
		}
		if doc.Diagnostics == nil {
			doc.Diagnostics = []lang.JSONDiagnostic{}
		}
		enc := json.NewEncoder(m.Stdout)
		enc.SetIndent("", "  ")
		enc.Encode(doc)
		if !doc.Valid {
			return 1
		}
		return 0
	}
	if m.showDiags(parser.Files(), diags) {
		return 1
	}
	fmt.Fprintln(m.Stdout, "Success! The configuration is valid.")
	return 0
}
