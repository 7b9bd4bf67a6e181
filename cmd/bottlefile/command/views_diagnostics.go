package command

import (
	"encoding/json"
	"fmt"

	"github.com/hashicorp/hcl/v2"

	"github.com/bottlefile/bottlefile/lang"
)

// validateView renders validate's result, its diagnostics: for people on
// standard error, with the source lines they point at (Meta.showDiags,
// as every command shows them), or as one JSON document on standard
// output. (apply -json streams diagnostics as events: jsonApplyView.)
type validateView interface {
	// Validated shows diags and reports whether the configuration is
	// valid.
	Validated(files map[string]*hcl.File, diags hcl.Diagnostics) bool
}

func newValidateView(asJSON bool, m *Meta) validateView {
	if asJSON {
		return jsonValidateView{m}
	}
	return humanValidateView{m}
}

type humanValidateView struct{ m *Meta }

func (v humanValidateView) Validated(files map[string]*hcl.File, diags hcl.Diagnostics) bool {
	if v.m.showDiags(files, diags) {
		return false
	}
	fmt.Fprintln(v.m.Stdout, "Success! The configuration is valid.")
	return true
}

// validateDocument is what validate -json prints.
type validateDocument struct {
	Valid        bool                  `json:"valid"`
	ErrorCount   int                   `json:"error_count"`
	WarningCount int                   `json:"warning_count"`
	Diagnostics  []lang.JSONDiagnostic `json:"diagnostics"`
}

type jsonValidateView struct{ m *Meta }

func (v jsonValidateView) Validated(files map[string]*hcl.File, diags hcl.Diagnostics) bool {
	doc := validateDocument{Valid: !diags.HasErrors(), Diagnostics: lang.JSONDiagnostics(files, diags)}
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
	enc := json.NewEncoder(v.m.Stdout)
	enc.SetIndent("", "  ")
	enc.Encode(doc)
	return doc.Valid
}
