//go:build bottlefile_unmappedrow

package operations

import "testing"

// TestValidateRefusesUnmappedRow: with a row in workloadattr that no
// driver lists (workloadattr/unmapped_row.go), lang decodes the attribute
// and validate refuses it at its line, naming the agent's driver, for
// each driver. Run by TestUnmappedRowIsRefused.
func TestValidateRefusesUnmappedRow(t *testing.T) {
	path := "testdata/validate-unmapped/Bottlefile"
	want := expectedErrors(t, path)
	_, diags := Validate(ValidateRequest{LoadDir: "testdata/validate-unmapped", Registry: guardedRegistry(t)})
	checkErrors(t, want, diags)
}
