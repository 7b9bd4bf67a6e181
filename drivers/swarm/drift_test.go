package swarm

import (
	"strings"
	"testing"

	"github.com/docker/docker/api/types/swarm"
	"github.com/google/uuid"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/swarm/swarmtest"
)

// A service's drift is what changed in the parts bottlefile set since it
// labelled it: named in words, env never shown, scaling to more than one
// replica counted, to none not (that is a stop).
func TestDrift(t *testing.T) {
	base := func() swarm.ServiceSpec {
		s := serviceBase("bf-x-coder", map[string]string{"a": "b"}, []string{"node.labels.pool==agents"})
		s.TaskTemplate.ContainerSpec.Image = "busybox:1"
		s.TaskTemplate.ContainerSpec.Env = []string{"SECRET=hunter2"}
		fingerprint(&s)
		return s
	}
	if strings.Contains(base().Labels[labelSpec], "hunter2") {
		t.Fatalf("the fingerprint holds an env value: %s", base().Labels[labelSpec])
	}
	n := func(v uint64) *uint64 { return &v }
	for _, tc := range []struct {
		name string
		edit func(s *swarm.ServiceSpec)
		want string
	}{
		{"as made", func(*swarm.ServiceSpec) {}, ""},
		{"image", func(s *swarm.ServiceSpec) { s.TaskTemplate.ContainerSpec.Image = "busybox:2" }, "its image changed outside bottlefile"},
		{"env and placement", func(s *swarm.ServiceSpec) {
			s.TaskTemplate.ContainerSpec.Env = []string{"SECRET=other"}
			s.TaskTemplate.Placement.Constraints = nil
		}, "its environment and placement changed outside bottlefile"},
		{"scaled up", func(s *swarm.ServiceSpec) { s.Mode.Replicated.Replicas = n(3) }, "it was scaled to 3 replicas outside bottlefile"},
		{"scaled to none", func(s *swarm.ServiceSpec) { s.Mode.Replicated.Replicas = n(0) }, ""},
		{"no label", func(s *swarm.ServiceSpec) { delete(s.Labels, labelSpec); s.TaskTemplate.ContainerSpec.Image = "x" }, ""},
	} {
		s := base()
		tc.edit(&s)
		got := drift(s)
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) || strings.Contains(got, "hunter2") {
			t.Errorf("%s: drift = %q, want %q", tc.name, got, tc.want)
		}
	}
	if got := tagged("busybox"); got != "busybox:latest" {
		t.Errorf("tagged(busybox) = %q", got)
	}
	if ref := "10.250.0.254:5000/x@sha256:" + strings.Repeat("a", 64); tagged(ref) != ref {
		t.Errorf("tagged(%s) = %q", ref, tagged(ref))
	}
}

// TestDriftOnSwarm: a service updated or scaled with the docker CLI's
// calls reads as drifted, saying how.
func TestDriftOnSwarm(t *testing.T) {
	f := swarmtest.Start(t)
	d := fixtureDriver(t, f, true, nil)
	mgr := f.Client(t, 0)
	lineage := uuid.NewString()
	f.Cleanup(t, lineage)
	plan, err := d.Plan(t.Context(), drivers.PlanRequest{Agent: placedAgent("drifty", f.Busybox, nil, nil)})
	if err != nil {
		t.Fatal(err)
	}
	ids := applyAll(t, d, lineage, plan.Objects)
	if o := readLive(t, d, lineage, "agent.drifty"); o.Drift != "" {
		t.Fatalf("a service as bottlefile made it reads as drifted: %q", o.Drift)
	}
	// As docker service update does: read, edit, send with the version
	// read. The cluster bumps the version itself after an update (its
	// rolling-update status), so an edit is redone on a conflict, as a
	// user would run the command again.
	update := func(edit func(*swarm.ServiceSpec)) {
		t.Helper()
		if _, err := updateService(t.Context(), mgr, ids["agent.drifty"], edit); err != nil {
			t.Fatal(err)
		}
	}
	update(func(s *swarm.ServiceSpec) { s.TaskTemplate.ContainerSpec.Args = []string{"sleep", "601"} })
	if o := readLive(t, d, lineage, "agent.drifty"); !strings.Contains(o.Drift, "its command changed outside bottlefile") {
		t.Errorf("after docker service update --args: drift %q", o.Drift)
	}
	three := uint64(3)
	update(func(s *swarm.ServiceSpec) { s.Mode.Replicated.Replicas = &three })
	if o := readLive(t, d, lineage, "agent.drifty"); !strings.Contains(o.Drift, "scaled to 3 replicas") {
		t.Errorf("after docker service scale =3: drift %q", o.Drift)
	}
	deleteAll(t, d, lineage)
}
