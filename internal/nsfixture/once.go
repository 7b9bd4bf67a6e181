package nsfixture

import (
	"fmt"
	"os"
	"sync"
	"testing"
)

// Once is the one fixture of a test process: started by the first test
// that asks, stopped when the package's tests end.
type Once[T any] struct {
	Name       string            // for messages: "swarmtest"
	What       string            // what cannot start: "the test swarm"
	RequireEnv string            // "1" turns a fixture that cannot start from a skip into a failure, for CI
	Up         func() (T, error) // starts the fixture
	Started    func(T) string    // logged by the test that started it
	Down       func(T) error     // tears it down

	mu      sync.Mutex // guards the four below
	current T
	running bool
	err     error
	tried   bool
}

// Main runs the package's tests and then stops the fixture if one was
// started: call it from TestMain.
func (o *Once[T]) Main(m *testing.M) int {
	code := m.Run()
	o.Stop()
	return code
}

// Start returns the fixture, starting it the first time. When it cannot
// start, the test is skipped, or fails when RequireEnv is "1"; later
// calls report the same error without trying again.
func (o *Once[T]) Start(t testing.TB) T {
	t.Helper()
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.tried {
		o.tried = true
		o.current, o.err = o.Up()
		o.running = o.err == nil
		if o.running {
			t.Logf("%s", o.Started(o.current))
		}
	}
	if o.err != nil {
		if os.Getenv(o.RequireEnv) == "1" {
			t.Fatalf("cannot start %s: %v (%s=1 requires it)", o.What, o.err, o.RequireEnv)
		}
		t.Skipf("cannot start %s: %v (set %s=1 to fail instead of skipping)", o.What, o.err, o.RequireEnv)
	}
	return o.current
}

// Current is the running fixture, if one runs.
func (o *Once[T]) Current() (T, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.current, o.running
}

// Stop tears the fixture down, if one runs.
func (o *Once[T]) Stop() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.running {
		if err := o.Down(o.current); err != nil {
			fmt.Fprintf(os.Stderr, "%s: teardown: %v\n", o.Name, err)
		}
		var zero T
		o.current, o.running = zero, false
	}
}
