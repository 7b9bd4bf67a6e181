//go:build unix

package state

import (
	"errors"
	"os"
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

// processGone reports whether pid names no process on this host.
func processGone(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return errors.Is(err, syscall.ESRCH)
}
