package gateway

import (
	"os"
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
