package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bottlefile/bottlefile/drivers/docker/dockertest"
)

// TestE2EDiskFull is issue 14's full disk: the state directory is a small
// tmpfs (mounted by the test, which needs root), so the state's writes run
// out of space during the first apply of three agents. For each size:
// every later command (plan, apply, state list, destroy) opens the state
// and ends with an error that says what is wrong, or works; none crashes
// (no panic, no SIGBUS). Once there is room again, apply converges, the
// plan after it is empty, and destroy leaves nothing of the lineage.
//
// About 30 s (two sizes, about ten runs of the binary each); it mounts,
// so it needs root, and unmounts what it mounted.
func TestE2EDiskFull(t *testing.T) {
	parallel(t)
	if os.Geteuid() != 0 {
		if os.Getenv("BOTTLEFILE_REQUIRE_DOCKER") != "" {
			t.Fatal("mounting a small tmpfs needs root")
		}
		t.Skip("mounting a small tmpfs needs root")
	}
	cli := dockertest.Client(t)
	img := dockertest.BusyboxImage(t, cli)
	// 24k fills during the first apply (its second state write fails "no
	// space left on device"); 48k is the control, where the apply fits.
	for _, size := range []string{"24k", "48k"} {
		t.Run(size, func(t *testing.T) {
			dir := t.TempDir()
			stateDir := filepath.Join(dir, ".bottlefile")
			if err := os.Mkdir(stateDir, 0o700); err != nil {
				t.Fatal(err)
			}
			if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size+",mode=0700", "tmpfs", stateDir).CombinedOutput(); err != nil {
				t.Fatalf("mount: %v: %s", err, out)
			}
			mounted := true
			t.Cleanup(func() {
				if mounted {
					exec.Command("umount", stateDir).Run()
				}
			})
			c := &crashRig{t: t, cli: cli, dir: dir, image: img}
			c.write(`["sleep", "3600"]`)

			first := bottlefile(t, dir, "apply", "-auto-approve")
			t.Logf("apply on a %s state disk: exit %d\n%s", size, first.code, tail(first.stdout+first.stderr, 6))
			crashed := func(what string, r result) {
				t.Helper()
				all := r.stdout + r.stderr
				if r.code == 2 || strings.Contains(all, "panic") || strings.Contains(all, "SIGBUS") || strings.Contains(all, "goroutine ") {
					t.Errorf("%s on a %s state disk crashed: %s", what, size, r)
				}
			}
			crashed("the first apply", first)
			if first.code != 0 && !strings.Contains(first.stdout+first.stderr, "no space left on device") {
				t.Errorf("the failed apply does not say the disk is full: %s", first)
			}
			for _, args := range [][]string{{"plan"}, {"state", "list"}, {"apply", "-auto-approve"}} {
				r := bottlefile(t, dir, args...)
				crashed(strings.Join(args, " "), r)
				if r.code != 0 && strings.TrimSpace(r.stderr) == "" {
					t.Errorf("%s failed without saying why: %s", strings.Join(args, " "), r)
				}
			}

			// Room again: the state takes what was done, and converges.
			if out, err := exec.Command("mount", "-o", "remount,size=16m", stateDir).CombinedOutput(); err != nil {
				t.Fatalf("remount: %v: %s", err, out)
			}
			r := bottlefile(t, dir, "apply", "-auto-approve")
			if r.code != 0 {
				// A state the full disk left unreadable is restored from
				// its backup, as the error says.
				if !strings.Contains(r.stderr, "restore-backup") {
					t.Fatalf("apply with room again: %s", r)
				}
				mustRun(t, dir, "state", "restore-backup", "-auto-approve")
				r = mustRun(t, dir, "apply", "-auto-approve")
			}
			c.settle()
			c.recover(fmt.Sprintf("after the %s disk filled", size), false)
			c.destroyAll()
			if out, err := exec.Command("umount", stateDir).CombinedOutput(); err != nil {
				t.Errorf("umount: %v: %s", err, out)
			} else {
				mounted = false
			}
		})
	}
}
