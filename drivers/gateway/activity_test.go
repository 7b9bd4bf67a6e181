package gateway

import (
	"testing"

	"github.com/bottlefile/bottlefile/egress"
)

// TestActivityPath: the stamp a driver reads is the one the gateway keeps
// beside its report.
func TestActivityPath(t *testing.T) {
	if got := egress.ActivityBeside(StatePath); got != ActivityPath {
		t.Errorf("the gateway keeps its activity stamp at %s, drivers read %s", got, ActivityPath)
	}
}
