package planner_test

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/drivertest"
	"github.com/bottlefile/bottlefile/planner"
)

// withSidecars plans an agent as the fake does, plus a container for each
// sidecar on the agent's network, as the docker driver does: image and
// command, and healthcheck only when it has one.
func withSidecars(req drivers.PlanRequest) (drivers.PlanResponse, error) {
	resp, err := drivertest.Expand(req.Agent)
	if err != nil {
		return resp, err
	}
	for _, sc := range req.Agent.Sidecars {
		attrs := drivers.WorkloadAttrs(sc.Workload, "image", "command")
		if hc := drivers.WorkloadAttr(sc.Workload, "healthcheck"); !hc.IsNull() {
			attrs["healthcheck"] = hc
		}
		resp.Objects = append(resp.Objects, drivers.Object{
			Addr: sc.Addr, Kind: drivertest.KindContainer, Attrs: attrs, Workload: true,
			DependsOn: []string{req.Agent.Addr + ".network"},
		})
	}
	return resp, nil
}

const healthConfig = `
agent "coder" {
  image = "busybox:1"

  sidecar "db" {
    image = %q
    healthcheck {
      command  = ["pg_isready"]
      interval = %q
    }
  }

  sidecar "cache" {
    image = "redis:7"
  }
}
`

// TestAgentWaitsForHealthySidecars: an agent's workload is created after
// each sidecar of its bottle that has a healthcheck has settled (healthy),
// not after one without; the order is an ordering only, so replacing the
// sidecar, or changing its healthcheck, does not replace the agent; and a
// saved plan keeps it.
func TestAgentWaitsForHealthySidecars(t *testing.T) {
	b := newBench(t)
	b.fake.PlanFn = withSidecars
	b.write(sprintf(healthConfig, "postgres:16", "1s"))

	p := b.plan(planner.Options{})
	agent := change(p, "agent.coder")
	if !slices.Equal(agent.WaitFor, []string{"agent.coder.sidecar.db"}) {
		t.Errorf("agent.coder waits for %q, want only the sidecar with a healthcheck", agent.WaitFor)
	}
	if !dependsOn(t, p, "create agent.coder", "create agent.coder.sidecar.db") {
		t.Errorf("the agent is not created after its sidecar with a healthcheck:\n%s", p.Graph())
	}
	if dependsOn(t, p, "create agent.coder", "create agent.coder.sidecar.cache") {
		t.Errorf("the agent waits for a sidecar without a healthcheck:\n%s", p.Graph())
	}
	if slices.Contains(agent.Object.DependsOn, "agent.coder.sidecar.db") {
		t.Errorf("the agent depends on the sidecar (a replacement would spread): %q", agent.Object.DependsOn)
	}

	// A saved plan keeps the order.
	data, err := json.Marshal(planner.Save(p, map[string]string{"Bottlefile": "hash"}, nil))
	if err != nil {
		t.Fatal(err)
	}
	saved, err := planner.DecodePlanFile(data)
	if err != nil {
		t.Fatal(err)
	}
	if !dependsOn(t, saved.Plan(), "create agent.coder", "create agent.coder.sidecar.db") {
		t.Errorf("the saved plan lost the order:\n%s", saved.Plan().Graph())
	}

	// Applied, the agent's create comes after the sidecar settled. The
	// sidecar's settle holds until the agent's create starts, or a while:
	// without the order the agent's create would come first.
	var mu sync.Mutex // guards events
	var events []string
	agentCreated := make(chan struct{})
	b.fake.BeforeApply = func(_ context.Context, req drivers.ApplyRequest) error {
		if req.Op == drivers.OpCreate && req.Object.Addr == "agent.coder" {
			close(agentCreated)
		}
		mu.Lock()
		defer mu.Unlock()
		events = append(events, string(req.Op)+" "+req.Object.Addr)
		return nil
	}
	b.fake.SettleFn = func(ctx context.Context, req drivers.SettleRequest) error {
		if req.Object.Addr == "agent.coder.sidecar.db" {
			select {
			case <-agentCreated:
			case <-time.After(300 * time.Millisecond):
			case <-ctx.Done():
			}
			mu.Lock()
			defer mu.Unlock()
			events = append(events, "healthy "+req.Object.Addr)
		}
		return nil
	}
	b.apply(planner.Options{})
	mu.Lock()
	healthy, created := slices.Index(events, "healthy agent.coder.sidecar.db"), slices.Index(events, "create agent.coder")
	mu.Unlock()
	if healthy < 0 || created < 0 || created < healthy {
		t.Errorf("the agent was not created after its sidecar was healthy: %q", events)
	}
	b.fake.BeforeApply, b.fake.SettleFn = nil, nil

	// Replacing the sidecar, or changing its healthcheck, replaces it
	// alone.
	for _, tc := range []struct{ image, interval, forcing string }{
		{"postgres:17", "1s", "image"},
		{"postgres:17", "3s", "healthcheck"},
	} {
		b.write(sprintf(healthConfig, tc.image, tc.interval))
		p := b.plan(planner.Options{})
		db := change(p, "agent.coder.sidecar.db")
		if db.Action != planner.Replace || !slices.Equal(db.Forcing, []string{tc.forcing}) {
			t.Errorf("%s changed: the sidecar's change is %s forced by %q, want a replacement forced by %s", tc.forcing, db.Action, db.Forcing, tc.forcing)
		}
		if a := change(p, "agent.coder"); a.Action != planner.NoOp {
			t.Errorf("%s of the sidecar changed: the agent would %s\n%s", tc.forcing, a.Action, pending(p))
		}
		b.apply(planner.Options{})
	}
}

// TestHealthcheckOnlyWhenSet: an agent without a healthcheck plans a
// container without the attribute, so its configuration hash is what it
// was before healthchecks; one with a healthcheck records it.
func TestHealthcheckOnlyWhenSet(t *testing.T) {
	b := newBench(t)
	b.write(`
agent "plain" {
  image = "busybox:1"
}

agent "checked" {
  image = "busybox:1"
  healthcheck {
    command = ["true"]
  }
}
`)
	p := b.plan(planner.Options{})
	if _, ok := change(p, "agent.plain").Object.Attrs["healthcheck"]; ok {
		t.Errorf("a container without a healthcheck records one: %v", change(p, "agent.plain").Object.Attrs)
	}
	want := `{"command":["true"],"interval":"2s","retries":3,"start_period":"0s","timeout":"5s"}`
	if got := string(change(p, "agent.checked").After["healthcheck"]); got != want {
		t.Errorf("healthcheck = %s, want %s", got, want)
	}
}
