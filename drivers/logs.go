package drivers

import (
	"context"
	"io"
)

// LogReader is implemented by drivers whose workloads keep a log (a
// container's output, an egress gateway's decisions). `bottlefile logs ADDR`
// finds the object among what Read reports and asks its runtime's driver.
type LogReader interface {
	// Logs copies the workload's log to stdout and stderr, as the workload
	// wrote it. With follow it keeps copying what is written until ctx is
	// done, then returns nil; without, it returns at the end of the log.
	// obj is what Read reported; an object that keeps no log (a network) is
	// an error that says so.
	Logs(ctx context.Context, lineage string, obj LiveObject, follow bool, stdout, stderr io.Writer) error
}
