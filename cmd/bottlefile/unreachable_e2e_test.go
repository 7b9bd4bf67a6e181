package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/bottlefile/bottlefile/drivers/docker/dockertest"
)

// bottlefileEnv runs the binary in dir with extra environment.
func bottlefileEnv(t *testing.T, dir string, env []string, args ...string) result {
	t.Helper()
	r, _, err := runBinary(3*time.Minute, dir, env, args...)
	if err != nil {
		t.Fatalf("running bottlefile %v: %v", args, err)
	}
	return r
}

// oneError requires that a run failed with exactly one error, whose
// headline is summary and which says each of wants, and that it shows a
// source block only when withSource.
func oneError(t *testing.T, what string, r result, summary string, withSource bool, wants ...string) {
	t.Helper()
	out := r.stdout + r.stderr
	if r.code != 1 || strings.Count(out, "Error: ") != 1 || !strings.Contains(out, "Error: "+summary+"\n") {
		t.Errorf("%s: want exit 1 and exactly one error %q, got %s", what, summary, r)
		return
	}
	flat := strings.Join(strings.Fields(out), " ")
	for _, w := range wants {
		if !strings.Contains(flat, w) {
			t.Errorf("%s: the error does not say %q:\n%s", what, w, out)
		}
	}
	if source := strings.Contains(out, "  on "); source != withSource || strings.Contains(out, "line 0") || strings.Contains(out, "source code not available") {
		t.Errorf("%s: want a source block %t, and never one for line 0:\n%s", what, withSource, out)
	}
}

// TestE2EUnreachableEngineOneError is issue 14's "errors once" on the
// docker driver: an engine that cannot be reached is one error naming the
// runtime and the address it was looked for at, however many agents run
// there. For the implicit runtime (a port nothing listens on, a socket
// that does not exist; or DOCKER_HOST no address at all, one error of
// configuration) it shows no source block, on a fresh directory and, for
// plan, apply, destroy and status, on one with a state; a declared
// runtime's error points at its block. Nothing is touched: once the
// engine answers again, plan finds nothing to do.
func TestE2EUnreachableEngineOneError(t *testing.T) {
	parallel(t)
	cli := dockertest.Client(t)
	img := dockertest.BusyboxImage(t, cli)
	agents := func(runtime string) string {
		var b strings.Builder
		for _, name := range []string{"a", "b", "c"} {
			fmt.Fprintf(&b, "agent %q {\n%s  image   = %q\n  command = [\"sleep\", \"600\"]\n}\n\n", name, runtime, img)
		}
		return b.String()
	}

	fresh := t.TempDir()
	writeBottlefile(t, fresh, "%s", agents(""))
	for _, tc := range []struct{ host, summary, says string }{
		// Not an address at all: said before any engine is asked.
		{"bogus", `Cannot configure runtime "default"`, `DOCKER_HOST: "bogus" is not an engine address`},
		{"tcp://127.0.0.1:1", `Cannot reach runtime "default"`, `runtime "default" cannot be reached at DOCKER_HOST=tcp://127.0.0.1:1`},
		{"unix:///nonexistent/bottlefile-test.sock", `Cannot reach runtime "default"`, `runtime "default" cannot be reached at DOCKER_HOST=unix:///nonexistent/bottlefile-test.sock`},
	} {
		r := bottlefileEnv(t, fresh, []string{"DOCKER_HOST=" + tc.host}, "plan")
		oneError(t, "plan with DOCKER_HOST="+tc.host, r, tc.summary, false, tc.says)
	}

	applied := t.TempDir()
	writeBottlefile(t, applied, "%s", agents(""))
	mustRun(t, applied, "apply", "-auto-approve")
	lineageOf(t, cli, applied)
	down := []string{"DOCKER_HOST=tcp://127.0.0.1:1"}
	for _, args := range [][]string{{"plan"}, {"apply", "-auto-approve"}, {"destroy", "-auto-approve"}} {
		r := bottlefileEnv(t, applied, down, args...)
		oneError(t, strings.Join(args, " ")+" with a state", r, `Cannot reach runtime "default"`, false, "DOCKER_HOST=tcp://127.0.0.1:1")
	}
	r := bottlefileEnv(t, applied, down, "status")
	oneError(t, "status with a state", r, `Cannot refresh runtime "default"`, false, "DOCKER_HOST=tcp://127.0.0.1:1")
	if r := mustRun(t, applied, "plan"); !strings.Contains(r.stdout, "No changes.") {
		t.Errorf("plan once the engine answers again:\n%s", r.stdout)
	}
	mustRun(t, applied, "destroy", "-auto-approve")

	declared := t.TempDir()
	writeBottlefile(t, declared, "runtime \"far\" {\n  driver = \"docker\"\n  host   = \"tcp://127.0.0.1:1\"\n}\n\n%s", agents("  runtime = runtime.far\n"))
	r = bottlefile(t, declared, "plan")
	oneError(t, "plan on a declared runtime", r, `Cannot reach runtime "far"`, true, `on Bottlefile line 1, in runtime "far"`, `runtime "far" cannot be reached at host = "tcp://127.0.0.1:1"`)
}
