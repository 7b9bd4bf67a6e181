package command

import (
	"path/filepath"
	"strings"
	"testing"
)

const claudeAndCodex = `
agent "claude" {
  image   = "busybox:1"
  command = ["sleep", "600"]
}

agent "codex" {
  image = "busybox:1"
}
`

// TestDidYouMean: every command that takes an address answers a mistyped
// one with the address it was probably meant to be. The errors are golden
// files in testdata/did-you-mean.
func TestDidYouMean(t *testing.T) {
	w := newWorkspace(t)
	w.write(claudeAndCodex)
	w.must("apply", "-auto-approve")
	w.must("snapshot take", "agent.claude")

	cases := []struct {
		name string
		args []string
		want string
	}{
		{"logs", []string{"logs", "agent.clade"}, `Did you mean "agent.claude"?`},
		{"status", []string{"status", "agent.clade"}, `Did you mean "agent.claude"?`},
		{"exec", []string{"exec", "agent.clade", "--", "true"}, `Did you mean "agent.claude"?`},
		{"logs-network", []string{"logs", "agent.claude.netwrk"}, `Did you mean "agent.claude.network"?`},
		{"plan-target", []string{"plan", "-target=agent.clade"}, `Did you mean "agent.claude"?`},
		{"plan-replace", []string{"plan", "-replace=agent.codx"}, `Did you mean "agent.codex"?`},
		{"destroy-target", []string{"destroy", "-auto-approve", "-target=agent.codx"}, `Did you mean "agent.codex"?`},
		{"snapshot-take", []string{"snapshot take", "agent.clade"}, `Did you mean "agent.claude"?`},
		{"snapshot-list", []string{"snapshot list", "agent.claude.snapshot.2"}, `Did you mean "agent.claude.snapshot.1"?`},
		{"snapshot-rm", []string{"snapshot rm", "agent.claude.snapshot.2"}, `Did you mean "agent.claude.snapshot.1"?`},
		{"state-show", []string{"state show", "agent.Claude"}, `Did you mean "agent.claude"?`},
		{"state-rm", []string{"state rm", "agent.codex.netwrk"}, `Did you mean "agent.codex.network"?`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errs := w.run(tc.args[0], tc.args[1:]...)
			if code != 1 {
				t.Fatalf("%v: exit %d, want 1\n%s%s", tc.args, code, out, errs)
			}
			if !strings.Contains(strings.Join(strings.Fields(errs), " "), tc.want) {
				t.Errorf("%v does not suggest the address: want %q in\n%s", tc.args, tc.want, errs)
			}
			golden(t, filepath.Join("testdata", "did-you-mean", tc.name+".txt"), w.normalize(errs))
		})
	}
	// A name far from every address gets no guess.
	if _, _, errs := w.run("logs", "agent.zzzzzzzz"); strings.Contains(errs, "Did you mean") {
		t.Errorf("a far-off address got a suggestion:\n%s", errs)
	}
}

// TestUnknownCommand: a command line whose command is not registered says
// so, with the closest command among those beside it, and exits 1, for a
// subcommand too; one naming a command, or none, is left to the CLI. The
// errors are golden files in testdata/did-you-mean.
func TestUnknownCommand(t *testing.T) {
	m := &Meta{}
	commands := Commands(m)
	commands["gateway"] = commands["version"] // hidden, as main registers it
	hidden := []string{"gateway"}

	cases := []struct {
		name string
		args []string
		want string // "" for no suggestion
	}{
		{"unknown-frobnicate", []string{"frobnicate"}, ""},
		{"unknown-stauts", []string{"stauts", "agent.coder"}, `Did you mean "status"?`},
		{"unknown-aply", []string{"aply", "-auto-approve"}, `Did you mean "apply"?`},
		{"unknown-snapshot-frob", []string{"snapshot", "frob"}, ""},
		{"unknown-snapshot-tkae", []string{"snapshot", "tkae", "agent.coder"}, `Did you mean "snapshot take"?`},
		{"unknown-state-restore", []string{"state", "restore"}, `Did you mean "state restore-backup"?`},
		{"unknown-egress-denial", []string{"egress", "denial"}, `Did you mean "egress denials"?`},
		{"unknown-gatewy", []string{"gatewy"}, ""}, // a hidden command is never suggested
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var errb strings.Builder
			m.Stderr = &errb
			code, ok := UnknownCommand(m, commands, hidden, tc.args)
			if !ok || code != 1 {
				t.Fatalf("%v: answered %t with exit %d, want the unknown command's exit 1", tc.args, ok, code)
			}
			errs := strings.Join(strings.Fields(errb.String()), " ")
			if !strings.Contains(errs, "Unknown command") {
				t.Errorf("%v does not say the command is unknown:\n%s", tc.args, errb.String())
			}
			if tc.want == "" && strings.Contains(errs, "Did you mean") {
				t.Errorf("%v got a suggestion:\n%s", tc.args, errb.String())
			}
			if tc.want != "" && !strings.Contains(errs, tc.want) {
				t.Errorf("%v does not suggest the command: want %q in\n%s", tc.args, tc.want, errb.String())
			}
			golden(t, filepath.Join("testdata", "did-you-mean", tc.name+".txt"), errb.String())
		})
	}

	// What names a command, or none, is the CLI's to run.
	for _, args := range [][]string{
		{}, {"-version"}, {"-help"}, {"plan", "-out=x"}, {"logs", "agent.coder"},
		{"state"}, {"state", "list"}, {"snapshot", "-help"}, {"exec", "agent.coder", "--", "ls"},
		{"gateway", "serve"},
	} {
		var errb strings.Builder
		m.Stderr = &errb
		if code, ok := UnknownCommand(m, commands, hidden, args); ok {
			t.Errorf("%v was answered as unknown (exit %d):\n%s", args, code, errb.String())
		}
	}
}
