package command

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const secretConfig = `
variable "api_key" {
  type      = string
  sensitive = true
}

locals {
  header = "Bearer ${var.api_key}"
}

agent "coder" {
  image = "busybox:1"
  env = {
    API_KEY = var.api_key
    HEADER  = local.header
    ROLE    = "coder"
  }
}

output "header" {
  value     = local.header
  sensitive = true
}
`

// TestSensitiveNeverShown puts a secret in a sensitive variable and looks
// for it in everything bottlefile prints or writes: validate, plan (human
// and JSON), a saved plan file, apply, the state commands, show, output,
// and trace-level logs.
func TestSensitiveNeverShown(t *testing.T) {
	const secret = "sk-test-0123456789abcdef"
	for _, how := range []string{"-var", "env"} {
		t.Run(how, func(t *testing.T) {
			var logs bytes.Buffer
			w := newWorkspace(t)
			w.log = &logs
			w.write(secretConfig)
			var vars []string
			if how == "-var" {
				vars = []string{"-var", "api_key=" + secret}
			} else {
				t.Setenv("BOTTLEFILE_VAR_api_key", secret)
			}
			planFile := filepath.Join(w.dir, "saved.plan")
			var seen strings.Builder
			record := func(name string, args ...string) {
				code, out, errs := w.run(name, args...)
				if code != 0 {
					t.Fatalf("%s %v: exit %d\n%s%s", name, args, code, out, errs)
				}
				seen.WriteString(out + errs)
			}
			record("validate")
			record("validate", "-json")
			record("plan", vars...)
			record("plan", append([]string{"-json"}, vars...)...)
			record("plan", append([]string{"-out=" + planFile}, vars...)...)
			record("show", planFile)
			record("show", "-json", planFile)
			record("apply", append([]string{"-auto-approve"}, vars...)...)
			record("state list")
			record("state show", "agent.coder")
			record("state pull")
			record("show")
			record("output", vars...)
			record("output", append([]string{"-json"}, vars...)...)

			if !strings.Contains(seen.String(), "(sensitive value)") {
				t.Errorf("the outputs never show a redacted value; did the test reach the secret at all?")
			}
			files := map[string][]byte{"logs": logs.Bytes(), "output": []byte(seen.String())}
			files["plan file"], _ = os.ReadFile(planFile)
			files["state database"], _ = os.ReadFile(filepath.Join(w.dir, ".bottlefile", "state.db"))
			for name, data := range files {
				if len(data) == 0 {
					t.Errorf("%s is empty: nothing was checked", name)
				}
				if bytes.Contains(data, []byte(secret)) {
					t.Errorf("the secret appears in the %s", name)
				}
			}
			// The value did reach the runtime.
			for _, req := range w.fake.ApplyRequests {
				if req.Object.Addr == "agent.coder" && strings.Contains(req.Object.Attrs["env"].GoString(), secret) {
					return
				}
			}
			t.Errorf("the secret never reached the driver")
		})
	}
}
