package operations

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestUnmappedRowIsRefused runs TestValidateRefusesUnmappedRow in a test
// binary built with the bottlefile_unmappedrow tag, whose workloadattr
// table has one more row that no driver maps: the new attribute is
// decoded, and validate refuses it at its line naming the driver, instead
// of accepting and dropping it.
func TestUnmappedRowIsRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a second test binary")
	}
	cmd := exec.Command("go", "test", "-count=1", "-tags", "bottlefile_unmappedrow", "-run", "^TestValidateRefusesUnmappedRow$", "-v", ".")
	cmd.Env = os.Environ()
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestValidateRefusesUnmappedRow") {
		t.Fatalf("with a row no driver maps: %v\n%s", err, out)
	}
}
