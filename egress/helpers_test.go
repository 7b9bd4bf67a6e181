package egress

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestMain fails the run if any test left a gateway, tunnel or watcher
// goroutine behind.
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if leaks := waitNoLeaks(); leaks != "" {
			fmt.Fprintf(os.Stderr, "leaked goroutines:\n%s\n", leaks)
			code = 1
		}
	}
	os.Exit(code)
}

// leakMarkers are frames of goroutines that must not outlive their test.
var leakMarkers = []string{
	"bottlefile/egress.(*Gateway)",
	"bottlefile/egress.splice",
	"bottlefile/egress.(*idleConn)",
	"bottlefile/egress.watchRulesFile",
	"bottlefile/egress.Main",
	"net/http.(*persistConn)",
}

// waitNoLeaks waits until no goroutine runs egress code, and returns the stacks
// of those that still do after a generous while ("" when none). Goroutines
// that were told to stop need a moment to unwind; this only bounds the wait.
func waitNoLeaks() string {
	var leaks []string
	for range 1000 {
		leaks = leaks[:0]
		buf := make([]byte, 4<<20)
		buf = buf[:runtime.Stack(buf, true)]
		for _, g := range strings.Split(string(buf), "\n\n") {
			for _, m := range leakMarkers {
				if strings.Contains(g, m) {
					leaks = append(leaks, g)
					break
				}
			}
		}
		if len(leaks) == 0 {
			return ""
		}
		time.Sleep(10 * time.Millisecond)
	}
	return strings.Join(leaks, "\n\n")
}

// fakeResolver maps test names to addresses and records every lookup.
type fakeResolver struct {
	mu      sync.Mutex
	names   map[string][]netip.Addr
	lookups []string
}

func newResolver(pairs ...string) *fakeResolver {
	r := &fakeResolver{names: map[string][]netip.Addr{}}
	for i := 0; i < len(pairs); i += 2 {
		for _, a := range strings.Split(pairs[i+1], ",") {
			r.names[pairs[i]] = append(r.names[pairs[i]], netip.MustParseAddr(a))
		}
	}
	return r
}

func (r *fakeResolver) LookupNetIP(_ context.Context, network, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lookups = append(r.lookups, host)
	// Only rooted names resolve: an unrooted one would get the search
	// domains of a real resolver.
	if addrs, ok := r.names[strings.TrimSuffix(host, ".")]; ok && strings.HasSuffix(host, ".") {
		return addrs, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

func (r *fakeResolver) Lookups() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.lookups...)
}

// loopbackDialer dials loopback addresses for real and refuses (recording
// them) all others: tests never send traffic off this machine.
type loopbackDialer struct {
	mu    sync.Mutex
	dials []string
	d     net.Dialer
}

func (d *loopbackDialer) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	d.mu.Lock()
	d.dials = append(d.dials, address)
	d.mu.Unlock()
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return nil, fmt.Errorf("test dialer: %q is not an address: %v", address, err)
	}
	if !ap.Addr().IsLoopback() {
		return nil, errors.New("test dialer: refusing an address off this machine")
	}
	return d.d.DialContext(ctx, network, address)
}

func (d *loopbackDialer) Dials() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.dials...)
}

// lineLog is a concurrency-safe log that hands out its JSON lines.
type lineLog struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	lines chan string
}

func newLineLog() *lineLog { return &lineLog{lines: make(chan string, 1000)} }

func (l *lineLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf.Write(p)
	for _, line := range strings.SplitAfter(string(p), "\n") {
		if line != "" {
			l.lines <- strings.TrimSuffix(line, "\n")
		}
	}
	return len(p), nil
}

