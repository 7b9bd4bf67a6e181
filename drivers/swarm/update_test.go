package swarm

import (
	"context"
	"errors"
	"testing"

	"github.com/docker/docker/api/types/swarm"
)

// conflictAPI answers the first updates with the cluster's version
// conflict, as when the cluster or a user changed the service after it
// was read.
type conflictAPI struct {
	swarmAPI
	conflicts int
	version   uint64
	sent      []uint64
	replicas  []uint64
}

func (c *conflictAPI) ServiceInspectWithRaw(context.Context, string, swarm.ServiceInspectOptions) (swarm.Service, []byte, error) {
	c.version++ // someone else updated it since
	one := uint64(1)
	return swarm.Service{ID: "svc", Meta: swarm.Meta{Version: swarm.Version{Index: c.version}},
		Spec: swarm.ServiceSpec{Mode: swarm.ServiceMode{Replicated: &swarm.ReplicatedService{Replicas: &one}}}}, nil, nil
}

func (c *conflictAPI) ServiceUpdate(_ context.Context, _ string, v swarm.Version, spec swarm.ServiceSpec, _ swarm.ServiceUpdateOptions) (swarm.ServiceUpdateResponse, error) {
	c.sent = append(c.sent, v.Index)
	c.replicas = append(c.replicas, *spec.Mode.Replicated.Replicas)
	if len(c.sent) <= c.conflicts {
		return swarm.ServiceUpdateResponse{}, errors.New("Error response from daemon: rpc error: code = Unknown desc = update out of sequence")
	}
	return swarm.ServiceUpdateResponse{}, nil
}

// A version conflict is re-read and the edit redone on what was read;
// another error is not retried; endless conflicts end, saying so.
func TestUpdateServiceRetriesConflicts(t *testing.T) {
	scale := func(s *swarm.ServiceSpec) { n := *s.Mode.Replicated.Replicas + 1; s.Mode.Replicated.Replicas = &n }
	api := &conflictAPI{conflicts: 2}
	svc, err := updateService(t.Context(), api, "svc", scale)
	if err != nil {
		t.Fatalf("after 2 conflicts: %v", err)
	}
	if len(api.sent) != 3 || api.sent[2] != 3 || svc.Version.Index != 3 {
		t.Errorf("versions sent %v (want the one read each time, 1 2 3), returned %d", api.sent, svc.Version.Index)
	}
	for _, r := range api.replicas {
		if r != 2 {
			t.Errorf("the edit was not redone on a fresh read: replicas sent %v", api.replicas)
		}
	}
	api = &conflictAPI{conflicts: 100}
	if _, err := updateService(t.Context(), api, "svc", scale); err == nil || len(api.sent) != updateTries {
		t.Errorf("endless conflicts: %v after %d tries", err, len(api.sent))
	}
}
