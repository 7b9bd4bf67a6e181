//go:build unix

package state

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// preLock takes the lock bbolt will take (flock on the state file) so the
// file can be checked while no other bottlefile writes it, waiting up to
// timeout. The caller releases it before bbolt opens the file: flock locks
// belong to the open file, so bbolt's own would conflict with it.
func preLock(path string, exclusive bool, timeout time.Duration) (release func(), err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	how := syscall.LOCK_SH
	if exclusive {
		how = syscall.LOCK_EX
	}
	deadline := time.Now().Add(timeout)
	for {
		err := syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, err
		}
		if !time.Now().Before(deadline) {
			f.Close()
			return nil, errLockBusy
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// processGone reports whether the process a lock record names is gone
// from this host: no process has its pid, or (where /proc tells) the one
// that has it started at another time or the machine booted since, so the
// pid was given to a later process.
func processGone(pid int, startTicks uint64, bootID string) bool {
	if pid <= 0 {
		return false
	}
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	nowStart, nowBoot := processStart(pid)
	if bootID != "" && nowBoot != "" && bootID != nowBoot {
		return true
	}
	return startTicks != 0 && nowStart != 0 && startTicks != nowStart
}

// processStart is when pid started, in clock ticks since boot, and the
// boot's id, read from /proc: zero and "" where there is no /proc.
func processStart(pid int) (ticks uint64, bootID string) {
	if b, err := os.ReadFile("/proc/sys/kernel/random/boot_id"); err == nil {
		bootID = strings.TrimSpace(string(b))
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, bootID
	}
	return statStartTicks(string(b)), bootID
}

// statStartTicks is field 22 (starttime) of a /proc/PID/stat line. The
// second field, the command name in parentheses, may hold spaces and
// parentheses itself, so fields are counted from its last ')'.
func statStartTicks(stat string) uint64 {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(stat[i+1:])
	// f[0] is field 3 (state), so field 22 is f[19].
	if len(f) < 20 {
		return 0
	}
	n, _ := strconv.ParseUint(f[19], 10, 64)
	return n
}
