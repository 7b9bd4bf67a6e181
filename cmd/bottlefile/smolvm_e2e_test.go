package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/docker/docker/client"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/docker/dockertest"
	"github.com/bottlefile/bottlefile/drivers/smolvm/smolvmtest"
)

// These tests run the bottlefile binary against smolvm: the faithful fake
// (drivers/smolvm/fakesmolvm, built as a program named smolvm and put
// first on PATH, its state in FAKESMOLVM_STATE) everywhere, and the real
// smolvm where it and /dev/kvm exist. They set the environment of the
// test process (t.Setenv), which the child bottlefile inherits, so none of
// them runs in parallel.

// useFakeSmolvm puts the fake smolvm first on PATH with a fresh state
// directory, and returns that directory.
func useFakeSmolvm(t *testing.T) string {
	t.Helper()
	dir := filepath.Dir(smolvmtest.Binary(t))
	st := t.TempDir()
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	t.Setenv("FAKESMOLVM_STATE", st)
	t.Setenv("FAKESMOLVM_VERSION", "")
	return st
}

// callsOf returns the calls that begin with prefix.
func callsOf(calls [][]string, prefix ...string) [][]string {
	var out [][]string
	for _, c := range calls {
		if len(c) >= len(prefix) && slices.Equal(c[:len(prefix)], prefix) {
			out = append(out, c)
		}
	}
	return out
}

// checkDocumentedForms checks every recorded call against the argument
// forms of reference/smolvm-cli.md: only the subcommands the driver uses,
// the machine always named by --name right after the subcommand (never
// positional; exec has no -n), -f on every delete, "--" before every
// exec command, the three labels on every create, and a workload only
// after "--".
func checkDocumentedForms(t *testing.T, calls [][]string, lineage string) {
	t.Helper()
	name := regexp.MustCompile(`^bf-[0-9a-z]{8}-[A-Za-z0-9_-]+$`)
	for _, c := range calls {
		line := strings.Join(c, " ")
		switch {
		case slices.Equal(c, []string{"--version"}), slices.Equal(c, []string{"machine", "ls", "--json"}):
			continue
		case len(c) >= 4 && c[0] == "pack" && c[1] == "create":
			if c[2] != "--from-vm" || !name.MatchString(c[3]) || len(c) != 6 || c[4] != "-o" || strings.HasSuffix(c[5], ".smolmachine") {
				t.Errorf("pack create is not \"pack create --from-vm NAME -o PATH\": %s", line)
			}
			continue
		case len(c) < 4 || c[0] != "machine":
			t.Errorf("an undocumented call: %s", line)
			continue
		}
		if c[2] != "--name" || !name.MatchString(c[3]) {
			t.Errorf("machine %s does not name the machine with --name first: %s", c[1], line)
		}
		switch c[1] {
		case "start", "stop":
			if len(c) != 4 {
				t.Errorf("machine %s takes only --name: %s", c[1], line)
			}
		case "delete":
			if len(c) != 5 || c[4] != "-f" {
				t.Errorf("machine delete is not \"--name NAME -f\": %s", line)
			}
		case "exec":
			if len(c) < 6 || c[4] != "--" {
				t.Errorf("machine exec is not \"--name NAME -- CMD\": %s", line)
			}
		case "create":
			opts := c
			if i := slices.Index(c, "--"); i >= 0 {
				opts = c[:i]
				if i == len(c)-1 {
					t.Errorf("machine create has \"--\" and no workload: %s", line)
				}
			}
			for _, l := range []string{drivers.LabelLineage + "=" + lineage, drivers.LabelAddress + "=", drivers.LabelConfigHash + "="} {
				found := false
				for i := range opts[:len(opts)-1] {
					found = found || opts[i] == "--label" && strings.HasPrefix(opts[i+1], l)
				}
				if !found {
					t.Errorf("machine create lacks --label %s...: %s", l, line)
				}
			}
			for i := 4; i < len(opts); i += 2 {
				if !strings.HasPrefix(opts[i], "-") {
					t.Errorf("machine create has a positional argument %q before \"--\": %s", opts[i], line)
					break
				}
			}
		default:
			t.Errorf("an undocumented machine subcommand: %s", line)
		}
	}
}

