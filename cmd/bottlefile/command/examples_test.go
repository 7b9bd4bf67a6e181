package command

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bottlefile/bottlefile/drivers/docker"
	"github.com/bottlefile/bottlefile/drivers/drivertest"
	"github.com/bottlefile/bottlefile/drivers/kubernetes"
	"github.com/bottlefile/bottlefile/drivers/smolvm"
	"github.com/bottlefile/bottlefile/drivers/swarm"
)

// TestExamples: every directory under examples/ validates with no error, is
// formatted, has a README and is linked from the top-level README.
func TestExamples(t *testing.T) {
	dirs, err := filepath.Glob(filepath.Join("..", "..", "..", "examples", "*"))
	if err != nil {
		t.Fatal(err)
	}
	top, err := os.ReadFile(filepath.Join("..", "..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, dir := range dirs {
		if info, err := os.Stat(filepath.Join(dir, "Bottlefile")); err != nil || info.IsDir() {
			continue
		}
		found++
		t.Run(filepath.Base(dir), func(t *testing.T) {
			// Fakes that declare what the real drivers declare: validate
			// checks each example against them.
			dk, sv, sw, kd := docker.Declaration(), smolvm.Declaration(), swarm.Declaration(), kubernetes.Declaration()
			w := &workspace{t: t, dir: dir,
				fake: &drivertest.Fake{DriverName: "docker", DeclareResponse: &dk},
				extra: map[string]*drivertest.Fake{
					"smolvm":     {DriverName: "smolvm", DeclareResponse: &sv},
					"swarm":      {DriverName: "swarm", DeclareResponse: &sw},
					"kubernetes": {DriverName: "kubernetes", DeclareResponse: &kd},
				},
			}
			if code, out, errs := w.run("validate"); code != 0 {
				t.Errorf("validate: exit %d\n%s%s", code, out, errs)
			}
			if code, out, errs := w.run("fmt", "-check", "-recursive"); code != 0 {
				t.Errorf("fmt -check: exit %d (run bottlefile fmt on it)\n%s%s", code, out, errs)
			}
			if _, err := os.Stat(filepath.Join(dir, "README.md")); err != nil {
				t.Errorf("the example has no README.md: %v", err)
			}
			if link := "](examples/" + filepath.Base(dir) + ")"; !strings.Contains(string(top), link) {
				t.Errorf("the top-level README's examples do not link it (%s)", link)
			}
		})
	}
	if found == 0 {
		t.Fatal("no examples found")
	}
}
