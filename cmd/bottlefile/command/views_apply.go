package command

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/bottlefile/bottlefile/executor"
	"github.com/bottlefile/bottlefile/lang"
	"github.com/bottlefile/bottlefile/operations"
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

// applyView is where apply's output goes (apply, destroy, and the
// commands that apply a plan of their own: snapshot take and rm): lines
// for people, or one JSON object per line with -json. Commands hand it
// structured data and never print apply output themselves.
type applyView interface {
	// Plan shows the plan about to be applied and how it changes the
	// outputs.
	Plan(p *planner.Plan, outputs []operations.OutputChange)
	// Message is a line that is neither an event nor a diagnostic.
	Message(text string)
	// Diagnostics shows diagnostics and reports whether any is an error.
	Diagnostics(files map[string]*hcl.File, diags hcl.Diagnostics) bool
	// Starting comes before the first progress event.
	Starting()
	// Event is one progress event of the executor (progressHook).
	Event(e jsonEvent)
	// Summary says what was applied and, after a failure, what was not.
	Summary(r applySummary)
	// Outputs are the outputs after a successful apply.
	Outputs(outputs []operations.Output)
}

// applySummary is what an apply did: the counts of what was done, the
// steps that failed and those not started, and whether the state could
// record it all.
type applySummary struct {
	Destroy bool
	Failed  bool
	Done    planner.Summary
	// FailedSteps and Skipped name steps ("create agent.coder").
	FailedSteps, Skipped []string
	StateErr             error
}

func applyResult(res executor.Result, destroy, failed bool, stateErr error) applySummary {
	s := applySummary{Destroy: destroy, Failed: failed, Done: planner.StepSummary(res.Applied), StateErr: stateErr}
	s.Done.Move = res.Moved
	for _, st := range res.Failed {
		s.FailedSteps = append(s.FailedSteps, st.Name())
	}
	for _, st := range res.Skipped {
		s.Skipped = append(s.Skipped, st.Name())
	}
	return s
}

// word is "Apply" or "Destroy".
func (s applySummary) word() string {
	if s.Destroy {
		return "Destroy"
	}
	return "Apply"
}

func newApplyView(m *Meta, asJSON bool) applyView {
	if asJSON {
		return jsonApplyView{print: jsonEvents(m.Stdout)}
	}
	return humanApplyView{m: m, print: humanEvents(m.Stdout)}
}

// failView shows one error in v and returns the exit code for it.
func failView(v applyView, summary string, err error) int {
	v.Diagnostics(nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: summary, Detail: err.Error()}})
	return 1
}

// humanApplyView prints the plan, progress lines and the summary on
// standard output, diagnostics on standard error.
type humanApplyView struct {
	m     *Meta
	print func(jsonEvent)
}

func (v humanApplyView) Plan(p *planner.Plan, outputs []operations.OutputChange) {
	renderPlan(v.m.Stdout, p, v.m.Color)
	renderOutputChanges(v.m.Stdout, outputs, v.m.Color)
}

func (v humanApplyView) Message(text string) { fmt.Fprintln(v.m.Stdout, text) }

func (v humanApplyView) Diagnostics(files map[string]*hcl.File, diags hcl.Diagnostics) bool {
	return v.m.showDiags(files, diags)
}

func (v humanApplyView) Starting()         { fmt.Fprintln(v.m.Stdout) }
func (v humanApplyView) Event(e jsonEvent) { v.print(e) }

func (v humanApplyView) Summary(s applySummary) {
	w := v.m.Stdout
	paint := palette(v.m.Color)
	if !s.Failed {
		fmt.Fprintf(w, "\n%s Objects: %s.\n", paint.paint(ansiBold+ansiGreen, s.word()+" complete!"), s.Done.Done())
		return
	}
	fmt.Fprintf(w, "\n%s Done: %s. Failed: %d. Not started: %d.\n", paint.paint(ansiBold+ansiRed, s.word()+" incomplete."), s.Done.Done(), len(s.FailedSteps), len(s.Skipped))
	for _, name := range s.FailedSteps {
		fmt.Fprintf(w, "  failed:      %s\n", name)
	}
	for _, name := range s.Skipped {
		fmt.Fprintf(w, "  not started: %s\n", name)
	}
	if s.StateErr != nil {
		fmt.Fprintf(w, "The state could not record everything that was done (%v). Objects made but not recorded carry this state's lineage label: once the state can be written, plan shows them to be adopted or removed.\n", s.StateErr)
		return
	}
	fmt.Fprintln(w, "State records everything that was done; run plan to see what is left.")
}

func (v humanApplyView) Outputs(outputs []operations.Output) { renderOutputs(v.m.Stdout, outputs) }

// jsonApplyView prints every part of an apply as one JSON event a line on
// standard output, diagnostics included; nothing on standard error.
type jsonApplyView struct{ print func(jsonEvent) }

func (v jsonApplyView) Plan(p *planner.Plan, _ []operations.OutputChange) {
	doc := planDocument(p)
	v.print(jsonEvent{Type: "planned", Plan: &doc})
}

func (v jsonApplyView) Message(text string) { v.print(jsonEvent{Type: "message", Message: text}) }

func (v jsonApplyView) Diagnostics(files map[string]*hcl.File, diags hcl.Diagnostics) bool {
	for _, d := range lang.JSONDiagnostics(files, diags) {
		v.print(jsonEvent{Type: "diagnostic", Diagnostic: &d})
	}
	return diags.HasErrors()
}

func (jsonApplyView) Starting()           {}
func (v jsonApplyView) Event(e jsonEvent) { v.print(e) }

func (v jsonApplyView) Summary(s applySummary) {
	msg := s.word() + " complete"
	if s.Failed {
		msg = fmt.Sprintf("%s incomplete: %d failed, %d not started", s.word(), len(s.FailedSteps), len(s.Skipped))
	}
	sum := s.Done
	v.print(jsonEvent{Type: "summary", Message: msg, Summary: &sum})
}

// Outputs: the JSON stream has none; output -json prints them.
func (jsonApplyView) Outputs([]operations.Output) {}
