package planner_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/zclconf/go-cty/cty"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/drivertest"
	"github.com/bottlefile/bottlefile/planner"
)

// The configuration language evaluates a workload into the object the
// drivers receive: its type is drivers.WorkloadType, for a bare agent and
// for one that sets every attribute, sidecars included, and the planner
// hands it on as it is.
func TestWorkloadReachesDriversWhole(t *testing.T) {
	b := newBench(t)
	b.write(`
agent "full" {
  image      = "acme/agent:1"
  command    = ["run"]
  entrypoint = []
  env        = { A = "1" }
  workdir    = "/w"
  user       = "1000"
  cpus       = 0.5
  memory     = "1GiB"
  labels     = { team = "x" }
  egress {
    allow = ["github.com:443"]
  }
  healthcheck {
    command  = ["test", "-f", "/ready"]
    interval = "90s"
    retries  = 5
  }
  sidecar "db" {
    build {
      context = "./db"
    }
    healthcheck {
      command      = ["pg_isready"]
      interval     = "500ms"
      timeout      = "1m0s"
      start_period = "1m30s"
    }
  }
}
agent "bare" {
  image = "alpine:3"
}
`)
	var specs []drivers.AgentSpec
	b.fake.PlanFn = func(req drivers.PlanRequest) (drivers.PlanResponse, error) {
		specs = append(specs, req.Agent)
		return drivertest.Expand(req.Agent)
	}
	b.plan(planner.Options{})
	if len(specs) != 2 {
		t.Fatalf("planned %d agents, want 2", len(specs))
	}
	for _, s := range specs {
		if !s.Workload.Type().Equals(drivers.WorkloadType) {
			t.Errorf("%s: workload type %#v, want drivers.WorkloadType", s.Addr, s.Workload.Type())
		}
		for _, sc := range s.Sidecars {
			if !sc.Workload.Type().Equals(drivers.WorkloadType) {
				t.Errorf("%s: workload type %#v", sc.Addr, sc.Workload.Type())
			}
		}
		if s.Addr != "agent.full" {
			continue
		}
		w, err := drivers.DecodeWorkload(s.Workload)
		if err != nil {
			t.Fatal(err)
		}
		if w.Memory != 1<<30 || w.CPUs != 0.5 || w.Entrypoint == nil || len(w.Entrypoint) != 0 || w.Egress[0] != "github.com:443" || w.Env["A"] != "1" {
			t.Errorf("full = %+v", w)
		}
		sc, err := drivers.DecodeWorkload(s.Sidecars[0].Workload)
		if err != nil {
			t.Fatal(err)
		}
		if sc.Build == nil || sc.Build.Dockerfile != "Dockerfile" || sc.Image != "" || sc.Egress != nil {
			t.Errorf("sidecar = %+v", sc)
		}
		// A healthcheck's durations are canonical, and what it leaves
		// out has its default.
		wantHC := []*drivers.Healthcheck{
			{Command: []string{"test", "-f", "/ready"}, Interval: 90 * time.Second, Timeout: 5 * time.Second, Retries: 5},
			{Command: []string{"pg_isready"}, Interval: 500 * time.Millisecond, Timeout: time.Minute, Retries: 3, StartPeriod: 90 * time.Second},
		}
		for i, got := range []*drivers.Healthcheck{w.Healthcheck, sc.Healthcheck} {
			if diff := cmp.Diff(wantHC[i], got); diff != "" {
				t.Errorf("healthcheck %d (-want +got):\n%s", i, diff)
			}
		}
		if got := drivers.WorkloadAttr(s.Workload, "healthcheck").GetAttr("interval"); !got.RawEquals(cty.StringVal("1m30s")) {
			t.Errorf("healthcheck interval = %#v, want the canonical \"1m30s\"", got)
		}
		if got := drivers.WorkloadAttr(s.Workload, "memory"); !got.RawEquals(cty.NumberIntVal(1 << 30)) {
			t.Errorf("memory = %#v", got)
		}
	}
}
