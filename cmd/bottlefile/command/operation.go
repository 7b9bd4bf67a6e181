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
	return m.openWith(ctx, operations.Request{ReadOnly: readOnly, LockTimeout: lockTimeout, Inputs: in, Clock: now})
}

// observe is open for a command that only looks at what runs or was
// recorded (status, logs, exec, egress denials, output): variables without
// a value are no error, unless a runtime or an output shown needs them.
func (m *Meta) observe(ctx context.Context, lockTimeout time.Duration, in operations.Inputs) (*operations.Operation, hcl.Diagnostics) {
	return m.openWith(ctx, operations.Request{Observe: true, LockTimeout: lockTimeout, Inputs: in, Clock: now})
}

func (m *Meta) openWith(ctx context.Context, req operations.Request) (*operations.Operation, hcl.Diagnostics) {
	dir, err := m.dir()
	if err != nil {
		return nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Cannot find the working directory", Detail: err.Error()}}
	}
	req.Dir, req.LoadDir, req.Registry, req.Log = dir, m.loadDir(), m.Registry, m.Log
	return operations.Open(ctx, req)
}
