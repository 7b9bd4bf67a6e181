package egress

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// stampClock is a clock a test moves.
type stampClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *stampClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *stampClock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

func mtime(t *testing.T, path string) time.Time {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.ModTime()
}

// TestActivityStamp: a new stamp says "no request"; a request is stamped
// at once when the last write is old enough, else held for the end of
// the interval (stop writes it); an open exchange is stamped as in use
// until it ends; an existing stamp keeps its time when the gateway starts
// again.
func TestActivityStamp(t *testing.T) {
	path := filepath.Join(t.TempDir(), ActivityFileName)
	t0 := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	clock := &stampClock{t: t0}
	a, err := newActivityStamp(path, clock.now)
	if err != nil {
		t.Fatal(err)
	}
	if got := mtime(t, path); !got.Equal(NoActivity) {
		t.Fatalf("a new stamp says %v, want the epoch (no request)", got)
	}

	clock.set(t0.Add(time.Minute))
	a.request()
	if got := mtime(t, path); !got.Equal(t0.Add(time.Minute)) {
		t.Fatalf("after the first request the stamp says %v, want %v", got, t0.Add(time.Minute))
	}
	// A second request within ActivityCoalesce waits for the timer; stop
	// writes it.
	clock.set(t0.Add(time.Minute + ActivityCoalesce/2))
	a.request()
	a.stop()
	if got, want := mtime(t, path), t0.Add(time.Minute+ActivityCoalesce/2); !got.Equal(want) {
		t.Fatalf("after a second request the stamp says %v, want %v", got, want)
	}

	// An exchange open at stop is in use then; its end is stamped.
	clock.set(t0.Add(2 * time.Minute))
	end := a.begin()
	clock.set(t0.Add(time.Hour))
	a.stop()
	if got := mtime(t, path); !got.Equal(t0.Add(time.Hour)) {
		t.Fatalf("with an exchange open the stamp says %v, want %v", got, t0.Add(time.Hour))
	}
	clock.set(t0.Add(time.Hour + time.Minute))
	end()
	end() // twice is once
	a.stop()
	if got := mtime(t, path); !got.Equal(t0.Add(time.Hour + time.Minute)) {
		t.Fatalf("after the exchange ended the stamp says %v, want %v", got, t0.Add(time.Hour+time.Minute))
	}
	if a.open != 0 {
		t.Fatalf("%d exchanges open after the only one ended", a.open)
	}

	again, err := newActivityStamp(path, clock.now)
	if err != nil {
		t.Fatal(err)
	}
	again.stop()
	if got := mtime(t, path); !got.Equal(t0.Add(time.Hour + time.Minute)) {
		t.Fatalf("a gateway started again reset the stamp to %v", got)
	}

	var none *activityStamp // no -activity: nothing recorded, no panic
	none.request()
	none.begin()()
	none.stop()

	if _, err := newActivityStamp(filepath.Join(t.TempDir(), "missing", "dir", ActivityFileName), nil); err == nil {
		t.Error("a stamp in a directory that does not exist: no error")
	}
}

// TestGatewayActivity: proxy requests move the stamp, refused ones too;
// a health check and a request that is no proxy request do not; a tunnel
// is in use until it closes.
func TestGatewayActivity(t *testing.T) {
	path := filepath.Join(t.TempDir(), ActivityFileName)
	t0 := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	clock := &stampClock{t: t0}
	stamp, err := newActivityStamp(path, clock.now)
	if err != nil {
		t.Fatal(err)
	}
	_, port := echoServer(t)
	g := &Gateway{Agent: "agent.coder", loopbackByRule: true, activity: stamp}
	tg := startGateway(t, g, newResolver(), fmt.Sprintf("127.0.0.1:%d", port))

	clock.set(t0.Add(time.Minute))
	if resp, _ := tg.raw(t, "GET "+healthPath+" HTTP/1.1\r\nHost: gateway\r\nConnection: close\r\n\r\n"); resp.StatusCode != 200 {
		t.Fatalf("health: %d", resp.StatusCode)
	}
	if resp, _ := tg.raw(t, "GET / HTTP/1.1\r\nHost: gateway\r\nConnection: close\r\n\r\n"); resp.StatusCode != 400 {
		t.Fatalf("origin-form: %d", resp.StatusCode)
	}
	if got := mtime(t, path); !got.Equal(NoActivity) {
		t.Fatalf("a health check or a bad request moved the stamp to %v", got)
	}

	clock.set(t0.Add(2 * time.Minute))
	if _, _, resp, _ := tg.connect(t, "refused.test:443"); resp.StatusCode != 403 {
		t.Fatalf("CONNECT refused.test: %d", resp.StatusCode)
	}
	if got := mtime(t, path); !got.Equal(t0.Add(2 * time.Minute)) {
		t.Fatalf("a refused request stamped %v, want %v", got, t0.Add(2*time.Minute))
	}

	clock.set(t0.Add(3 * time.Minute))
	c, br, resp, _ := tg.connect(t, fmt.Sprintf("127.0.0.1:%d", port))
	if resp.StatusCode != 200 {
		t.Fatalf("CONNECT the echo server: %d", resp.StatusCode)
	}
	fmt.Fprintf(c, "ping\n")
	if line, err := br.ReadString('\n'); err != nil || line != "ping\n" {
		t.Fatalf("through the tunnel: %q, %v", line, err)
	}
	clock.set(t0.Add(time.Hour)) // the tunnel is still open
	tg.stop()                    // closes it; Serve's end writes what is pending
	if got := mtime(t, path); got.Before(t0.Add(time.Hour)) {
		t.Fatalf("a tunnel open for an hour left the stamp at %v", got)
	}
}

// TestMainActivity: with -state, the gateway keeps its activity stamp
// beside the report, made at start saying "no request", moved by a
// proxy request.
func TestMainActivity(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "loaded.json")
	rules := filepath.Join(dir, "rules.json")
	writeRules(t, rules, "agent.coder")
	stderr := newLineLog()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		done <- Main(ctx, []string{"-listen", "127.0.0.1:0", "-rules", rules, "-state", state, "-poll", "1h"}, newLineLog(), stderr)
	}()
	defer func() { cancel(); <-done }()
	line := stderr.waitFor(t, `"event":"listening"`)
	addr := between(line, `"address":"`, `"`)
	path := ActivityBeside(state)
	if path != filepath.Join(dir, ActivityFileName) {
		t.Fatalf("ActivityBeside(%q) = %q", state, path)
	}
	if got := mtime(t, path); !got.Equal(NoActivity) {
		t.Fatalf("a new gateway's stamp says %v, want the epoch", got)
	}
	before := time.Now().Add(-time.Second) // file times may be coarser than the clock
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "CONNECT nowhere.test:443 HTTP/1.1\r\nHost: nowhere.test:443\r\n\r\n")
	buf := make([]byte, 64)
	if _, err := c.Read(buf); err != nil || !strings.Contains(string(buf), " 403 ") {
		t.Fatalf("CONNECT: %q, %v", buf, err)
	}
	if got := mtime(t, path); got.Before(before) {
		t.Fatalf("after a request the stamp says %v, want %v or later", got, before)
	}
}

func between(s, from, to string) string {
	_, rest, _ := strings.Cut(s, from)
	v, _, _ := strings.Cut(rest, to)
	return v
}
