package docker

import (
	"context"
	"fmt"

	"github.com/bottlefile/bottlefile/drivers"
)

var _ drivers.EngineIdentifier = (*Driver)(nil)

// EngineID is the engine's own ID (docker info's ID), asked once per
// driver instance: two runtime blocks that reach one engine (by two hosts,
// or one the implicit default) have the same, and refresh reads it once.
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
		return "", d.unreachable(err)
	}
	info, err := api.Info(ctx)
	if err != nil {
		return "", d.unreachable(fmt.Errorf("reading the engine's info: %w", err))
	}
	if info.ID == "" {
		return "", nil
	}
	id = "docker:" + info.ID
	checks.mu.Lock()
	checks.engineID = id
	checks.mu.Unlock()
	return id, nil
}