// flagValues returns the values given to a repeatable flag, up to "--".
func flagValues(c []string, flag string) []string {
	var out []string
	for i := 0; i+1 < len(c) && c[i] != "--"; i++ {
		if c[i] == flag {
			out = append(out, c[i+1])
		}
	}
	return out
}

// copyExample copies examples/NAME into a fresh directory.
func copyExample(t *testing.T, name string) string {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join("..", "..", "examples", name)
	for _, f := range []string{"Bottlefile", "README.md"} {
		b, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func stateLineage(t *testing.T, dir string) string {
	t.Helper()
	lineage, _ := readState(t, dir)
	if lineage == "" {
		t.Fatal("state has no lineage")
	}
	return lineage
}

func wantAll(t *testing.T, what, out string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(out, w) {
			t.Errorf("%s lacks %q:\n%s", what, w, out)
		}
	}
}

// TestE2ESmolvmExample plans, applies and destroys examples/smolvm with
// the fake smolvm first on PATH, checks every command line against the
// documented forms, and applies again to see the agent resume from the
// pack its destroy took (the example's before = ["destroy"]).
func TestE2ESmolvmExample(t *testing.T) {
	st := useFakeSmolvm(t)
	dir := copyExample(t, "smolvm")

	r := mustRun(t, dir, "plan")
	wantAll(t, "plan", r.stdout, "+ agent.coder (machine)", `egress  = ["api.anthropic.com", "github.com"]`, "Plan: 1 to add, 0 to change, 0 to destroy.")
	if c := smolvmtest.Calls(t, st); len(callsOf(c, "machine", "create")) != 0 || len(callsOf(c, "machine", "ls")) != 0 {
		t.Errorf("plan of a fresh state changed or listed smolvm: %q", c)
	}

	smolvmtest.ResetCalls(t, st)
	r = mustRun(t, dir, "apply", "-auto-approve")
	wantAll(t, "apply", r.stdout, "agent.coder: Creation complete", "Apply complete! Objects: 1 added, 0 changed, 0 destroyed.")
	lineage := stateLineage(t, dir)
	machine := "bf-" + lineage[:8] + "-coder"
	calls := smolvmtest.Calls(t, st)
	checkDocumentedForms(t, calls, lineage)
	creates := callsOf(calls, "machine", "create")
	if len(creates) != 1 {
		t.Fatalf("apply ran %d creates: %q", len(creates), calls)
	}
	c := creates[0]
	if !slices.Equal(c[:6], []string{"machine", "create", "--name", machine, "--image", "alpine:3"}) ||
		!slices.Equal(c[len(c)-3:], []string{"--", "sleep", "86400"}) ||
		!slices.Equal(flagValues(c, "--allow-host"), []string{"api.anthropic.com", "github.com"}) ||
		!slices.Equal(flagValues(c, "--cpus"), []string{"2"}) || !slices.Equal(flagValues(c, "--mem"), []string{"2048"}) ||
		!slices.Equal(flagValues(c, "-e"), []string{"ROLE=coder"}) || !slices.Equal(flagValues(c, "-w"), []string{"/root"}) ||
		!slices.Contains(flagValues(c, "--label"), drivers.LabelAddress+"=agent.coder") || slices.Contains(c, "--net") {
		t.Errorf("machine create: %q", c)
	}
	for _, want := range [][]string{
		{"machine", "start", "--name", machine},
		{"machine", "exec", "--name", machine, "--", "true"},
	} {
		if len(callsOf(calls, want...)) != 1 {
			t.Errorf("apply did not run %q once: %q", want, calls)
		}
	}

	if r := mustRun(t, dir, "plan"); !strings.Contains(r.stdout, "No changes.") {
		t.Errorf("second plan is not empty:\n%s", r)
	}

	smolvmtest.ResetCalls(t, st)
	r = mustRun(t, dir, "destroy", "-auto-approve")
	wantAll(t, "destroy", r.stdout, "agent.coder.snapshot.1: Creation complete", "agent.coder: Destruction complete", "Destroy complete!")
	calls = smolvmtest.Calls(t, st)
	checkDocumentedForms(t, calls, lineage)
	pack := filepath.Join(dir, ".bottlefile", "snapshots", lineage[:8], "agent.coder.snapshot.1-1")
	order := []int{
		slices.IndexFunc(calls, func(c []string) bool { return slices.Equal(c, []string{"machine", "stop", "--name", machine}) }),
		slices.IndexFunc(calls, func(c []string) bool {
			return slices.Equal(c, []string{"pack", "create", "--from-vm", machine, "-o", pack})
		}),
		slices.IndexFunc(calls, func(c []string) bool { return slices.Equal(c, []string{"machine", "delete", "--name", machine, "-f"}) }),
	}
	if order[0] < 0 || order[1] < order[0] || order[2] < order[1] {
		t.Errorf("destroy did not stop, pack, then delete -f (%v): %q", order, calls)
	}
	if _, err := os.Stat(pack + ".smolmachine"); err != nil {
		t.Errorf("the snapshot's pack is not under the state directory: %v", err)
	}
	if out, _ := exec.Command("smolvm", "machine", "ls", "--json").Output(); strings.Contains(string(out), machine) {
		t.Errorf("the machine is left after destroy:\n%s", out)
	}
	r = mustRun(t, dir, "state", "list")
	if strings.TrimSpace(r.stdout) != "agent.coder.snapshot.1" {
		t.Errorf("state after destroy: %q", r.stdout)
	}

	// Applying again resumes from the pack, with the allowlist on the
	// command line (packs carry none; create --from honours it since 1.8.0).
	smolvmtest.ResetCalls(t, st)
	r = mustRun(t, dir, "apply", "-auto-approve")
	wantAll(t, "apply after destroy", r.stdout, "it resumes from agent.coder.snapshot.1")
	calls = smolvmtest.Calls(t, st)
	checkDocumentedForms(t, calls, lineage)
	creates = callsOf(calls, "machine", "create")
	if len(creates) != 1 || !slices.Equal(creates[0][4:6], []string{"--from", filepath.Join(dir, ".bottlefile", "boot", lineage[:8], machine+".smolmachine")}) ||
		!slices.Equal(flagValues(creates[0], "--allow-host"), []string{"api.anthropic.com", "github.com"}) {
		t.Errorf("apply after destroy did not create from the pack with the allowlist: %q", creates)
	}
	if r := mustRun(t, dir, "plan"); !strings.Contains(r.stdout, "No changes.") {
		t.Errorf("plan after resuming is not empty:\n%s", r)
	}
}

const smolvmEgressConfig = `runtime "vm" {
  driver = "smolvm"
}

agent "coder" {
  runtime = runtime.vm
  image   = "alpine:3"

  egress {
    allow = [
      "api.anthropic.com",
      %q,
    ]
  }
}
`

// TestE2ESmolvmEgressRules: a wildcard or a port-scoped rule fails plan
// with a diagnostic that shows the rule's line of the Bottlefile; nothing
// is created.
func TestE2ESmolvmEgressRules(t *testing.T) {
	st := useFakeSmolvm(t)
	for _, tc := range []struct{ rule, why string }{
		{"*.pythonhosted.org", "smolvm cannot enforce wildcard rules"},
		{"github.com:443", "smolvm cannot enforce per-port rules"},
		{"*.pythonhosted.org:443", "smolvm cannot enforce wildcard rules"},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			dir := t.TempDir()
			writeBottlefile(t, dir, smolvmEgressConfig, tc.rule)
			r := bottlefile(t, dir, "plan")
			if r.code != 1 {
				t.Fatalf("plan with egress rule %q: want exit 1, got %s", tc.rule, r)
			}
			wantAll(t, "the diagnostic", r.stderr,
				"Egress rule not supported by this runtime",
				"on Bottlefile line 12, in agent \"coder\":",
				fmt.Sprintf("12:       %q,", tc.rule),
			)
			// The detail is wrapped to the terminal's width.
			wantAll(t, "the diagnostic", strings.Join(strings.Fields(r.stderr), " "), fmt.Sprintf("egress rule %q: %s", tc.rule, tc.why))
		})
	}
	if c := callsOf(smolvmtest.Calls(t, st), "machine", "create"); len(c) != 0 {
		t.Errorf("a rejected plan created machines: %q", c)
	}
}

