package command

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// TestApplyJSON: apply -json prints one JSON object per line: the plan,
// each step's start and end, any diagnostic, and a summary.
func TestApplyJSON(t *testing.T) {
	w := newWorkspace(t)
	w.write(threeAgents)
	w.fake.FailApply = map[string]error{"agent.broken": errors.New("image not found")}
	code, out, errs := w.run("apply", "-json", "-auto-approve")
	if code != 1 {
		t.Fatalf("want exit 1 (one agent fails), got %d\n%s%s", code, out, errs)
	}
	counts := map[string]int{}
	var last jsonEvent
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var e jsonEvent
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("not one JSON object per line: %q: %v", line, err)
		}
		if e.Time == "" {
			t.Errorf("event without a time: %s", line)
		}
		counts[e.Type]++
		last = e
	}
	want := map[string]int{"planned": 1, "apply_start": 4, "apply_complete": 3, "apply_errored": 1, "apply_skipped": 2, "diagnostic": 1, "summary": 1}
	for typ, n := range want {
		if counts[typ] != n {
			t.Errorf("%d %q events, want %d (all: %v)", counts[typ], typ, n, counts)
		}
	}
	if last.Type != "summary" || last.Summary == nil || last.Summary.Add != 3 || !strings.Contains(last.Message, "1 failed, 2 not started") {
		t.Errorf("the last event is not the right summary: %+v", last)
	}
	if errs != "" {
		t.Errorf("apply -json wrote to stderr: %s", errs)
	}
	if code, _, errs := w.run("apply", "-json"); code != 1 || !strings.Contains(errs, "-json needs -auto-approve") {
		t.Errorf("apply -json without -auto-approve: exit %d\n%s", code, errs)
	}
}
