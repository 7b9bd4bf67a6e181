package state

import (
	"strings"
	"testing"
)

// TestSummarySingular: one record is "1 record", not "1 records".
func TestSummarySingular(t *testing.T) {
	for n, want := range map[int]string{0: "0 records", 1: "1 record,", 2: "2 records"} {
		if got := (Summary{Lineage: "l", Records: n}).String(); !strings.Contains(got, want) {
			t.Errorf("%d records: %q lacks %q", n, got, want)
		}
	}
}
