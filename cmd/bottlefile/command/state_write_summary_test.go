package command

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/bottlefile/bottlefile/executor"
)

// TestSummaryAfterStateWriteFailure: when a state write failed, the apply
// summary does not claim the state records everything that was done.
func TestSummaryAfterStateWriteFailure(t *testing.T) {
	for _, tc := range []struct {
		stateErr error
		want     string
		not      string
	}{
		{nil, "State records everything that was done", "could not record"},
		{errors.New("writing state x: no space left on device"), "The state could not record everything that was done (writing state x: no space left on device)", "State records everything"},
	} {
		var out bytes.Buffer
		v := newApplyView(&Meta{Stdout: &out}, false)
		v.Summary(applyResult(executor.Result{}, false, true, tc.stateErr))
		if !strings.Contains(out.String(), tc.want) || strings.Contains(out.String(), tc.not) {
			t.Errorf("state error %v: summary says\n%s", tc.stateErr, out.String())
		}
	}
}
