package command

import (
	"strings"
	"testing"

	"github.com/bottlefile/bottlefile/drivers/docker"
	"github.com/bottlefile/bottlefile/drivers/drivertest"
	"github.com/bottlefile/bottlefile/drivers/smolvm"
)

// TestHealthcheckRefusedBySmolvm: smolvm reports no health that bottlefile
// could wait on, so validate and plan refuse a healthcheck block on one of
// its agents, pointing at the block and naming the runtime and driver;
// the same block on a docker runtime validates.
func TestHealthcheckRefusedBySmolvm(t *testing.T) {
	dk, sv := docker.Declaration(), smolvm.Declaration()
	w := newWorkspace(t)
	w.fake = &drivertest.Fake{DriverName: "docker", DeclareResponse: &dk}
	w.extra = map[string]*drivertest.Fake{"smolvm": {DriverName: "smolvm", DeclareResponse: &sv}}
	w.write(`
runtime "vm" {
  driver = "smolvm"
}

runtime "default" {
  driver = "docker"
}

agent "coder" {
  runtime = runtime.vm
  image   = "alpine:3"

  healthcheck {
    command = ["test", "-f", "/ready"]
  }
}

agent "local" {
  image = "alpine:3"

  healthcheck {
    command = ["test", "-f", "/ready"]
  }
}
`)
	for _, cmd := range []string{"validate", "plan"} {
		code, _, stderr := w.run(cmd)
		if code != 1 {
			t.Fatalf("%s: exit %d, want 1\n%s", cmd, code, stderr)
		}
		flat := strings.Join(strings.Fields(stderr), " ")
		for _, want := range []string{
			"Error: Healthcheck not supported by this runtime",
			`Bottlefile line 14, in agent "coder": 14: healthcheck {`,
			`agent.coder runs on runtime "vm" (driver smolvm): smolvm has no healthchecks`,
		} {
			if !strings.Contains(flat, want) {
				t.Errorf("%s: the error lacks %q:\n%s", cmd, want, stderr)
			}
		}
		if !strings.Contains(stderr, "healthcheck {") {
			t.Errorf("%s: the error does not show the block:\n%s", cmd, stderr)
		}
		if strings.Count(stderr, "Error:") != 1 {
			t.Errorf("%s: want one error (agent.local runs on docker, which has healthchecks):\n%s", cmd, stderr)
		}
	}
}
