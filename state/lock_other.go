//go:build !unix

package state

import "time"

// preLock is a no-op where flock is not available: the file is checked
// without the lock, and bbolt's own lock still guards every write.
func preLock(path string, exclusive bool, timeout time.Duration) (release func(), err error) {
	return func() {}, nil
}

// processGone cannot tell here.
func processGone(pid int, startTicks uint64, bootID string) bool { return false }

// processStart is unknown here.
func processStart(pid int) (uint64, string) { return 0, "" }
