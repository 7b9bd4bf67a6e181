//go:build bottlefile_unmappedrow

package workloadattr

import "github.com/zclconf/go-cty/cty"

// A row no driver maps, added only under the bottlefile_unmappedrow build
// tag (before lang and drivers derive their tables from Rows), so that
// operations' TestValidateRefusesUnmappedRow sees validate refuse an
// attribute that is a row and nothing more.
func init() {
	Rows = append(Rows, Row{Name: "unmapped_probe", Type: cty.Number, Example: cty.NumberIntVal(1), Doc: "a row no driver maps (test only)"})
}
