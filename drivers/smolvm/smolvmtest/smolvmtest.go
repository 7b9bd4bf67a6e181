// Package smolvmtest holds helpers for tests that run the fake smolvm
// (drivers/smolvm/fakesmolvm): building it once per test process and
// reading the command lines it recorded.
package smolvmtest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// fakePackage is what Binary builds.
const fakePackage = "github.com/bottlefile/bottlefile/drivers/smolvm/fakesmolvm"

var build struct {
	once sync.Once
	dir  string
	bin  string
	err  error
}

// goBinary is the go command, found before any test changes PATH.
var goBinary = func() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return "go"
}()

// Binary builds the fake as a program named smolvm, once per test process,
// and returns its path. Its directory holds nothing else, so it can go
// first on PATH. A TestMain calls Cleanup when the tests are done.
func Binary(t testing.TB) string {
	t.Helper()
	build.once.Do(func() {
		dir, err := os.MkdirTemp("", "fakesmolvm-")
		if err != nil {
			build.err = err
			return
		}
		build.dir = dir
		bin := filepath.Join(dir, "smolvm")
		cmd := exec.Command(goBinary, "build", "-o", bin, fakePackage)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			build.err = fmt.Errorf("go build %s: %v\n%s", fakePackage, err, out)
			return
		}
		build.bin = bin
	})
	if build.err != nil {
		t.Fatalf("building the fake smolvm: %v", build.err)
	}
	return build.bin
}

// Cleanup removes what Binary built.
func Cleanup() {
	if build.dir != "" {
		os.RemoveAll(build.dir)
	}
}

// callsFile is where the fake appends {"args":[...]} per invocation, in
// its state directory (FAKESMOLVM_STATE).
const callsFile = "calls.jsonl"

// Calls returns the argument lists the fake with this state directory
// recorded, in order.
func Calls(t testing.TB, stateDir string) [][]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(stateDir, callsFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out [][]string
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var c struct {
			Args []string `json:"args"`
		}
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatalf("%s: %v", callsFile, err)
		}
		out = append(out, c.Args)
	}
	return out
}

// ResetCalls forgets the recorded calls.
func ResetCalls(t testing.TB, stateDir string) {
	t.Helper()
	if err := os.Remove(filepath.Join(stateDir, callsFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
}
