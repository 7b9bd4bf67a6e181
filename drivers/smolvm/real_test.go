package smolvm

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/drivertest"
)

// realImageEnv names the image the real-binary tests run; smolvm pulls it
// at start, so it must be reachable from the test host.
const realImageEnv = "BOTTLEFILE_SMOLVM_TEST_IMAGE"

// realSmolvm returns the real smolvm on PATH, or skips the test where it
// cannot run.
func realSmolvm(t *testing.T) (path, image string) {
	t.Helper()
	path, err := exec.LookPath("smolvm")
	_, kvmErr := os.Stat("/dev/kvm")
	if err != nil || kvmErr != nil {
		t.Skip("smolvm real-binary test skipped: no smolvm on PATH / no /dev/kvm")
	}
	// The fake is named smolvm too; never mistake it for the real one.
	if out, err := exec.Command(path, "--version").Output(); err != nil || len(out) == 0 {
		t.Skipf("smolvm real-binary test skipped: %s --version failed: %v", path, err)
	}
	image = os.Getenv(realImageEnv)
	if image == "" {
		image = "alpine:3"
	}
	return path, image
}

func realDriver(t *testing.T) drivers.Driver {
	t.Helper()
	return realDriverIn(t, "")
}

// realDriverIn configures the real smolvm with a state directory under
// dir ("" for none).
func realDriverIn(t *testing.T, dir string) *Driver {
	t.Helper()
	d := newDriver(testLogger(t), func(binary string) runner { return execRunner{binary: binary} })
	req := drivers.ConfigureRequest{Runtime: "vm"}
	if dir != "" {
		req.StateDir = filepath.Join(dir, ".bottlefile")
	}
	if err := d.Configure(context.Background(), req); err != nil {
		t.Fatalf("Configure: %v", err)
	}
	return d
}

// TestRealSmolvm runs the conformance suite and the scenario against a
// real smolvm, where one and /dev/kvm exist.
func TestRealSmolvm(t *testing.T) {
	bin, image := realSmolvm(t)
	t.Run("Conformance", func(t *testing.T) {
		drivertest.TestDriver(t, drivertest.Harness{
			NewDriver: func(t *testing.T) drivers.Driver { return realDriverIn(t, t.TempDir()) },
			Image:     image,
			StopOutside: func(t *testing.T, _ string, obj drivers.LiveObject) {
				if out, err := exec.Command(bin, "machine", "stop", "--name", obj.ID).CombinedOutput(); err != nil {
					t.Fatalf("smolvm machine stop --name %s: %v\n%s", obj.ID, err, out)
				}
			},
		})
	})
	t.Run("Scenario", func(t *testing.T) {
		runScenario(t, realDriver(t), image, func(name string) {
			if out, err := exec.Command(bin, "machine", "stop", "--name", name).CombinedOutput(); err != nil {
				t.Fatalf("smolvm machine stop --name %s: %v\n%s", name, err, out)
			}
		})
	})
	t.Run("Snapshot", func(t *testing.T) {
		dir := t.TempDir()
		runSnapshotScenario(t, realDriverIn(t, dir), dir, image, func(name string, args ...string) int {
			cmd := exec.Command(bin, append([]string{"machine", "exec", "--name", name, "--"}, args...)...)
			err := cmd.Run()
			var exitErr *exec.ExitError
			if errors.As(err, &exitErr) {
				return exitErr.ExitCode()
			}
			if err != nil {
				t.Fatalf("smolvm machine exec: %v", err)
			}
			return 0
		})
	})
	t.Run("Import", func(t *testing.T) {
		tarPath := os.Getenv(realTarEnv)
		if tarPath == "" {
			t.Skipf("smolvm real-binary import test skipped: set %s to a docker-save tar of an image whose \"sleep 600\" runs", realTarEnv)
		}
		f, err := os.Open(tarPath)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		dir := t.TempDir()
		runImportScenario(t, realDriverIn(t, dir), f)
	})
}

// realTarEnv names a docker-save tar for the real import test.
const realTarEnv = "BOTTLEFILE_SMOLVM_TEST_TAR"
