package nsfixture

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// fakeTB records what Once.Start does to a test: a skip or a failure ends
// the calling goroutine, as testing's do.
type fakeTB struct {
	testing.TB
	logs            []string
	skipped, failed string
}

func (f *fakeTB) Helper()                      {}
func (f *fakeTB) Logf(format string, a ...any) { f.logs = append(f.logs, fmt.Sprintf(format, a...)) }
func (f *fakeTB) Skipf(format string, a ...any) {
	f.skipped = fmt.Sprintf(format, a...)
	runtime.Goexit()
}
func (f *fakeTB) Fatalf(format string, a ...any) {
	f.failed = fmt.Sprintf(format, a...)
	runtime.Goexit()
}

// start calls o.Start with a fakeTB, on a goroutine of its own.
func start[T any](o *Once[T]) (*fakeTB, T) {
	tb := &fakeTB{}
	var got T
	done := make(chan struct{})
	go func() {
		defer close(done)
		got = o.Start(tb)
	}()
	<-done
	return tb, got
}

// TestOnceRequireEnv: a fixture that cannot start skips the test, or
// fails it when the require variable is 1, and is tried only once.
func TestOnceRequireEnv(t *testing.T) {
	const env = "NSFIXTURE_TEST_REQUIRE"
	for _, tc := range []struct {
		value      string
		skip, fail bool
	}{{"", true, false}, {"0", true, false}, {"1", false, true}} {
		t.Run("env="+tc.value, func(t *testing.T) {
			t.Setenv(env, tc.value)
			ups := 0
			o := &Once[int]{Name: "x", What: "the test thing", RequireEnv: env,
				Up:   func() (int, error) { ups++; return 0, errors.New("no thing here") },
				Down: func(int) error { t.Error("Down called for a fixture that never started"); return nil }}
			for range 2 {
				tb, _ := start(o)
				if (tb.skipped != "") != tc.skip || (tb.failed != "") != tc.fail {
					t.Fatalf("skipped %q, failed %q; want skip %v, fail %v", tb.skipped, tb.failed, tc.skip, tc.fail)
				}
				msg := tb.skipped + tb.failed
				if !strings.Contains(msg, "cannot start the test thing: no thing here") || !strings.Contains(msg, env+"=1") {
					t.Errorf("message %q does not say what failed and which variable decides", msg)
				}
			}
			if ups != 1 {
				t.Errorf("Up called %d times, want 1", ups)
			}
			o.Stop()
		})
	}
}

// TestOnceStartsOnceAndStops: the first Start starts and logs, later ones
// return the same fixture, Stop tears it down once.
func TestOnceStartsOnceAndStops(t *testing.T) {
	ups, downs := 0, 0
	o := &Once[int]{Name: "x", What: "the test thing", RequireEnv: "NSFIXTURE_TEST_REQUIRE",
		Up:      func() (int, error) { ups++; return 42, nil },
		Started: func(v int) string { return "up: " + strconv.Itoa(v) },
		Down:    func(v int) error { downs++; return nil }}
	tb, v := start(o)
	if v != 42 || tb.skipped != "" || tb.failed != "" || !slices.Equal(tb.logs, []string{"up: 42"}) {
		t.Fatalf("first Start = %d, logs %q, skipped %q, failed %q", v, tb.logs, tb.skipped, tb.failed)
	}
	tb, v = start(o)
	if v != 42 || len(tb.logs) != 0 || ups != 1 {
		t.Errorf("second Start = %d, logs %q, Up called %d times; want 42, no log, 1", v, tb.logs, ups)
	}
	if c, ok := o.Current(); !ok || c != 42 {
		t.Errorf("Current() = %d, %v; want 42, true", c, ok)
	}
	o.Stop()
	o.Stop()
	if _, ok := o.Current(); ok || downs != 1 {
		t.Errorf("after Stop twice: running %v, Down called %d times; want false, 1", ok, downs)
	}
}

