package operations

import "testing"

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
