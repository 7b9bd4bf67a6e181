package drivers

import (
	"context"
	"io"
	"time"
)

// LogReader is implemented by drivers whose workloads keep a log (a
// container's output, an egress gateway's decisions). `bottlefile logs ADDR`
// finds the object among what Read reports and asks its runtime's driver.
type LogReader interface {
	// Logs copies the workload's log to stdout and stderr, as the workload
	// wrote it. With Follow it keeps copying what is written until ctx is
	// done, then returns nil; without, it returns at the end of the log.
	// obj is what Read reported; an object that keeps no log (a network) is
	// an error that says so.
	Logs(ctx context.Context, lineage string, obj LiveObject, opts LogOptions, stdout, stderr io.Writer) error
}

// LogOptions choose what part of a log to copy, and how.
type LogOptions struct {
	Follow bool
	// Since, when not zero, leaves out lines written before it.
	Since time.Time
	// Tail, when positive, copies only the last Tail lines (before
	// following); 0 or less copies all.
	Tail int
	// Timestamps starts each line with the time it was written, in RFC
	// 3339 with nanoseconds, and a space.
	Timestamps bool
}
