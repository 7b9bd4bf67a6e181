package command

import (
	"fmt"
	"strings"
	"testing"
)

const protectedAgent = `
agent "coder" {
  image   = "busybox:1"
  command = %s

  lifecycle {
    prevent_destroy = %s
  }
}
`

func sprintf(format string, args ...any) string {
	return fmt.Sprintf(format, args...)
}

// TestPreventDestroy: a protected agent cannot be replaced or destroyed, and
// its record keeps protecting it after its block is removed, until the
// protection is lifted with an apply.
func TestPreventDestroy(t *testing.T) {
	w := newWorkspace(t)
	w.write(sprintf(protectedAgent, `["sleep", "600"]`, "true"))
	w.must("apply", "-auto-approve")

	w.write(sprintf(protectedAgent, `["sleep", "700"]`, "true"))
	code, _, errs := w.run("plan")
	if code != 1 || !strings.Contains(errs, "lifecycle.prevent_destroy") || !strings.Contains(errs, "command changed") {
		t.Fatalf("replacing a protected agent: want exit 1 naming prevent_destroy and the forcing attribute, got %d:\n%s", code, errs)
	}
	if !strings.Contains(errs, "Bottlefile line 6") {
		t.Errorf("the error does not point at the lifecycle block:\n%s", errs)
	}

	w.write("")
	code, _, errs = w.run("destroy", "-auto-approve")
	if code != 1 || !strings.Contains(errs, "record still carries lifecycle.prevent_destroy") {
		t.Fatalf("the record did not keep protecting the removed agent: exit %d\n%s", code, errs)
	}
	if got := w.fake.Objects(w.lineage()); len(got) != 2 {
		t.Fatalf("a refused destroy changed the runtime: %+v", got)
	}

	// Lifting the protection is a change of record only.
	w.write(sprintf(protectedAgent, `["sleep", "600"]`, "false"))
	out := w.must("plan")
	if !strings.Contains(out, "only the record changes") || !strings.Contains(out, "2 to change") {
		t.Fatalf("lifting prevent_destroy is not shown as a change of record:\n%s", out)
	}
	before := w.fake.ApplyCalls
	w.must("apply", "-auto-approve")
	if w.fake.ApplyCalls != before {
		t.Errorf("a change of record called the driver %d times", w.fake.ApplyCalls-before)
	}
	w.write("")
	w.must("destroy", "-auto-approve")
	if got := w.fake.Objects(w.lineage()); len(got) != 0 {
		t.Fatalf("destroy left objects: %+v", got)
	}
}
