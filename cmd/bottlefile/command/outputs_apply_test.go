package command

import (
	"regexp"
	"strings"
	"testing"
)

const outputsConfig = `
agent "coder" {
  image   = "busybox:1"
  command = ["sleep", "%s"]
}

output "coder_id" {
  value = agent.coder.id
}

output "greeting" {
  value = "hello"
}
`

// TestOutputsInPlanAndApply: plan shows how the outputs change, as
// Terraform's "Changes to Outputs"; apply ends with the outputs.
func TestOutputsInPlanAndApply(t *testing.T) {
	w := newWorkspace(t)
	w.write(strings.Replace(outputsConfig, "%s", "600", 1))
	ids := regexp.MustCompile(`"fake-\d+"`)

	out := w.must("plan")
	golden(t, "testdata/outputs/create.txt", w.normalize(out))
	out = w.must("apply", "-auto-approve")
	if !regexp.MustCompile(`(?s)Apply complete!.*\n\nOutputs:\n\ncoder_id = "fake-\d+"\ngreeting = "hello"\n$`).MatchString(out) {
		t.Errorf("apply does not end with the outputs:\n%s", out)
	}

	if out := w.must("plan"); strings.Contains(out, "Changes to Outputs") {
		t.Errorf("a plan with no changes shows output changes:\n%s", out)
	}
	w.write(strings.Replace(outputsConfig, "%s", "700", 1))
	out = w.must("plan")
	golden(t, "testdata/outputs/replace.txt", ids.ReplaceAllString(w.normalize(out), `"fake-ID"`))
	out = w.must("plan", "-destroy")
	golden(t, "testdata/outputs/destroy.txt", ids.ReplaceAllString(w.normalize(out), `"fake-ID"`))
	if out := w.must("destroy", "-auto-approve"); strings.Contains(out, "\nOutputs:\n") {
		t.Errorf("destroy prints outputs:\n%s", out)
	}
}
