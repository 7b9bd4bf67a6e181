package main

import (
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// TestMakeDemoShowsItsOwnBottles: make demo ends by showing what it
// started with bottlefile's own status, which reads this state's lineage,
// never with a docker CLI listing filtered by address, which on a shared
// engine lists everyone's agent.hello. Read from make -n, which prints
// the recipe without running it.
func TestMakeDemoShowsItsOwnBottles(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make")
	}
	cmd := exec.Command("make", "-n", "-s", "demo")
	cmd.Dir = "../.."
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make -n demo: %v\n%s", err, out)
	}
	var apply, status int
	for i, line := range strings.Split(string(out), "\n") {
		switch {
		case regexp.MustCompile(`^docker\b`).MatchString(line):
			t.Errorf("make demo runs the docker CLI: %s", line)
		case regexp.MustCompile(`bottlefile -chdir=examples/quickstart apply\b`).MatchString(line):
			apply = i
		case regexp.MustCompile(`bottlefile -chdir=examples/quickstart status$`).MatchString(line):
			status = i
		}
	}
	if apply == 0 || status <= apply {
		t.Errorf("make demo does not show bottlefile status after its apply:\n%s", out)
	}
}
