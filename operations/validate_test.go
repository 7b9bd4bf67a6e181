package operations

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/hcl/v2"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/docker"
	"github.com/bottlefile/bottlefile/drivers/smolvm"
	"github.com/bottlefile/bottlefile/drivers/swarm"
	"github.com/bottlefile/bottlefile/policy"
)

// guarded is a real driver whose every call but Name and Declare fails
// the test: what validate may use of a driver.
type guarded struct {
	drivers.Driver
	t *testing.T
}

func (g guarded) Configure(context.Context, drivers.ConfigureRequest) error {
	g.t.Errorf("validate configured the %s driver", g.Name())
	return fmt.Errorf("validate must not configure")
}

func (g guarded) Read(context.Context, drivers.ReadRequest) (drivers.ReadResponse, error) {
	g.t.Errorf("validate read the %s runtime", g.Name())
	return drivers.ReadResponse{}, fmt.Errorf("validate must not read")
}

func (g guarded) Plan(context.Context, drivers.PlanRequest) (drivers.PlanResponse, error) {
	g.t.Errorf("validate asked the %s driver to plan", g.Name())
	return drivers.PlanResponse{}, fmt.Errorf("validate must not plan")
}

func (g guarded) Apply(context.Context, drivers.ApplyRequest) (drivers.ApplyResponse, error) {
	g.t.Errorf("validate applied on the %s runtime", g.Name())
	return drivers.ApplyResponse{}, fmt.Errorf("validate must not apply")
}

// guardedRegistry is the production drivers, each unable to do anything
// but declare itself. DOCKER_HOST points nowhere, so a docker client that
// did connect would fail too.
func guardedRegistry(t *testing.T) Registry {
	t.Setenv("DOCKER_HOST", "unix:///nonexistent/validate-must-not-connect.sock")
	wrap := func(f drivers.Factory) drivers.Factory {
		return func(log hclog.Logger) (drivers.Driver, error) {
			d, err := f(log)
			if err != nil {
				return nil, err
			}
			return guarded{Driver: d, t: t}, nil
		}
	}
	return Registry{"docker": wrap(docker.New), "smolvm": wrap(smolvm.New), "swarm": wrap(swarm.Factory(docker.NewEngine))}
}

// TestValidateStatic runs validate on each fixture in testdata/validate.
// A fixture marks each error it must produce on the line it must point at,
// with a comment "# ERROR: SUMMARY | DETAIL": the diagnostic has that
// summary, its detail contains DETAIL, and there is no other error. No
// driver is configured, nor any runtime contacted.
func TestValidateStatic(t *testing.T) {
	dirs, err := filepath.Glob("testdata/validate/*")
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	for _, dir := range dirs {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			want := expectedErrors(t, filepath.Join(dir, "Bottlefile"))
			_, diags := Validate(ValidateRequest{LoadDir: dir, Registry: guardedRegistry(t)})
			checkErrors(t, want, diags)
		})
	}
}

// expectation is one "# ERROR:" mark.
type expectation struct {
	file           string
	line           int
	summary, words string
}

func (e expectation) String() string {
	return fmt.Sprintf("%s:%d: %s | %s", e.file, e.line, e.summary, e.words)
}

func expectedErrors(t *testing.T, path string) []expectation {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []expectation
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		_, mark, ok := strings.Cut(sc.Text(), "# ERROR: ")
		if !ok {
			continue
		}
		summary, words, _ := strings.Cut(mark, " | ")
		out = append(out, expectation{file: path, line: line, summary: summary, words: words})
	}
	return out
}

// describe renders a diagnostic as "FILE:LINE: SUMMARY | DETAIL".
func describe(d *hcl.Diagnostic) string {
	where := "(no range)"
	if d.Subject != nil {
		where = fmt.Sprintf("%s:%d", d.Subject.Filename, d.Subject.Start.Line)
	}
	return fmt.Sprintf("%s: %s | %s", where, d.Summary, d.Detail)
}

func matches(got string, w expectation) bool {
	prefix := fmt.Sprintf("%s:%d: %s | ", w.file, w.line, w.summary)
	return strings.HasPrefix(got, prefix) && strings.Contains(got[len(prefix):], w.words)
}

// TestValidatePolicy runs validate on each fixture of
// testdata/validate-policy under the operator's egress policy: the
// fixture's own policy.hcl when it has one, else the shared one there.
// Errors are marked as in TestValidateStatic, in either file; a runtime
// the author adds falls under the policy, and every refusal names the
// policy's file.
func TestValidatePolicy(t *testing.T) {
	dirs, err := filepath.Glob("testdata/validate-policy/*/Bottlefile")
	for i := range dirs {
		dirs[i] = filepath.Dir(dirs[i])
	}
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	for _, dir := range dirs {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			pol := filepath.Join(dir, "policy.hcl")
			want := expectedErrors(t, filepath.Join(dir, "Bottlefile"))
			if _, err := os.Stat(pol); err == nil {
				want = append(want, expectedErrors(t, pol)...)
			} else {
				pol = "testdata/validate-policy/policy.hcl"
			}
			t.Setenv(policy.EnvVar, pol)
			_, diags := Validate(ValidateRequest{LoadDir: dir, Registry: guardedRegistry(t)})
			checkErrors(t, want, diags)
		})
	}
}

// checkErrors fails the test for each wanted error (# ERROR: markers) that
// diags lacks and for each error diags has that no marker wants.
func checkErrors(t *testing.T, want []expectation, diags hcl.Diagnostics) {
	t.Helper()
	var got []string
	for _, d := range diags {
		if d.Severity == hcl.DiagError {
			got = append(got, describe(d))
		}
	}
	for _, w := range want {
		i := slices.IndexFunc(got, func(g string) bool { return matches(g, w) })
		if i < 0 {
			t.Errorf("missing error %s", w)
			continue
		}
		got = slices.Delete(got, i, i+1)
	}
	for _, g := range got {
		t.Errorf("unexpected error %s", g)
	}
}
