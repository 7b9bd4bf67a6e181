package addrs

import "testing"

// TestOwnedKinds: a kind a driver registers is an address under an agent
// that Parse reads back and String writes; an unregistered word is still
// refused; the string helpers drivers use build what the constructors do.
func TestOwnedKinds(t *testing.T) {
	if _, err := Parse("agent.x.probe"); err == nil {
		t.Fatal("agent.x.probe parses before any driver registered probe")
	}
	RegisterOwned("probe")
	a := Agent("x").Owned("probe")
	if a.String() != "agent.x.probe" || a.Agent() != "x" || a.AgentAddr() != Agent("x") {
		t.Errorf("owned = %q (agent %q)", a, a.Agent())
	}
	if got, err := Parse("agent.x.probe"); err != nil || got != a {
		t.Errorf("Parse(agent.x.probe) = %v, %v", got, err)
	}
	if Agent("x").Owned("unregistered").IsValid() || Snapshot("s").Owned("probe").IsValid() {
		t.Error("an unregistered word, or a kind under no agent, gives an address")
	}
	for _, bad := range []string{"", "a.b", "network", "snapshot"} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("RegisterOwned(%q) accepted", bad)
				}
			}()
			RegisterOwned(bad)
		}()
	}
	for _, c := range []struct{ got, want string }{
		{NetworkOf("agent.x"), "agent.x.network"},
		{NetworkOf("agent.x.sidecar.db"), "agent.x.network"},
		{NetworkOf("snapshot.s"), ""},
		{ImageOf("agent.x"), "agent.x.image"},
		{ImageOf("agent.x.sidecar.db"), "agent.x.sidecar.db.image"},
		{ImageOf("agent.x.network"), ""},
		{SidecarOf("agent.x", "db"), "agent.x.sidecar.db"},
		{SidecarOf("runtime.r", "db"), ""},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}
