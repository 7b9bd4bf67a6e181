package egress

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// The gateway's activity stamp (issue 31). Idle policies need to know when
// an agent last made a request through its gateway, and the decision log
// no longer says (allowed requests are aggregated, and reading a log to
// find its last line costs more than the answer is worth). So a gateway
// given -activity FILE keeps the time of its last proxy request as the
// modification time of FILE, which a driver reads with one stat of the
// file through the engine (docker: a HEAD of the container's archive, no
// body, no exec). The file itself stays empty, so the stamp costs one
// utimensat now and then, never a write to the log: a flood of requests
// adds nothing to what the gateway keeps.
//
// What counts as a request: every proxy request (a CONNECT, an
// absolute-form HTTP request), allowed or refused (an agent that asks for
// something is in use, whatever the answer), never a health check nor
// anything else the gateway answers 400. An exchange that stays open (a
// tunnel streaming a model's answer for an hour) counts as in use for as
// long as it is open: the stamp moves forward every ActivityRefresh while
// one is, and once more when the last ends.
//
// The stamp is written at once when the last one is ActivityCoalesce old
// or older, else at the end of that interval (a burst of requests costs
// one write per interval, and its last request is stamped within it). A
// gateway that has had no request since its container was made stamps
// the Unix epoch: "none", told apart from a gateway too old to stamp,
// whose file is missing.

// ActivityFileName is the name of the activity stamp beside the -state
// report, where the gateway keeps it when -activity is not given.
const ActivityFileName = "bottlefile-gateway-activity"

// Intervals of the activity stamp.
const (
	// ActivityCoalesce is the shortest time between two writes of the
	// stamp: how far behind the last request it can be.
	ActivityCoalesce = time.Second
	// ActivityRefresh is how often the stamp moves forward while an
	// exchange is open.
	ActivityRefresh = 10 * time.Second
)

// ActivityBeside is the activity stamp of a gateway whose -state report
// is statePath: ActivityFileName in the same directory.
func ActivityBeside(statePath string) string {
	return filepath.Join(filepath.Dir(statePath), ActivityFileName)
}

// NoActivity is the stamp of a gateway that has had no request.
var NoActivity = time.Unix(0, 0)

// activityStamp keeps the time of the last proxy request as the
// modification time of a file.
type activityStamp struct {
	path string
	now  func() time.Time

	mu      sync.Mutex // guards the fields below
	last    time.Time  // the last request, or the last end of an exchange
	open    int        // exchanges open now
	stamped time.Time  // when the stamp was last written
	timer   *time.Timer
	// err is the last write's error, kept for tests and logged once.
	err error
}

// newActivityStamp makes the stamp at path, creating the file (stamped
// NoActivity) when it does not exist. An existing one keeps its time: a
// gateway started again in the same container does not forget its
// agent's last request.
func newActivityStamp(path string, now func() time.Time) (*activityStamp, error) {
	if now == nil {
		now = time.Now
	}
	a := &activityStamp{path: path, now: now}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	switch {
	case errors.Is(err, fs.ErrExist):
		return a, nil
	case err != nil:
		return nil, err
	}
	if err := f.Close(); err != nil {
		return nil, err
	}
	if err := os.Chtimes(path, NoActivity, NoActivity); err != nil {
		return nil, err
	}
	return a, nil
}

// request records one proxy request. A nil stamp records nothing.
func (a *activityStamp) request() {
	if a == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.last = a.now()
	a.scheduleLocked()
}

// begin records an exchange opened; the func it returns records its end.
func (a *activityStamp) begin() (end func()) {
	if a == nil {
		return func() {}
	}
	a.mu.Lock()
	a.open++
	a.last = a.now()
	a.scheduleLocked()
	a.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			a.mu.Lock()
			defer a.mu.Unlock()
			a.open--
			a.last = a.now()
			a.scheduleLocked()
		})
	}
}

// scheduleLocked writes the stamp now when the last write is
// ActivityCoalesce old, else arms the timer for when it will be.
func (a *activityStamp) scheduleLocked() {
	if a.timer != nil {
		return // armed: the flush writes the latest
	}
	wait := ActivityCoalesce - a.now().Sub(a.stamped)
	if wait <= 0 {
		a.writeLocked()
		if a.open == 0 {
			return
		}
		wait = ActivityRefresh
	}
	a.timer = time.AfterFunc(wait, a.flush)
}

// flush writes the stamp the timer was armed for, and arms it again while
// an exchange is open.
func (a *activityStamp) flush() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.timer = nil
	if a.open > 0 {
		a.last = a.now()
	}
	if a.last.After(a.stamped) {
		a.writeLocked()
	}
	if a.open > 0 {
		a.timer = time.AfterFunc(ActivityRefresh, a.flush)
	}
}

func (a *activityStamp) writeLocked() {
	a.stamped = a.now()
	a.err = os.Chtimes(a.path, a.last, a.last)
}

// stop disarms the timer and writes what it would have.
func (a *activityStamp) stop() {
	if a == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.timer != nil {
		a.timer.Stop()
		a.timer = nil
	}
	if a.last.After(a.stamped) || a.open > 0 {
		if a.open > 0 {
			a.last = a.now()
		}
		a.writeLocked()
	}
}
