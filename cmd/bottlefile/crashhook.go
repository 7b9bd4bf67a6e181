package main

import (
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/bottlefile/bottlefile/drivers"
)

// CrashAfterEnv names a TEST-ONLY hook: with BOTTLEFILE_TEST_CRASH_AFTER=N
// set, the process kills itself with SIGKILL as soon as the N-th successful
// driver Apply call of the process returns. The object that call made or
// removed is then changed on the runtime but not yet recorded in the state:
// the worst window a crash can hit. The crash tests (crash_test.go) use it
// to kill an apply at chosen points. It is not a feature; never set it
// outside tests.
const CrashAfterEnv = "BOTTLEFILE_TEST_CRASH_AFTER"

// crashHook wraps every driver of the registry with the test-only crash
// hook when CrashAfterEnv holds a positive number, and returns reg as it is
// otherwise.
func crashHook(reg drivers.Registry) drivers.Registry {
	n, err := strconv.ParseInt(os.Getenv(CrashAfterEnv), 10, 64)
	if err != nil || n <= 0 {
		return reg
	}
	applies := new(atomic.Int64) // successful Apply calls, across all drivers
	out := make(drivers.Registry, len(reg))
	for name, factory := range reg {
		out[name] = func(log hclog.Logger) (drivers.Driver, error) {
			d, err := factory(log)
			if err != nil {
				return nil, err
			}
			return crashingDriver(d, n, applies), nil
		}
	}
	return out
}

// crashingDriver kills the process after the after-th successful Apply.
// It is a drivers.Wrapper, so the driver keeps its declaration and every
// optional interface (logs, snapshot export and import, written bytes):
// the crash tests run the planner's and executor's production paths.
func crashingDriver(d drivers.Driver, after int64, applies *atomic.Int64) drivers.Driver {
	return &drivers.Wrapper{Inner: d, AfterApply: func(_ drivers.ApplyRequest, _ drivers.ApplyResponse, err error) {
		if err == nil && applies.Add(1) == after {
			p, _ := os.FindProcess(os.Getpid())
			_ = p.Kill() // SIGKILL: no deferred function, no state write runs
			for {        // never return to the executor while the signal lands
				time.Sleep(time.Hour)
			}
		}
	}}
}
