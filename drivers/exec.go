package drivers

import (
	"context"
	"io"
)

// Execer is implemented by drivers that can run a command in a live
// workload (an agent or a sidecar): `bottlefile exec`.
type Execer interface {
	// Exec runs req.Command in the workload obj (what Read reported) and
	// returns the command's exit code once it ends and its output has been
	// copied. An error means the command could not be run at all (the
	// workload is not running, the runtime refused); a command that ran
	// and failed is a non-zero code, not an error.
	Exec(ctx context.Context, lineage string, obj LiveObject, req ExecRequest) (int, error)
}

// ExecRequest is one command to run in a workload.
type ExecRequest struct {
	// Command is the program and its arguments; never empty (the core
	// puts the image's shell, /bin/sh, when none is given).
	Command []string
	// TTY gives the command a terminal: its output comes as one stream on
	// Stdout, and Stdin is the terminal's keystrokes.
	TTY bool
	// Height and Width are the terminal's size, with TTY; 0 when unknown.
	Height, Width uint
	// Stdin, when not nil, is copied to the command's standard input,
	// which is closed at its end.
	Stdin          io.Reader
	Stdout, Stderr io.Writer
}
