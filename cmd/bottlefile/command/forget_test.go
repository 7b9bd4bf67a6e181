package command

import (
	"errors"
	"slices"
	"testing"
)

// TestForgetDestroyedBottles: after a destroy the drivers are asked to
// forget each bottle of which the state records nothing any more (what
// they keep outside the runtime, such as a bottle's CA, goes with it),
// and only those: not one still running, nor one whose destroy failed.
func TestForgetDestroyedBottles(t *testing.T) {
	w := newWorkspace(t)
	w.write(`
agent "a" {
  image   = "busybox:1"
  command = ["sleep", "600"]
  egress {
    allow = ["github.com:443"]
  }
}

agent "b" {
  image   = "busybox:1"
  command = ["sleep", "600"]
}
`)
	w.must("apply", "-auto-approve")
	lineage := w.lineage()
	if len(w.fake.Forgotten) != 0 {
		t.Fatalf("apply forgot %v", w.fake.Forgotten)
	}
	w.must("destroy", "-auto-approve", "-target=agent.a")
	if want := []string{lineage + " agent.a"}; !slices.Equal(w.fake.Forgotten, want) {
		t.Fatalf("after destroying agent.a, forgotten %v, want %v", w.fake.Forgotten, want)
	}
	w.fake.FailApply = map[string]error{"agent.b": errors.New("engine refused")}
	if code, _, _ := w.run("destroy", "-auto-approve"); code != 1 {
		t.Fatalf("destroy with a failing delete: exit %d, want 1", code)
	}
	if len(w.fake.Forgotten) != 1 {
		t.Fatalf("a bottle whose destroy failed was forgotten: %v", w.fake.Forgotten)
	}
	w.fake.FailApply = nil
	w.must("destroy", "-auto-approve")
	if want := []string{lineage + " agent.a", lineage + " agent.b"}; !slices.Equal(w.fake.Forgotten, want) {
		t.Errorf("after the destroy, forgotten %v, want %v", w.fake.Forgotten, want)
	}
}
