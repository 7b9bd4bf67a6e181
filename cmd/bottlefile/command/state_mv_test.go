package command

import (
	"strings"
	"testing"
)

// TestStateMvCommand: state mv moves an agent's records with what it
// owns and says so, one line each; the renamed block then plans nothing
// and apply changes nothing on the runtime. A wrong number of addresses,
// a move onto a recorded agent and a move to itself exit 1 and say why.
func TestStateMvCommand(t *testing.T) {
	w := newWorkspace(t)
	w.write("agent \"before\" {\n  image = \"alpine:3\"\n}\n\nagent \"other\" {\n  image = \"alpine:3\"\n}\n")
	w.must("apply", "-auto-approve")
	objects := len(w.fake.Objects(w.lineage()))

	for _, bad := range []struct {
		args []string
		want string
	}{
		{[]string{"agent.before"}, "state mv needs two addresses"},
		{[]string{"agent.before", "agent.other"}, "Moved object already exists"},
		{[]string{"agent.before", "agent.before"}, "Redundant move"},
		{[]string{"agent.before.network", "agent.x"}, "Invalid move address"},
	} {
		if code, _, errs := w.run("state mv", bad.args...); code != 1 || !strings.Contains(errs, bad.want) {
			t.Errorf("state mv %v: exit %d, %q; want 1 with %q", bad.args, code, errs, bad.want)
		}
	}

	out := w.must("state mv", "agent.before", "agent.after")
	if want := "Moved agent.before to agent.after.\nMoved agent.before.network to agent.after.network.\n"; out != want {
		t.Errorf("state mv said %q, want %q", out, want)
	}
	w.write("agent \"after\" {\n  image = \"alpine:3\"\n}\n\nagent \"other\" {\n  image = \"alpine:3\"\n}\n")
	if out := w.must("plan"); !strings.Contains(out, "No changes.") {
		t.Errorf("plan after state mv:\n%s", out)
	}
	w.must("apply", "-auto-approve")
	if got := len(w.fake.Objects(w.lineage())); got != objects {
		t.Errorf("after state mv and apply the runtime holds %d objects, before %d", got, objects)
	}
	if !strings.Contains(w.must("state list"), "agent.after.network") {
		t.Errorf("state list lacks agent.after.network")
	}
}
