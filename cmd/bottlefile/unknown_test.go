package main

import (
	"strings"
	"testing"
)

// TestE2EUnknownCommand: the binary answers a command it does not know,
// top-level or below a parent, with the word it did not know and exit 1,
// not the usage and exit 127; a close name is suggested.
func TestE2EUnknownCommand(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cases := []struct {
		args []string
		want []string
	}{
		{[]string{"frobnicate"}, []string{`Unknown command "frobnicate"`, `"bottlefile -help" lists the commands.`}},
		{[]string{"stauts", "-json"}, []string{`Unknown command "stauts"`, `Did you mean "status"?`}},
		{[]string{"snapshot", "frob"}, []string{`Unknown command "snapshot frob"`, `"bottlefile snapshot -help" lists its subcommands.`}},
		{[]string{"state", "lst"}, []string{`Unknown command "state lst"`, `Did you mean "state list"?`}},
	}
	for _, tc := range cases {
		r := bottlefile(t, dir, tc.args...)
		if r.code != 1 {
			t.Errorf("bottlefile %s: want exit 1, got %s", strings.Join(tc.args, " "), r)
		}
		errs := strings.Join(strings.Fields(r.stderr), " ")
		for _, w := range tc.want {
			if !strings.Contains(errs, w) {
				t.Errorf("bottlefile %s: want %q on stderr, got %s", strings.Join(tc.args, " "), w, r)
			}
		}
		if strings.Contains(r.stdout+r.stderr, "Usage:") {
			t.Errorf("bottlefile %s prints the usage:\n%s", strings.Join(tc.args, " "), r)
		}
	}
	// A known command and bottlefile alone are unchanged.
	if r := bottlefile(t, dir, "version"); r.code != 0 {
		t.Errorf("bottlefile version: %s", r)
	}
	if r := bottlefile(t, dir); r.code != 127 || !strings.Contains(r.stderr, "Usage:") {
		t.Errorf("bottlefile alone: want the usage and exit 127, got %s", r)
	}
}
