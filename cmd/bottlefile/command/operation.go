package command

import (
	"context"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/bottlefile/bottlefile/operations"
)

// open loads the Bottlefile in the working directory, opens the state
// (read-only, or locked for writing) and configures the runtimes.
func (m *Meta) open(ctx context.Context, readOnly bool, lockTimeout time.Duration, in operations.Inputs) (*operations.Operation, hcl.Diagnostics) {
	dir, err := m.dir()
	if err != nil {
		return nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Cannot find the working directory", Detail: err.Error()}}
	}
	return operations.Open(ctx, operations.Request{
		Dir: dir, LoadDir: m.loadDir(), ReadOnly: readOnly, LockTimeout: lockTimeout,
		Registry: m.Registry, Log: m.Log, Inputs: in,
	})
}
