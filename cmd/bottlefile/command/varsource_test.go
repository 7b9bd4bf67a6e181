package command

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestVarSourceNamed: a value of the wrong type names where it came from:
// the -var option, the variables file or the environment variable. The
// errors are golden files in testdata/var-source.
func TestVarSourceNamed(t *testing.T) {
	cases := []struct {
		name string
		args []string
		env  string
		want string
	}{
		{name: "var", args: []string{"-var", "agents=many"}, want: "by the option -var agents=many"},
		{name: "var-file", args: []string{"-var-file=bad.vars"}, want: "by the variables file bad.vars"},
		{name: "env", env: "many", want: "by the environment variable BOTTLEFILE_VAR_agents"},
		{name: "var-sensitive", args: []string{"-var", "budget=lots"}, want: "by the option -var budget=... (sensitive, not shown)"},
	}
	goldenDir, err := filepath.Abs(filepath.Join("testdata", "var-source"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorkspace(t)
			w.write(`
variable "agents" {
  type    = number
  default = 1
}

variable "budget" {
  type      = number
  default   = 1
  sensitive = true
}

agent "coder" {
  image = "busybox:1"
  env   = { AGENTS = tostring(var.agents), BUDGET = tostring(var.budget) }
}
`)
			if err := os.WriteFile(filepath.Join(w.dir, "bad.vars"), []byte("agents = \"many\"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			if tc.env != "" {
				t.Setenv("BOTTLEFILE_VAR_agents", tc.env)
			}
			// -var-file=bad.vars is read from the working directory.
			t.Chdir(w.dir)
			args := tc.args
			code, _, errs := w.run("plan", args...)
			if code != 1 {
				t.Fatalf("plan %v: exit %d, want 1\n%s", args, code, errs)
			}
			errs = w.normalize(errs)
			if !strings.Contains(strings.Join(strings.Fields(errs), " "), tc.want) {
				t.Errorf("the error does not name the source %q:\n%s", tc.want, errs)
			}
			if strings.Contains(errs, "lots") {
				t.Errorf("a sensitive value was shown:\n%s", errs)
			}
			golden(t, filepath.Join(goldenDir, tc.name+".txt"), errs)
		})
	}
}
