package command

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/bottlefile/bottlefile/executor"
	"github.com/bottlefile/bottlefile/planner"
)

// progressHook turns the executor's callbacks into apply events: one as
// each step starts and ends, and a "still ..." one every interval for long
// steps. A printer renders them, as lines for people or as JSON.
type progressHook struct {
	print    func(jsonEvent)
	interval time.Duration

	mu      sync.Mutex // guards print and running
	running map[*planner.Step]chan struct{}
}

var _ executor.Hook = (*progressHook)(nil)

func newProgressHook(print func(jsonEvent)) *progressHook {
	return &progressHook{print: print, interval: 10 * time.Second, running: map[*planner.Step]chan struct{}{}}
}

func (h *progressHook) emit(e jsonEvent) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.print(e)
}

func (h *progressHook) PreApply(s *planner.Step) {
	h.emit(jsonEvent{Type: "apply_start", Address: s.Change.Addr, Step: string(s.Op)})
	done := make(chan struct{})
	h.mu.Lock()
	h.running[s] = done
	h.mu.Unlock()
	go func(start time.Time) {
		t := time.NewTicker(h.interval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				h.emit(jsonEvent{Type: "apply_progress", Address: s.Change.Addr, Step: string(s.Op), Elapsed: time.Since(start).Round(time.Second).Seconds()})
			}
		}
	}(time.Now())
}

func (h *progressHook) PostApply(s *planner.Step, elapsed time.Duration, err error) {
	h.mu.Lock()
	if done, ok := h.running[s]; ok {
		close(done)
		delete(h.running, s)
	}
	h.mu.Unlock()
	e := jsonEvent{Type: "apply_complete", Address: s.Change.Addr, Step: string(s.Op), Elapsed: elapsed.Seconds()}
	if err != nil {
		e.Type, e.Message = "apply_errored", err.Error()
	}
	h.emit(e)
}

// Note shows what the driver said about a step (a gateway closing the
// tunnels its new allowlist no longer allows).
func (h *progressHook) Note(s *planner.Step, note string) {
	h.emit(jsonEvent{Type: "apply_note", Address: s.Change.Addr, Step: string(s.Op), Message: note})
}

func (h *progressHook) Skipped(s *planner.Step, cause *planner.Step) {
	e := jsonEvent{Type: "apply_skipped", Address: s.Change.Addr, Step: string(s.Op)}
	if cause != nil {
		e.Cause = cause.Name()
	}
	h.emit(e)
}

// humanEvents renders apply events as Terraform-like progress lines.
func humanEvents(w io.Writer) func(jsonEvent) {
	return func(e jsonEvent) {
		var v [3]string
		v[0], v[1], v[2] = planner.StepOp(e.Step).Progress()
		switch e.Type {
		case "apply_start":
			fmt.Fprintf(w, "%s: %s\n", e.Address, v[0])
		case "apply_progress":
			fmt.Fprintf(w, "%s: Still %s... [%s elapsed]\n", e.Address, v[2], time.Duration(e.Elapsed*float64(time.Second)))
		case "apply_complete":
			fmt.Fprintf(w, "%s: %s after %s\n", e.Address, v[1], roundElapsed(time.Duration(e.Elapsed*float64(time.Second))))
		case "apply_errored":
			fmt.Fprintf(w, "%s: %s failed after %s\n", e.Address, strings.TrimSuffix(v[0], "..."), roundElapsed(time.Duration(e.Elapsed*float64(time.Second))))
		case "apply_note":
			fmt.Fprintf(w, "%s: %s\n", e.Address, e.Message)
		case "apply_skipped":
			if e.Cause == "" {
				fmt.Fprintf(w, "%s: not started (the apply was interrupted)\n", e.Address)
			} else {
				fmt.Fprintf(w, "%s: skipped, because %s did not complete\n", e.Address, e.Cause)
			}
		}
	}
}

func roundElapsed(d time.Duration) string {
	if d < time.Second {
		return d.Round(time.Millisecond).String()
	}
	return d.Round(100 * time.Millisecond).String()
}
