//go:build unix

package bench

import "syscall"

// cpuTime is the CPU time the process has used, user and system, in
// nanoseconds: unlike wall time, other processes on the machine barely
// change it.
func cpuTime() int64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
