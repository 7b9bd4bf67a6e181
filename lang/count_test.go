package lang

import "testing"

// TestCountSingular: "1 element", "2 elements" in the descriptions of values.
func TestCountSingular(t *testing.T) {
	for n, want := range map[int]string{0: "0 elements", 1: "1 element", 2: "2 elements"} {
		if got := count(n, "element"); got != want {
			t.Errorf("count(%d) = %q, want %q", n, got, want)
		}
	}
}
