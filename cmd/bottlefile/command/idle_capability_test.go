package command

import (
	"strings"
	"testing"

	"github.com/bottlefile/bottlefile/drivers/docker"
	"github.com/bottlefile/bottlefile/drivers/drivertest"
	"github.com/bottlefile/bottlefile/drivers/smolvm"
)

// TestIdleRefusedWithoutActivity: smolvm cannot tell when an agent was
// last used, so validate and plan refuse an idle block on one of its
// agents, pointing at the block and naming the runtime and driver; the
// same block on a docker runtime, which can, validates.
func TestIdleRefusedWithoutActivity(t *testing.T) {
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

  idle {
    stop_after = "30m"
  }
}

agent "local" {
  image = "alpine:3"

  idle {
    stop_after = "30m"
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
			"Error: Idle policy not supported by this runtime",
			`Bottlefile line 14, in agent "coder": 14: idle {`,
			`agent.coder runs on runtime "vm" (driver smolvm): the smolvm driver cannot tell when an agent was last used`,
		} {
			if !strings.Contains(flat, want) {
				t.Errorf("%s: the error lacks %q:\n%s", cmd, want, stderr)
			}
		}
		if strings.Count(stderr, "Error:") != 1 {
			t.Errorf("%s: want one error (agent.local runs on docker, which reports activity):\n%s", cmd, stderr)
		}
	}
}
