package docker

import (
	"context"
	"fmt"

	"github.com/bottlefile/bottlefile/drivers"
)

var _ drivers.EngineIdentifier = (*Driver)(nil)

// EngineID is the engine's own ID (docker info's ID) with its host name
// and data root, asked once per driver instance: two runtime blocks that
// reach one engine (by two hosts, or one the implicit default) have the
// same, and refresh reads it once. The ID alone is not enough: it comes
// from the daemon's key file, which a second dockerd on the same machine
// (or a machine cloned from the same image) shares.
func (d *Driver) EngineID(ctx context.Context) (string, error) {
	checks := d.checksFor()
	checks.mu.Lock()
	id := checks.engineID
	checks.mu.Unlock()
	if id != "" {
		return id, nil
	}
	api, _, err := d.engine(ctx)
	if err != nil {
		return "", d.Unreachable(err)
	}
	// The isolation check every plan of a bottle makes next, beside the
	// engine's info, the slowest call of a no-op plan (issue 28); a
	// failed list is not kept, and the plan's own check asks again.
	d.background(func() { d.checkIsolation(ctx, api) })
	info, err := api.Info(ctx)
	if err != nil {
		return "", d.Unreachable(fmt.Errorf("reading the engine's info: %w", err))
	}
	if info.ID == "" {
		return "", nil
	}
	id = "docker:" + info.ID + "@" + info.Name + ":" + info.DockerRootDir
	checks.mu.Lock()
	checks.engineID = id
	checks.mu.Unlock()
	return id, nil
}