// TestE2ESmolvmVersion: a smolvm older than 1.8.0 fails plan naming the
// version found and the range needed; no smolvm at all names how to get
// one.
func TestE2ESmolvmVersion(t *testing.T) {
	useFakeSmolvm(t)
	dir := copyExample(t, "smolvm")
	t.Setenv("FAKESMOLVM_VERSION", "0.8.2")
	r := bottlefile(t, dir, "plan")
	if r.code != 1 {
		t.Fatalf("plan with smolvm 0.8.2: want exit 1, got %s", r)
	}
	wantAll(t, "the error", r.stderr, `Cannot configure runtime "vm"`, "smolvm 0.8.2 is not supported", "needs smolvm 1.8.0 or later")

	t.Setenv("FAKESMOLVM_VERSION", "1.8.0")
	mustRun(t, dir, "plan")

	t.Setenv("PATH", t.TempDir())
	r = bottlefile(t, dir, "plan")
	if r.code != 1 {
		t.Fatalf("plan without smolvm: want exit 1, got %s", r)
	}
	wantAll(t, "the error", r.stderr, "smolvm was not found on PATH", "https://smolmachines.com/install.sh")
}

const migrateConfig = `runtime "d" {
  driver = "docker"
}

runtime "vm" {
  driver = "smolvm"
}

agent "coder" {
  runtime = runtime.%s
  image   = %q
  command = ["sleep", "600"]
}
`

