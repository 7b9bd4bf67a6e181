package operations

import (
	"strings"
	"testing"
)

func TestSuggestAddress(t *testing.T) {
	known := []string{"agent.claude", "agent.claude.network", "agent.claude.sidecar.git", "agent.codex", "agent.claude.snapshot.1"}
	for _, tc := range []struct{ given, want string }{
		{"agent.clade", "agent.claude"},
		{"agent.Claude", "agent.claude"},
		{"agent.claude.sidecar.gti", "agent.claude.sidecar.git"},
		{"agent.codx", "agent.codex"},
		{"agent.claude.snapshot.2", "agent.claude.snapshot.1"},
		{"agent.claude", ""}, // known: nothing to suggest
		{"agent.zzzzzzzz", ""},
		{"sidecar.git", ""},
	} {
		if got := SuggestAddress(tc.given, known); got != tc.want {
			t.Errorf("SuggestAddress(%q) = %q, want %q", tc.given, got, tc.want)
		}
	}
}

// TestAddressHint: a close known address wins; else an address of no known
// form says what is wrong with it; a well-formed unknown one gets nothing.
func TestAddressHint(t *testing.T) {
	known := []string{"agent.claude", "agent.claude.network", "agent.claude.snapshot.1"}
	for _, tc := range []struct{ given, want string }{
		{"agent.claude.netwrk", ` Did you mean "agent.claude.network"?`},
		{"agent.zzzzzzzz", ""},
		{"agent.zzzzzzzz.snapshot.0", ` "agent.zzzzzzzz.snapshot.0" is not an address: policy snapshot number "0" is not a number from 1 (agent.zzzzzzzz.snapshot.N).`},
		{"zzzzzzzz", ` "zzzzzzzz" is not an address: it starts with "zzzzzzzz"; an address is one of `},
	} {
		got := addressHint(tc.given, known)
		if tc.want == "" && got != "" || !strings.HasPrefix(got, tc.want) {
			t.Errorf("addressHint(%q) = %q, want %q", tc.given, got, tc.want)
		}
	}
}
