package swarm

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/docker/docker/api/types/swarm"
)

// A service's spec carries a version; an update sent with an older one
// is refused with "update out of sequence". The cluster itself bumps it
// (it records the progress of a rolling update after the update
// returns), and so does anyone's docker service update: a version
// conflict is not an error of the update but a reason to read the
// service again and redo the edit on what is there now.

// updateTries bounds how often an update is redone after a conflict.
const updateTries = 8

// isOutOfSequence reports whether err is the cluster refusing an update
// made against an older version of the service.
func isOutOfSequence(err error) bool {
	return err != nil && strings.Contains(err.Error(), "update out of sequence")
}

// updateService reads the service ref, lets edit change its spec, and
// sends the update with the version read; on a version conflict it reads
// the service again and redoes the edit. It returns the service as read
// for the update that went through, with the spec sent.
func updateService(ctx context.Context, api swarmAPI, ref string, edit func(*swarm.ServiceSpec)) (swarm.Service, error) {
	var err error
	for try := range updateTries {
		var svc swarm.Service
		svc, _, err = api.ServiceInspectWithRaw(ctx, ref, swarm.ServiceInspectOptions{})
		if err != nil {
			return swarm.Service{}, err
		}
		edit(&svc.Spec)
		if _, err = api.ServiceUpdate(ctx, svc.ID, svc.Version, svc.Spec, swarm.ServiceUpdateOptions{}); err == nil {
			return svc, nil
		}
		if !isOutOfSequence(err) {
			return swarm.Service{}, err
		}
		select {
		case <-ctx.Done():
			return swarm.Service{}, ctx.Err()
		case <-time.After(time.Duration(try+1) * 50 * time.Millisecond):
		}
	}
	return swarm.Service{}, fmt.Errorf("the service kept changing under the update (%d tries): %w", updateTries, err)
}
