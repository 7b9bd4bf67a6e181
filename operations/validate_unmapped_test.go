//go:build bottlefile_unmappedrow

package operations

import (
	"slices"
	"testing"

	"github.com/hashicorp/hcl/v2"
)

// TestValidateRefusesUnmappedRow: with a row in workloadattr that no
// driver lists (workloadattr/unmapped_row.go), lang decodes the attribute
// and validate refuses it at its line, naming the agent's driver, for
// each driver. Run by TestUnmappedRowIsRefused.
func TestValidateRefusesUnmappedRow(t *testing.T) {
	path := "testdata/validate-unmapped/Bottlefile"
	want := expectedErrors(t, path)
	_, diags := Validate(ValidateRequest{LoadDir: "testdata/validate-unmapped", Registry: guardedRegistry(t)})
	var got []string
	for _, d := range diags {
		if d.Severity == hcl.DiagError {
			got = append(got, describe(d))
		}
	}
	for _, w := range want {
		i := slices.IndexFunc(got, func(g string) bool { return matches(g, w) })
		if i < 0 {
			t.Errorf("missing error %s", w)
			continue
		}
		got = slices.Delete(got, i, i+1)
	}
	for _, g := range got {
		t.Errorf("unexpected error %s", g)
	}
}
