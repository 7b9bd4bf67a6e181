package drivers

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// Exit is how a workload that ran came to stop: what Read reports for a
// workload that is not running, and what Settle reports for one that did
// not stay up.
type Exit struct {
	// Code is the workload's exit code; 128+N when a signal N ended it.
	Code int
	// At is when it stopped; zero when the runtime does not say.
	At time.Time
	// Stopped is set when someone stopped it (docker stop, docker kill,
	// smolvm machine stop) rather than it exiting on its own. A driver
	// decides it by a rule it documents: the docker driver counts an exit
	// by SIGTERM or SIGKILL (143 or 137) that is not the kernel's
	// out-of-memory kill as stopped by someone.
	Stopped bool
	// OOMKilled is set when the kernel killed it for exceeding its memory.
	OOMKilled bool
	// Error is what the runtime said went wrong starting it, if anything.
	Error string
	// Last are the last lines the workload printed, oldest first, at most
	// a few; none for a workload stopped by someone.
	Last []string
}

// Describe says how the workload ended, in a few words without its
// output: "exited with code 127 at 2026-11-25 10:14 UTC".
func (e *Exit) Describe() string {
	var b strings.Builder
	switch {
	case e.OOMKilled:
		fmt.Fprintf(&b, "was killed for exceeding its memory (code %d)", e.Code)
	case e.Stopped:
		fmt.Fprintf(&b, "was stopped outside bottlefile (code %d)", e.Code)
	default:
		fmt.Fprintf(&b, "exited with code %d", e.Code)
	}
	if !e.At.IsZero() {
		b.WriteString(" at " + e.At.UTC().Format("2006-01-02 15:04 UTC"))
	}
	if e.Error != "" {
		b.WriteString(": " + e.Error)
	}
	return b.String()
}

// LastLines is what the workload printed last, quoted on one line, or ""
// when it printed nothing.
func (e *Exit) LastLines() string {
	if len(e.Last) == 0 {
		return ""
	}
	q := make([]string, len(e.Last))
	for i, l := range e.Last {
		q[i] = fmt.Sprintf("%q", l)
	}
	return strings.Join(q, ", ")
}

// ExitDescriber is implemented by drivers whose Read tells that a
// workload exited but not all of how (Read makes one list call per kind):
// DescribeExit fills in when, the runtime's error, and the last lines it
// printed. The planner calls it for each recorded workload Read reports
// exited, which is rare; it must change nothing.
type ExitDescriber interface {
	DescribeExit(ctx context.Context, lineage string, obj LiveObject) (*Exit, error)
}

// ExitError is a workload that did not stay up after apply started it,
// or never became healthy.
type ExitError struct {
	Addr string
	Exit Exit
	// Unhealthy is set when the workload runs but its healthcheck never
	// passed; Health is then its last health output.
	Unhealthy bool
	Health    string
}

func (e *ExitError) Error() string {
	if e.Unhealthy {
		msg := fmt.Sprintf("%s never became healthy", e.Addr)
		if e.Health != "" {
			msg += "; its last health check said:\n  " + strings.ReplaceAll(strings.TrimRight(e.Health, "\n"), "\n", "\n  ")
		}
		return msg
	}
	msg := fmt.Sprintf("%s %s right after it was started", e.Addr, e.Exit.Describe())
	if len(e.Exit.Last) > 0 {
		msg += "; it printed last:\n  " + strings.Join(e.Exit.Last, "\n  ")
	} else {
		msg += "; it printed nothing"
	}
	return msg
}

// SettleRequest asks whether a workload apply just started stays up.
type SettleRequest struct {
	Lineage string
	Object  Object
	ID      string
	// Wait is how long to watch a workload without a healthcheck. A
	// workload with one is watched until it is healthy, or its checks
	// have failed as often as its retries allow.
	Wait time.Duration
}

// Settler is implemented by drivers that can tell whether a workload they
// started stays up. Settle returns nil once the workload has run for
// req.Wait (or, with a healthcheck, is healthy), and an *ExitError when
// it exited or never became healthy. The executor calls it concurrently
// for independent workloads, without holding an apply slot.
type Settler interface {
	Settle(ctx context.Context, req SettleRequest) error
}
