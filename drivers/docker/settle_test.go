package docker

import "testing"

// TestExitFromStatus: the list's status gives the exit code, and the rule
// for "stopped by someone" (SIGTERM or SIGKILL) without an inspect.
func TestExitFromStatus(t *testing.T) {
	for _, tc := range []struct {
		status  string
		code    int
		stopped bool
		none    bool
	}{
		{status: "Exited (127) 3 seconds ago", code: 127},
		{status: "Exited (0) About a minute ago", code: 0},
		{status: "Exited (137) 5 minutes ago", code: 137, stopped: true},
		{status: "Exited (143) 2 hours ago", code: 143, stopped: true},
		{status: "Exited (3) Less than a second ago", code: 3},
		{status: "Up 5 minutes", none: true},
		{status: "Created", none: true},
		{status: "", none: true},
	} {
		e := exitFromStatus(tc.status)
		if tc.none {
			if e != nil {
				t.Errorf("%q: got %+v, want none", tc.status, e)
			}
			continue
		}
		if e == nil || e.Code != tc.code || e.Stopped != tc.stopped {
			t.Errorf("%q: got %+v, want code %d stopped %t", tc.status, e, tc.code, tc.stopped)
		}
	}
}
