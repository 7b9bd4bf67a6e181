package command

import (
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2/hcldec"
	"github.com/zclconf/go-cty/cty"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/drivertest"
)

// TestObserveWithoutVariables: the commands that only look at what runs
// (status, logs, exec, egress denials) work without the sensitive key the
// agent was applied with; plan still needs it.
func TestObserveWithoutVariables(t *testing.T) {
	w := newWorkspace(t)
	w.writeFixture("testdata/observe/Bottlefile")
	w.must("apply", "-auto-approve", "-var", "api_key=s3cret-value")
	w.fake.ExecFn = func(req drivers.ExecRequest) (int, error) { return 0, nil }

	for _, args := range [][]string{
		{"status"},
		{"status", "-json", "agent.coder"},
		{"logs", "agent.coder"},
		{"exec", "agent.coder", "--", "true"},
		{"egress denials"},
	} {
		if code, out, errs := w.run(args[0], args[1:]...); code != 0 {
			t.Errorf("%s without -var: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, out, errs)
		} else if strings.Contains(out+errs, "s3cret-value") {
			t.Errorf("%s prints the key", strings.Join(args, " "))
		}
	}
	if code, _, errs := w.run("plan"); code != 1 || !strings.Contains(errs, "No value for required variable") {
		t.Errorf("plan without -var: exit %d, want 1 with the missing variable:\n%s", code, errs)
	}
}

// TestObserveRuntimeNeedsVariable: a runtime configured from a variable
// still needs it, and the error says which and where.
func TestObserveRuntimeNeedsVariable(t *testing.T) {
	w := newWorkspace(t)
	decl := drivertest.FakeDeclaration()
	decl.Schema.Runtime = hcldec.ObjectSpec{"host": &hcldec.AttrSpec{Name: "host", Type: cty.String}}
	w.fake.DeclareResponse = &decl
	w.writeFixture("testdata/observe/runtime.Bottlefile")
	w.must("apply", "-auto-approve", "-var", "engine=unix:///run/engine.sock")
	if w.fake.ConfigureRequest.Config.GetAttr("host").AsString() != "unix:///run/engine.sock" {
		t.Fatalf("the runtime was configured with %#v", w.fake.ConfigureRequest.Config)
	}
	code, _, errs := w.run("status")
	for _, want := range []string{"No value for a variable the runtime needs", `Runtime "default" is configured from a variable that was given no value (var.engine)`, "Bottlefile line 5"} {
		if code != 1 || !strings.Contains(errs, want) {
			t.Errorf("status without the runtime's variable: exit %d, want 1 and %q in:\n%s", code, want, errs)
		}
	}
	if code, out, errs := w.run("status", "-var", "engine=unix:///run/engine.sock"); code != 0 {
		t.Errorf("status with the runtime's variable: exit %d\n%s%s", code, out, errs)
	}
}

// TestOutputWithoutVariables: output, as status, needs only the variables
// the outputs it shows derive from: a non-sensitive output reads without
// the key; a list shows the sensitive one redacted without it; an output
// that needs a variable given no value says which, and where.
func TestOutputWithoutVariables(t *testing.T) {
	w := newWorkspace(t)
	w.writeFixture("testdata/observe/outputs.Bottlefile")
	w.must("apply", "-auto-approve", "-var", "api_key=s3cret-value", "-var", "team=web")

	if out := w.must("output", "coder_id"); !strings.HasPrefix(out, "fake-") {
		t.Errorf("output coder_id without the key: %q, want the agent's id", out)
	}
	code, out, errs := w.run("output")
	if code != 1 || !strings.Contains(errs, `Output "owner" is derived from var.team, given no value`) || !strings.Contains(errs, "Bottlefile line 30") {
		t.Errorf("output (all) without the variables: exit %d, want 1 naming owner's variable and line:\n%s%s", code, out, errs)
	}
	for _, args := range [][]string{{"header"}, {"-json", "owner"}} {
		code, out, errs := w.run("output", args...)
		if code != 1 || !strings.Contains(errs, "No value for a variable the output needs") || strings.Contains(errs, "run apply first") {
			t.Errorf("output %v without its variable: exit %d, want 1 naming it:\n%s%s", args, code, out, errs)
		}
	}
	// With team but not the key, the list reads, the header redacted.
	out = w.must("output", "-var", "team=web")
	if want := "coder_id = \"fake-"; !strings.Contains(out, want) || !strings.Contains(out, "header = (sensitive value)") || !strings.Contains(out, `owner = "team web"`) {
		t.Errorf("output without the key lists:\n%s\nwant coder_id, owner and header redacted", out)
	}
	if out := w.must("output", "-var", "api_key=s3cret-value", "header"); out != "Bearer s3cret-value\n" {
		t.Errorf("output header with the key: %q", out)
	}
}
