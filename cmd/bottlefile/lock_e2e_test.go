package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bottlefile/bottlefile/drivers/docker/dockertest"
	"github.com/bottlefile/bottlefile/state"
)

// lockBottlefile is an agent whose credential comes from a sensitive
// variable, so an apply makes the bottle's CA in the state directory.
const lockBottlefile = `
variable "team_api_key" {
  type      = string
  sensitive = true
}

agent "coder" {
  image   = %q
  command = ["sleep", "600"]
  egress {
    allow = ["api.lock.test:443"]
    credential "team" {
      host   = "api.lock.test:443"
      header = "authorization"
      prefix = "Bearer "
      value  = var.team_api_key
      env    = "TEAM_API_KEY"
    }
  }
}
`

// heldApply is an apply waiting at its approval prompt, holding the
// state's write lock.
type heldApply struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	mu    sync.Mutex // guards out
	out   bytes.Buffer
	errb  bytes.Buffer
	done  chan error
}

func (h *heldApply) Write(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.out.Write(p)
}

func (h *heldApply) stdout() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.out.String()
}

// startHeldApply starts apply with args and waits for its prompt.
func startHeldApply(t *testing.T, dir string, args ...string) *heldApply {
	t.Helper()
	return startHeldApplyEnv(t, dir, nil, args...)
}

// startHeldApplyEnv is startHeldApply with more environment variables.
func startHeldApplyEnv(t *testing.T, dir string, env []string, args ...string) *heldApply {
	t.Helper()
	h := &heldApply{done: make(chan error, 1)}
	h.cmd = exec.Command(binary, append([]string{"-chdir=" + dir, "apply"}, args...)...)
	h.cmd.Env = append(append(os.Environ(), "NO_COLOR=1"), env...)
	h.cmd.Stdout, h.cmd.Stderr = h, &h.errb
	var err error
	if h.stdin, err = h.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := h.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { h.done <- h.cmd.Wait() }()
	t.Cleanup(func() { h.cmd.Process.Kill() })
	deadline := time.Now().Add(2 * time.Minute)
	for !strings.Contains(h.stdout(), "Enter a value:") {
		select {
		case err := <-h.done:
			t.Fatalf("apply ended (%v) before asking for approval:\n%s\n%s", err, h.stdout(), h.errb.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("apply did not ask for approval:\n%s", h.stdout())
		}
	}
	return h
}

// checkStateDir reads every file under dir's .bottlefile: none holds
// secret, every directory is 0700 and every file 0600.
func checkStateDir(t *testing.T, dir, secret, when string) (files []string) {
	t.Helper()
	root := filepath.Join(dir, state.Dir)
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		want := fs.FileMode(0o600)
		if d.IsDir() {
			want = 0o700
		} else {
			files = append(files, rel)
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			if bytes.Contains(data, []byte(secret)) {
				t.Errorf("%s: .bottlefile/%s holds the -var value", when, rel)
			}
		}
		if info.Mode().Perm() != want {
			t.Errorf("%s: .bottlefile/%s has mode %v, want %v", when, rel, info.Mode().Perm(), want)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("%s: %v", when, err)
	}
	return files
}

// TestE2ELockHidesVarValues (issue 25): an apply given a sensitive value
// with -var holds the lock (waiting at its prompt) while a second process
// plans. The value is in no file under .bottlefile and in nothing the
// second process prints, which names the holder by its command with the
// value hidden; the state directory is private (0700/0600) through a real
// apply that makes the bottle's CA and saves a replaced workload's log; an
// apply killed at its prompt leaves a record that the next command
// recognises as gone and removes.
func TestE2ELockHidesVarValues(t *testing.T) {
	parallel(t)
	cli := dockertest.Client(t)
	image := dockertest.BusyboxImage(t, cli)
	dir := t.TempDir()
	writeBottlefile(t, dir, lockBottlefile, image)
	secret := "lock-e2e-value-" + randomHex(12)
	varArg := "team_api_key=" + secret
	envVar := []string{"BOTTLEFILE_VAR_team_api_key=" + secret}

	held := startHeldApply(t, dir, "-var", varArg)
	checkStateDir(t, dir, secret, "apply held")
	for _, args := range [][]string{{"plan"}, {"plan", "-var=" + varArg}, {"apply", "-auto-approve"}, {"status"}} {
		r, _, err := runBinary(time.Minute, dir, envVar, args...)
		if err != nil {
			t.Fatal(err)
		}
		if r.code == 0 {
			t.Fatalf("%v ran while the apply held the lock: %s", args, r)
		}
		// The diagnostic is wrapped to the terminal's width.
		out := strings.Join(strings.Fields(r.stdout+r.stderr), " ")
		if strings.Contains(out, secret) {
			t.Errorf("%v printed the holder's -var value:\n%s", args, out)
		}
		want := fmt.Sprintf("pid %d on host", held.cmd.Process.Pid)
		if !strings.Contains(out, "state is locked") || !strings.Contains(out, want) || !strings.Contains(out, "apply -var team_api_key=(value hidden)") {
			t.Errorf("%v: the lock error does not name the holder (%q) by its command without the value:\n%s", args, want, out)
		}
	}
	if !strings.Contains(held.stdout(), "Plan: ") {
		t.Fatalf("the held apply shows no plan:\n%s", held.stdout())
	}
	io.WriteString(held.stdin, "yes\n")
	select {
	case err := <-held.done:
		if err != nil {
			t.Fatalf("apply: %v\n%s\n%s", err, held.stdout(), held.errb.String())
		}
	case <-time.After(3 * time.Minute):
		t.Fatalf("apply did not finish:\n%s", held.stdout())
	}
	lineageOf(t, cli, dir)
	if strings.Contains(held.stdout()+held.errb.String(), secret) {
		t.Errorf("the apply printed its own -var value")
	}

	// Killed at its prompt: its record stays behind, and is no holder.
	killed := startHeldApply(t, dir, "-replace=agent.coder", "-var", varArg)
	killed.cmd.Process.Kill()
	<-killed.done
	holders := state.LockHolders(state.Path(dir))
	if len(holders) != 1 || !holders[0].Stale || holders[0].PID != killed.cmd.Process.Pid {
		t.Fatalf("want the killed apply's record, seen as gone: %+v", holders)
	}
	r, _, err := runBinary(time.Minute, dir, envVar, "plan")
	if err != nil || r.code != 0 {
		t.Fatalf("plan after the killed apply: %v %s", err, r)
	}
	if holders := state.LockHolders(state.Path(dir)); len(holders) != 0 {
		t.Errorf("the killed apply's record was not replaced: %+v", holders)
	}

	// A replace saves the old workload's log; everything stays private.
	r, _, err = runBinary(3*time.Minute, dir, envVar, "apply", "-auto-approve", "-replace=agent.coder")
	if err != nil || r.code != 0 {
		t.Fatalf("apply -replace: %v %s", err, r)
	}
	files := checkStateDir(t, dir, secret, "after apply")
	for _, want := range []string{state.File, state.File + state.BackupSuffix, "credentials/", "logs/agent.coder/"} {
		found := false
		for _, f := range files {
			found = found || strings.HasPrefix(f, want)
		}
		if !found {
			t.Errorf("no %s under .bottlefile after apply (the check would prove less): %v", want, files)
		}
	}
	if _, err := os.Stat(state.Path(dir) + ".lock.info"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a lock record outlived the apply: %v", err)
	}
	t.Logf("files under .bottlefile: %v", files)
}
