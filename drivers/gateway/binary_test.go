package gateway

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestBinaryCheck(t *testing.T) {
	if _, err := (Binary{Path: "/bin/busybox"}).Check(); err != nil {
		t.Errorf("the static busybox: %v", err)
	}
	if _, err := os.Stat("/bin/sh"); err == nil {
		if real, _ := filepath.EvalSymlinks("/bin/sh"); real != "/bin/busybox" {
			if _, err := (Binary{Path: "/bin/sh"}).Check(); err == nil || !strings.Contains(err.Error(), "CGO_ENABLED=0, as make build does") {
				t.Errorf("a dynamic binary: err = %v", err)
			}
		}
	}
	script := filepath.Join(t.TempDir(), "bottlefile")
	os.WriteFile(script, []byte("#!/bin/sh\n"), 0o755)
	if _, err := (Binary{Path: script}).Check(); err == nil || !strings.Contains(err.Error(), "not a Linux executable") {
		t.Errorf("a script: err = %v", err)
	}
}

// TestBinaryVersion: plans show the gateway binary as a short version and
// the start of its hash, never the 64-digit SHA-256; a file that is no Go
// binary still gets a version string.
func TestBinaryVersion(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin, err := ReadBinary(exe)
	if err != nil {
		t.Fatal(err)
	}
	sum := bin.Sum
	v := bin.Version()
	if strings.Contains(v, sum) || !strings.HasSuffix(v, " ("+sum[:12]+")") || strings.HasPrefix(v, "unknown") {
		t.Errorf("Version = %q, want the binary's version and %s", v, sum[:12])
	}
	other := filepath.Join(t.TempDir(), "not-go")
	if err := os.WriteFile(other, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got := binaryVersion(other); got != "unknown version" {
		t.Errorf("binaryVersion of a script = %q", got)
	}
}

// TestGatewayOf: the gateway alone beside bottlefile is used only when
// both come from one build; otherwise (missing, not a Go binary, another
// checkout's build) the gateways run bottlefile itself.
func TestGatewayOf(t *testing.T) {
	build := func(t *testing.T, out string, flags ...string) {
		t.Helper()
		args := append([]string{"build", "-o", out}, flags...)
		cmd := exec.Command("go", append(args, "github.com/bottlefile/bottlefile/cmd/bottlefile-gateway")...)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build: %v\n%s", err, out)
		}
	}
	built := t.TempDir()
	stamped, unstamped := filepath.Join(built, "stamped"), filepath.Join(built, "unstamped")
	build(t, stamped, "-buildvcs=true") // over a GOFLAGS=-buildvcs=false
	build(t, unstamped, "-buildvcs=false")
	if sameBuild(stamped, unstamped) {
		t.Fatal("a build with version control information and one without read as the same build")
	}
	copyTo := func(t *testing.T, from, to string) {
		t.Helper()
		data, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(to, data, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name      string
		companion string // what is beside bottlefile: a built binary, "script", or ""
		want      string // "companion" or "exe"
	}{
		{"same build", stamped, "companion"},
		{"none beside it", "", "exe"},
		{"not a Go binary", "script", "exe"},
		{"another checkout's build", unstamped, "exe"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			exe := filepath.Join(dir, "bottlefile")
			copyTo(t, stamped, exe)
			companion := filepath.Join(dir, CompanionName)
			switch tc.companion {
			case "":
			case "script":
				os.WriteFile(companion, []byte("#!/bin/sh\n"), 0o755)
			default:
				copyTo(t, tc.companion, companion)
			}
			want := exe
			if tc.want == "companion" {
				want = companion
			}
			if got := gatewayOf(exe); got != want {
				t.Errorf("gatewayOf = %s, want %s", got, want)
			}
		})
	}
}
