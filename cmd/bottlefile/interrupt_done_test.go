package main

import (
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/bottlefile/bottlefile/drivers/docker/dockertest"
)

// TestE2EInterruptAfterLastStart: a Ctrl-C that lands while the last
// action of an apply runs (one agent, one step at a time: its container
// is created after its network) stops nothing, since nothing was left to
// start: the action finishes, and the apply says so, says it is complete
// and exits 0, not "Apply incomplete ... Failed: 0. Not started: 0." and
// exit 1. The next plan says No changes.
func TestE2EInterruptAfterLastStart(t *testing.T) {
	parallel(t)
	cli := dockertest.Client(t)
	image := dockertest.BusyboxImage(t, cli)
	dir := t.TempDir()
	writeBottlefile(t, dir, "agent \"solo\" {\n  image   = %q\n  command = [\"sleep\", \"600\"]\n}\n", image)

	run := startBottlefile(t, dir, "apply", "-auto-approve", "-parallelism=1")
	run.waitLine(regexp.MustCompile(`^agent\.solo: Creating\.\.\.$`), time.Minute)
	if err := run.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	code := run.wait(time.Minute)
	lineageOf(t, cli, dir) // cleans up what the apply made
	if !strings.Contains(run.errb.String(), "Interrupt received") {
		t.Fatalf("the interrupt did not land while the apply ran:\n%s", run)
	}
	out := run.stdout()
	if code != 0 || !strings.Contains(out, "\nApply complete!") || strings.Contains(out, "incomplete") {
		t.Errorf("an interrupt after the last action started: want exit 0 and Apply complete!, got exit %d\n%s", code, run)
	}
	if !strings.Contains(out, "Interrupted after every action had started: each of them finished.") {
		t.Errorf("the apply does not say the interrupt stopped nothing:\n%s", run)
	}
	if !regexp.MustCompile(`(?m)^agent\.solo: Creation complete after `).MatchString(out) {
		t.Errorf("the running action did not finish:\n%s", run)
	}
	wantNoChanges(t, dir, "after an interrupt that stopped nothing")
	mustRun(t, dir, "destroy", "-auto-approve")
}
