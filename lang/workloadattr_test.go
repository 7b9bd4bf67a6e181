package lang

import (
	"testing"

	"github.com/bottlefile/bottlefile/workloadattr"
)

// TestWorkloadChecksAreRows: every check lang keeps for a plain workload
// attribute is for a row of workloadattr's table, so a check cannot
// outlive its attribute, and lang decodes each row once, in order.
func TestWorkloadChecksAreRows(t *testing.T) {
	for _, f := range workloadFieldChecks {
		if _, ok := workloadattr.Lookup(f.name); !ok {
			t.Errorf("lang checks %q, which is not a workloadattr row", f.name)
		}
	}
	if len(workloadFields) != len(workloadattr.Rows) {
		t.Fatalf("%d fields for %d rows", len(workloadFields), len(workloadattr.Rows))
	}
	for i, r := range workloadattr.Rows {
		if workloadFields[i].name != r.Name {
			t.Errorf("field %d is %q, row %q", i, workloadFields[i].name, r.Name)
		}
	}
}
