package drivers_test

import (
	"strings"
	"testing"

	"github.com/bottlefile/bottlefile/drivers"
)

// TestCheckIdle: an idle block is refused, on the block, by a driver that
// cannot report activity, naming it; one that can accepts it.
func TestCheckIdle(t *testing.T) {
	if r := (drivers.Capabilities{Activity: true}).CheckIdle("docker"); r != nil {
		t.Errorf("a driver that reports activity refused an idle block: %v", r)
	}
	r := (drivers.Capabilities{}).CheckIdle("smolvm")
	if r == nil {
		t.Fatal("a driver that cannot report activity accepted an idle block")
	}
	if r.Block != "idle" || !strings.Contains(r.Message, "smolvm driver cannot tell when an agent was last used") {
		t.Errorf("refusal %+v: want one on the idle block naming the driver", r)
	}
}
