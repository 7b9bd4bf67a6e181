package smolvm

import (
	"context"
	"fmt"

	"github.com/bottlefile/bottlefile/drivers"
)

var _ drivers.Stopper = (*Driver)(nil)

// StopWorkload stops a machine with smolvm's documented graceful stop
// (`machine stop --name NAME`), keeping its disk, so that OpStart runs it
// again with what it wrote. A machine not running is no error: smolvm
// says so and exits 0.
func (d *Driver) StopWorkload(ctx context.Context, req drivers.StopRequest) error {
	run, err := d.cli()
	if err != nil {
		return err
	}
	name, err := machineRef(drivers.ApplyRequest{Lineage: req.Lineage, Object: req.Object, ID: req.ID, NameAddr: req.NameAddr})
	if err != nil {
		return fmt.Errorf("stopping machine of %s: %w", req.Object.Addr, err)
	}
	if _, err := run.run(ctx, []string{"machine", "stop", "--name", name}, nil); err != nil {
		return fmt.Errorf("stopping machine %s of %s: %w", name, req.Object.Addr, err)
	}
	d.log.Info("stopped machine", "addr", req.Object.Addr, "name", name)
	return nil
}