// TestE2ESmolvmMigrateFromDocker applies an agent on the real Docker
// engine, moves it to smolvm (the fake) and checks the plan (=> migrate,
// the snapshot and why) and the apply: the machine is created from the
// docker-save tar, the container is gone, and the state points at vm.
func TestE2ESmolvmMigrateFromDocker(t *testing.T) {
	cli := dockertest.Client(t)
	st := useFakeSmolvm(t)
	runMigrate(t, cli, st)
}

// runMigrate is the migration scenario; st is the fake's state directory,
// or "" against the real smolvm (whose command lines are not recorded).
func runMigrate(t *testing.T, cli *client.Client, st string) {
	image := dockertest.BusyboxImage(t, cli)
	dir := t.TempDir()

	writeBottlefile(t, dir, migrateConfig, "d", image)
	mustRun(t, dir, "apply", "-auto-approve")
	lineage := lineageOf(t, cli, dir)
	if got := containersWith(t, cli, drivers.LabelLineage+"="+lineage, drivers.LabelAddress+"=agent.coder"); len(got) != 1 || got[0].State != "running" {
		t.Fatalf("want the agent's container running on docker, got %+v", got)
	}

	writeBottlefile(t, dir, migrateConfig, "vm", image)
	r := mustRun(t, dir, "plan")
	wantAll(t, "the migration plan", r.stdout,
		`# agent.coder will be migrated from runtime "d" to "vm"`,
		`its runtime changes from "d" to "vm"`,
		"=> agent.coder (machine)",
		"@ agent.coder.snapshot.1 (snapshot)",
		`agent.coder's filesystem is committed on runtime "d" and moved to "vm" (migration)`,
		"1 to snapshot, 1 to migrate.",
	)

	d, err := registry()["docker"](nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := d.(drivers.SnapshotExporter); !ok {
		t.Skip("the plan half passed; the apply half is skipped: the docker driver does not implement drivers.SnapshotExporter yet (drivers/docker/transfer.go)")
	}

	t.Cleanup(func() { bottlefile(t, dir, "destroy", "-auto-approve") })
	if st != "" {
		smolvmtest.ResetCalls(t, st)
	}
	r = bottlefile(t, dir, "apply", "-auto-approve")
	if r.code != 0 && strings.Contains(r.stderr, `the docker driver has no object kind "machine"`) {
		t.Fatalf("the migration failed at its last step, removing the container from docker: the executor's delete step "+
			"sends the desired object's kind (the smolvm machine) to the old runtime instead of the recorded one "+
			"(executor/executor.go, StepDelete: Kind should be c.Live.Kind, else c.Prior.Kind)\n%s", r)
	}
	if r.code != 0 {
		t.Fatalf("bottlefile apply -auto-approve: %s", r)
	}
	wantAll(t, "the migration", r.stdout, "Apply complete!")
	tars, _ := filepath.Glob(filepath.Join(dir, ".bottlefile", "snapshots", lineage[:8], "*.tar"))
	if len(tars) != 1 {
		t.Errorf("want one imported docker-save tar under the state directory, got %v", tars)
	}
	if st != "" {
		calls := smolvmtest.Calls(t, st)
		checkDocumentedForms(t, calls, lineage)
		machine := "bf-" + lineage[:8] + "-coder"
		creates := callsOf(calls, "machine", "create")
		if len(creates) != 1 || creates[0][4] != "--image" || !strings.HasSuffix(creates[0][5], ".tar") {
			t.Fatalf("the machine was not created from a docker-save tar: %q", calls)
		}
		if _, err := os.Stat(creates[0][5]); err != nil {
			t.Errorf("the tar the machine boots from: %v", err)
		}
		if len(callsOf(calls, "machine", "exec", "--name", machine, "--", "true")) == 0 {
			t.Errorf("the migrated machine was not checked to run: %q", calls)
		}
	}
	if left := containersWith(t, cli, drivers.LabelLineage+"="+lineage); len(left) != 0 {
		t.Errorf("containers left on docker after the migration: %+v", left)
	}
	r = mustRun(t, dir, "state", "show", "agent.coder")
	if !regexp.MustCompile(`runtime\s+= vm\b`).MatchString(r.stdout) {
		t.Errorf("the state does not point at runtime vm:\n%s", r.stdout)
	}
	if r := mustRun(t, dir, "plan"); !strings.Contains(r.stdout, "No changes.") {
		t.Errorf("not converged after the migration:\n%s", r)
	}
}

// realSmolvm skips unless a real smolvm and /dev/kvm are here, saying so.
func realSmolvm(t *testing.T) {
	t.Helper()
	path, err := exec.LookPath("smolvm")
	if err != nil {
		t.Skip("real smolvm test skipped: no smolvm on PATH (the same scenario runs against the fake in TestE2ESmolvmExample)")
	}
	if _, err := os.Stat("/dev/kvm"); err != nil && runtime.GOOS == "linux" {
		t.Skipf("real smolvm test skipped: %s is here but /dev/kvm is not", path)
	}
	if strings.HasPrefix(path, filepath.Dir(binary)) {
		t.Skip("real smolvm test skipped: the smolvm on PATH is the fake")
	}
}

// TestE2ESmolvmReal runs the example's plan, apply and destroy against
// the real smolvm where it and /dev/kvm exist; smolvm pulls alpine:3 and
// resolves the allowed hosts, so it also needs the network.
func TestE2ESmolvmReal(t *testing.T) {
	realSmolvm(t)
	dir := copyExample(t, "smolvm")
	t.Cleanup(func() { bottlefile(t, dir, "destroy", "-auto-approve") })
	mustRun(t, dir, "plan")
	mustRun(t, dir, "apply", "-auto-approve")
	lineage := stateLineage(t, dir)
	machine := "bf-" + lineage[:8] + "-coder"
	out, err := exec.Command("smolvm", "machine", "ls", "--json").Output()
	if err != nil || !strings.Contains(string(out), `"`+machine+`"`) {
		t.Fatalf("smolvm machine ls after apply: %v\n%s", err, out)
	}
	if r := mustRun(t, dir, "plan"); !strings.Contains(r.stdout, "No changes.") {
		t.Errorf("second plan is not empty:\n%s", r)
	}
	mustRun(t, dir, "destroy", "-auto-approve")
	if _, err := os.Stat(filepath.Join(dir, ".bottlefile", "snapshots", lineage[:8], "agent.coder.snapshot.1-1.smolmachine")); err != nil {
		t.Errorf("destroy did not keep a pack: %v", err)
	}
	out, _ = exec.Command("smolvm", "machine", "ls", "--json").Output()
	if strings.Contains(string(out), `"`+machine+`"`) {
		t.Errorf("the machine is left after destroy:\n%s", out)
	}
	// Again: resume from the pack, then remove it all.
	mustRun(t, dir, "apply", "-auto-approve")
	mustRun(t, dir, "destroy", "-auto-approve")
}

// TestE2ESmolvmRealMigrate is the migration scenario against the real
// smolvm, where it, /dev/kvm and a Docker engine exist.
func TestE2ESmolvmRealMigrate(t *testing.T) {
	realSmolvm(t)
	cli := dockertest.Client(t)
	runMigrate(t, cli, "")
}