// TestRemoveStale: a fixture whose owner is gone is torn down, without
// the processes its pid files name unless they are its unshares; one
// whose owner lives (or is still writing its owner file) is kept; an id
// that only more names is torn down too.
func TestRemoveStale(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	k := Kind{Name: "nsfixture-test", Dir: "fixtures", Cgroup: "bottlefile-nsfixture-test-"}
	mk := func(id, owner string) string {
		dir := filepath.Join(k.BaseDir(), id)
		if err := os.MkdirAll(filepath.Join(dir, "data"), 0o755); err != nil {
			t.Fatal(err)
		}
		if owner != "-" {
			if err := os.WriteFile(filepath.Join(dir, "owner"), []byte(owner), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	st1, err := StartTime(1)
	if err != nil {
		t.Fatal(err)
	}
	// 999999999 is above any pid_max: its owner is gone.
	dead := mk("999999999", "12345")
	if err := os.WriteFile(filepath.Join(dead, "node1.pid"), []byte("1"), 0o644); err != nil { // pid 1: not ours
		t.Fatal(err)
	}
	live := mk("1", st1)                              // pid 1 lives and started at st1: its owner
	starting := mk(strconv.Itoa(os.Getpid()), "-")    // its owner lives and has not written the file yet
	reused := mk(strconv.Itoa(os.Getppid()), "12345") // this pid lives, but is not the owner that wrote it

	var torn []string
	k.RemoveStale([]string{"999999998", "not-a-pid"}, func(id, dir string, procs []*Proc) error {
		torn = append(torn, id)
		if len(procs) != 0 {
			t.Errorf("fixture %s: teardown given %d processes, want none (pid 1 is not its unshare)", id, len(procs))
		}
		return k.Teardown(id, dir, nil) // never a process: a bug here must not kill pid 1

	})
	slices.Sort(torn)
	want := []string{strconv.Itoa(os.Getppid()), "999999998", "999999999"}
	slices.Sort(want)
	if !slices.Equal(torn, want) {
		t.Errorf("torn down %q, want %q", torn, want)
	}
	for _, d := range []string{dead, reused} {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("%s is still there (err %v)", d, err)
		}
	}
	for _, d := range []string{live, starting} {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("the fixture of a live owner was removed: %v", err)
		}
	}
}

// TestSpawnTeardown: a spawned unshare is the fixture's (IsOurs, by its
// pid file), not another directory's, and Teardown kills it by PID and
// removes the directory.
func TestSpawnTeardown(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for a PID namespace")
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("no unshare")
	}
	t.Setenv("TMPDIR", t.TempDir())
	k := Kind{Name: "nsfixture-test", Dir: "fixtures", Cgroup: "bottlefile-nsfixture-test-"}
	id, dir, err := k.Claim()
	if err != nil {
		t.Fatal(err)
	}
	p, err := Spawn(dir, "holder", nil, "--pid", "--fork", "--kill-child", "--mount-proc", "sh", "-c", "read -r _; exec sleep 600", "holder")
	if p != nil {
		t.Cleanup(func() { k.Teardown(id, dir, []*Proc{p}) })
	}
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "holder.pid"))
	if err != nil || strings.TrimSpace(string(data)) != strconv.Itoa(p.PID) {
		t.Errorf("holder.pid = %q, %v; want %d", data, err, p.PID)
	}
	if !IsOurs(p.PID, dir) {
		t.Errorf("IsOurs(%d, %s) = false for the fixture's own unshare", p.PID, dir)
	}
	if IsOurs(p.PID, dir+"x") || IsOurs(os.Getpid(), dir) {
		t.Error("IsOurs says yes for another directory or another process")
	}
	if err := k.Teardown(id, dir, []*Proc{p}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Done:
	default:
		t.Error("Teardown returned before the unshare exited")
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("%s is still there after Teardown (err %v)", dir, err)
	}
}