func (l *lineLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// next returns the next line; it fails the test if none comes (the bound only
// keeps a broken test from hanging).
func (l *lineLog) next(t *testing.T) string {
	t.Helper()
	select {
	case line := <-l.lines:
		return line
	case <-time.After(20 * time.Second):
		t.Fatal("no log line")
		return ""
	}
}

// waitFor returns the first line that contains all of subs, skipping others.
func (l *lineLog) waitFor(t *testing.T, subs ...string) string {
	t.Helper()
	for {
		line := l.next(t)
		ok := true
		for _, s := range subs {
			ok = ok && strings.Contains(line, s)
		}
		if ok {
			return line
		}
	}
}

// decision returns the next decision line.
func (l *lineLog) decision(t *testing.T) Decision {
	t.Helper()
	var d Decision
	line := l.next(t)
	if err := json.Unmarshal([]byte(line), &d); err != nil {
		t.Fatalf("log line %q: %v", line, err)
	}
	return d
}

// noMore fails if a line is waiting.
func (l *lineLog) noMore(t *testing.T) {
	t.Helper()
	select {
	case line := <-l.lines:
		t.Fatalf("unexpected log line %s", line)
	default:
	}
}

type testGateway struct {
	*Gateway
	addr     string // the proxy's address
	log      *lineLog
	resolver *fakeResolver
	dialer   *loopbackDialer
	stop     func() // stops Serve and waits for it
}

var testTime = time.Date(2025, 1, 2, 3, 4, 5, 123456789, time.UTC)

// startGateway serves g (with a fake resolver, a loopback-only dialer, a fixed
// clock and loopback allowed by address rules) on 127.0.0.1.
func startGateway(t *testing.T, g *Gateway, res *fakeResolver, rules ...string) *testGateway {
	t.Helper()
	if g == nil {
		g = &Gateway{Agent: "agent.coder", loopbackByRule: true}
	}
	tg := &testGateway{Gateway: g, log: newLineLog(), resolver: res, dialer: &loopbackDialer{}}
	g.Resolver, g.Dialer, g.Log = res, tg.dialer, tg.log
	if g.Now == nil {
		g.Now = func() time.Time { return testTime }
	}
	g.SetRules(mustRules(t, rules...))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tg.addr = l.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Serve(ctx, l) }()
	var once sync.Once
	tg.stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Serve: %v", err)
			}
		})
	}
	t.Cleanup(tg.stop)
	return tg
}

// connect sends CONNECT target through the gateway and returns the connection
// and the gateway's answer.
func (tg *testGateway) connect(t *testing.T, target string) (net.Conn, *bufio.Reader, *http.Response, string) {
	t.Helper()
	c, err := net.Dial("tcp", tg.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\nProxy-Authorization: Basic c2VjcmV0\r\n\r\n", target, target)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		t.Fatalf("CONNECT %s: %v", target, err)
	}
	body := ""
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		body = string(b)
	}
	return c, br, resp, body
}

// raw sends req as is and returns the answer.
func (tg *testGateway) raw(t *testing.T, req string) (*http.Response, string) {
	t.Helper()
	c, err := net.Dial("tcp", tg.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, req)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("%q: %v", req, err)
	}
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// echoServer echoes every connection on 127.0.0.1 until the test ends.
func echoServer(t *testing.T) (addr string, port int) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() {
				io.Copy(c, c)
				c.Close()
			})
		}
	})
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return l.Addr().String(), l.Addr().(*net.TCPAddr).Port
}

func wantDecision(t *testing.T, d Decision, dest, rule string, allowed bool, reason string) {
	t.Helper()
	if d.Destination != dest || d.Rule != rule || d.Allowed != allowed || !strings.Contains(d.Reason, reason) {
		t.Fatalf("decision = %+v\nwant destination %q, rule %q, allowed %v, reason containing %q", d, dest, rule, allowed, reason)
	}
	if !d.Time.Equal(testTime) {
		t.Fatalf("decision time = %v, want the injected clock's %v", d.Time, testTime)
	}
	if _, err := netip.ParseAddrPort(d.Source); err != nil {
		t.Fatalf("decision source %q is not ip:port", d.Source)
	}
}
