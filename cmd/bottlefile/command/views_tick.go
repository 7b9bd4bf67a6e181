package command

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/bottlefile/bottlefile/planner"
)

// renderDue lists when each time policy is next due, aligned, under a
// plan (which acts on none of them) or a tick (which acted on those due
// now). Nothing when no agent has one.
func renderDue(w io.Writer, due []planner.Due, at time.Time, tick bool) {
	if len(due) == 0 {
		return
	}
	if tick {
		fmt.Fprintln(w, "\nPolicies on time:")
	} else {
		fmt.Fprintln(w, "\nPolicies on time (bottlefile tick or watch acts on them; plan does not):")
	}
	var buf strings.Builder
	tw := tabwriter.NewWriter(&buf, 0, 0, 2, ' ', 0)
	for _, d := range due {
		fmt.Fprintf(tw, "  %s\t%s = %s\t%s\n", d.Agent, d.Policy, planner.ShortDuration(d.After), dueText(d, at, tick))
	}
	tw.Flush()
	for _, line := range strings.SplitAfter(buf.String(), "\n") {
		if line != "" {
			fmt.Fprintln(w, strings.TrimRight(line, " \n"))
		}
	}
}

// dueText says when one policy is due: "due in 42m (13:10:00 UTC)", "due
// now", "done", "skipped: it wrote nothing since its last snapshot",
// "not scheduled: it is busy"; with how long an idle policy's agent has
// gone unused.
func dueText(d planner.Due, at time.Time, tick bool) string {
	var s string
	switch {
	case d.At.IsZero():
		s = "not scheduled: " + d.Note
	case d.Now && d.Note != "":
		s = "due, skipped: " + d.Note
	case d.Now:
		s = "done now"
	case !d.At.After(at) && !tick:
		s = fmt.Sprintf("due since %s (%s)", d.At.UTC().Format("2006-01-02 15:04:05 UTC"), age(d.At, at))
	default:
		s = fmt.Sprintf("due in %s (%s)", planner.ShortDuration(d.At.Sub(at)), d.At.UTC().Format("2006-01-02 15:04:05 UTC"))
	}
	if d.Policy != planner.PolicyEvery && !d.At.IsZero() {
		s += ", idle " + planner.ShortDuration(d.Idle)
	}
	return s
}

// jsonDue is one time policy's due time in plan -json (format 1.1).
type jsonDue struct {
	Agent  string `json:"agent"`
	Policy string `json:"policy"`
	// AfterSeconds is the policy's duration (every, stop_after,
	// archive_after).
	AfterSeconds float64 `json:"after_seconds"`
	// At is when it is due, in RFC 3339; absent when it is not scheduled,
	// Note says why.
	At *string `json:"at,omitempty"`
	// IdleSeconds is how long the agent has gone unused (idle policies).
	IdleSeconds *float64 `json:"idle_seconds,omitempty"`
	Note        string   `json:"note,omitempty"`
	// Now is set in a tick on a policy due at its time.
	Now bool `json:"now,omitempty"`
}

func dueDocument(due []planner.Due) []jsonDue {
	var out []jsonDue
	for _, d := range due {
		j := jsonDue{Agent: d.Agent, Policy: d.Policy, AfterSeconds: d.After.Seconds(), At: optTime(d.At), Note: d.Note, Now: d.Now}
		if d.Policy != planner.PolicyEvery && !d.At.IsZero() {
			idle := d.Idle.Seconds()
			j.IdleSeconds = &idle
		}
		out = append(out, j)
	}
	return out
}
