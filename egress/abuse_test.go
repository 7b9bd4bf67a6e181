package egress

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// Tests of issue 17: a gateway that holds under abuse.

func TestBadRequestLogLineBounded(t *testing.T) {
	tg := startGateway(t, nil, newResolver())
	// '<' is six bytes once JSON-escaped with HTML escaping, which the log
	// must not use; Go's server itself answers control characters.
	huge := strings.Repeat("<", 60000) + "\"\\é"
	resp, body := tg.raw(t, "GET /"+huge+" HTTP/1.1\r\nHost: "+strings.Repeat("a", 3000)+"\r\n\r\n")
	if resp.StatusCode != http.StatusBadRequest || len(body) > 1200 {
		t.Errorf("answer %s, %d bytes", resp.Status, len(body))
	}
	line := tg.log.next(t)
	if len(line) > MaxDecisionLine {
		t.Errorf("decision line of %d bytes, want at most %d", len(line), MaxDecisionLine)
	}
	var d Decision
	if err := json.Unmarshal([]byte(line), &d); err != nil {
		t.Fatalf("%v: %s", err, line)
	}
	if !strings.HasPrefix(d.Destination, unparsed) || d.Allowed || !strings.Contains(d.Reason, "<...") {
		t.Errorf("decision %+v", d)
	}
}

func TestClipBound(t *testing.T) {
	for _, s := range []string{"", "short", strings.Repeat("<", 5000), strings.Repeat("\x00", 5000), strings.Repeat("é", 5000), strings.Repeat("\xff", 5000), strings.Repeat(`"`, 5000)} {
		c := clip(s, 100)
		var buf strings.Builder
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		enc.Encode(c)
		b := strings.TrimSpace(buf.String())
		if len(b)-2 > 100 || (len(s) <= 5 && c != s) {
			t.Errorf("clip(%.10q...) escapes to %d bytes: %s", s, len(b)-2, b)
		}
	}
}

func TestConnectLogsTargetNotHostHeader(t *testing.T) {
	tg := startGateway(t, nil, newResolver(), "allowed.test:443")
	resp, _ := tg.raw(t, "CONNECT denied.test:443 HTTP/1.1\r\nHost: allowed.test:443\r\n\r\n")
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("CONNECT denied.test with Host allowed.test: %s", resp.Status)
	}
	wantDecision(t, tg.log.decision(t), "denied.test:443", "", false, "not in the allowlist")
	// An origin-form request's Host is a claim, logged as unparsed.
	tg.raw(t, "GET / HTTP/1.1\r\nHost: allowed.test:443\r\n\r\n")
	wantDecision(t, tg.log.decision(t), unparsed+"allowed.test:443", "", false, "is not a proxy request")
	resp, _ = tg.raw(t, "CONNECT /x HTTP/1.1\r\nHost: allowed.test:443\r\n\r\n")
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("CONNECT /x: %s", resp.Status)
	}
	if d := tg.log.decision(t); !strings.HasPrefix(d.Destination, unparsed) || strings.Contains(d.Destination, "allowed.test") {
		t.Errorf("CONNECT /x logged %+v", d)
	}
}

func TestRefusalLogRateLimited(t *testing.T) {
	var now atomic.Pointer[time.Time]
	now.Store(&testTime)
	g := &Gateway{Agent: "agent.coder", Now: func() time.Time { return *now.Load() }}
	tg := startGateway(t, g, newResolver())
	for range 100 {
		tg.raw(t, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	}
	for range refusalBurst {
		tg.log.next(t)
	}
	tg.log.noMore(t)
	later := testTime.Add(time.Second)
	now.Store(&later)
	resp, _ := tg.raw(t, "CONNECT denied.test:443 HTTP/1.1\r\n\r\n")
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("still answered: %s", resp.Status)
	}
	if d := tg.log.decision(t); d.Destination != "denied.test:443" || d.Suppressed != 100-refusalBurst {
		t.Errorf("after a second: %+v, want suppressed %d", d, 100-refusalBurst)
	}
}

// openTunnel CONNECTs to target and checks the tunnel echoes.
func openTunnel(t *testing.T, tg *testGateway, target string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, br, resp, body := tg.connect(t, target)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("CONNECT %s: %s %s", target, resp.Status, body)
	}
	tg.log.decision(t)
	io.WriteString(c, "ping\n")
	if got, err := br.ReadString('\n'); got != "ping\n" {
		t.Fatalf("echo %q, %v", got, err)
	}
	return c, br
}

// wantClosed fails unless the tunnel reads EOF or an error (not a timeout).
func wantClosed(t *testing.T, c net.Conn, br *bufio.Reader, what string) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if b, err := br.ReadByte(); err == nil || os.IsTimeout(err) {
		t.Errorf("%s: the tunnel is still open (%q, %v)", what, b, err)
	}
}

func TestRevokedRuleClosesTunnel(t *testing.T) {
	_, port := echoServer(t)
	p := strconv.Itoa(port)
	tg := startGateway(t, nil, newResolver("echo.test", "127.0.0.1"), "echo.test:"+p, "127.0.0.1:"+p, "other.test:443")
	kept, keptR := openTunnel(t, tg, "127.0.0.1:"+p)
	gone, goneR := openTunnel(t, tg, "echo.test:"+p)
	if n := tg.SetRules(mustRules(t, "127.0.0.1:"+p, "other.test:443")); n != 1 {
		t.Errorf("SetRules closed %d tunnels, want 1", n)
	}
	wantClosed(t, gone, goneR, "echo.test after its rule was revoked")
	io.WriteString(kept, "still\n")
	if got, err := keptR.ReadString('\n'); got != "still\n" {
		t.Errorf("the tunnel still allowed: %q, %v", got, err)
	}
	if n := tg.SetForbidden([]netip.Prefix{netip.MustParsePrefix("127.0.0.0/24")}); n != 1 {
		t.Errorf("SetForbidden closed %d tunnels, want 1", n)
	}
	wantClosed(t, kept, keptR, "127.0.0.1 once forbidden")
	_, _, resp, body := tg.connect(t, "127.0.0.1:"+p)
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "a forbidden address (in 127.0.0.0/24)") {
		t.Errorf("CONNECT to a forbidden prefix: %s %q", resp.Status, body)
	}
}

func TestForbidFileReload(t *testing.T) {
	_, port := echoServer(t)
	p := strconv.Itoa(port)
	tg := startGateway(t, nil, newResolver(), "127.0.0.1:"+p)
	c, br := openTunnel(t, tg, "127.0.0.1:"+p)
	dir := t.TempDir()
	path := filepath.Join(dir, "forbid.json")
	data, err := NewForbidFile([]netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(path, data, 0o644)
	events := newLineLog()
	w := newRulesWatcher("", path, tg.Gateway, events)
	w.check()
	var ev RulesEvent
	if err := json.Unmarshal([]byte(events.next(t)), &ev); err != nil || ev.Event != "forbid-loaded" || ev.TunnelsClosed != 1 || len(ev.Forbid) != 1 {
		t.Fatalf("event %+v, %v", ev, err)
	}
	wantClosed(t, c, br, "after the forbid file named its address")
	os.WriteFile(path, []byte(`{"forbid":["nonsense"]}`), 0o644)
	w.check()
	w.check()
	if line := events.next(t); !strings.Contains(line, "forbid-invalid") {
		t.Errorf("invalid forbid file: %s", line)
	}
	if _, _, resp, _ := tg.connect(t, "127.0.0.1:"+p); resp.StatusCode != http.StatusForbidden {
		t.Errorf("an invalid file dropped the prefixes in force: %s", resp.Status)
	}
}

func TestConnCapKeepsFreshRequestsAnswered(t *testing.T) {
	_, port := echoServer(t)
	p := strconv.Itoa(port)
	g := &Gateway{Agent: "agent.coder", loopbackByRule: true, MaxConns: 10}
	tg := startGateway(t, g, newResolver(), "127.0.0.1:"+p)
	var idle []net.Conn
	for i := range 30 {
		c, err := net.Dial("tcp", tg.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if i%2 == 0 { // kept alive after a request; the others sent nothing yet
			fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: g\r\n\r\n", healthPath)
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatalf("health %d: %v", i, err)
			}
			resp.Body.Close()
		}
		idle = append(idle, c)
	}
	// A fresh request is answered: it takes an idle connection's place.
	c, br := openTunnel(t, tg, "127.0.0.1:"+p)
	defer c.Close()
	closed := 0
	for _, c := range idle {
		c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		if _, err := c.Read(make([]byte, 1)); err != nil && !os.IsTimeout(err) {
			closed++
		}
	}
	if closed < 21 {
		t.Errorf("the gateway closed %d of 30 idle connections, want at least 21 (cap 10)", closed)
	}
	// With every place busy (tunnels), a new connection is closed at once.
	var tunnels []net.Conn
	for range 9 {
		tc, _ := openTunnel(t, tg, "127.0.0.1:"+p)
		tunnels = append(tunnels, tc)
	}
	extra, err := net.Dial("tcp", tg.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer extra.Close()
	extra.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := extra.Read(make([]byte, 1)); err == nil || os.IsTimeout(err) {
		t.Errorf("an 11th connection with 10 tunnels open was not closed: %v", err)
	}
	io.WriteString(c, "ok\n")
	if got, _ := br.ReadString('\n'); got != "ok\n" {
		t.Errorf("a tunnel was disturbed: %q", got)
	}
	for _, tc := range tunnels {
		tc.Close()
	}
}

func TestUnreadAnswersDoNotHoldConnections(t *testing.T) {
	g := &Gateway{Agent: "agent.coder", answerTimeout: 100 * time.Millisecond, WriteTimeout: 200 * time.Millisecond, ReadHeaderTimeout: time.Second}
	tg := startGateway(t, g, newResolver())
	c, err := net.Dial("tcp", tg.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.(*net.TCPConn).SetReadBuffer(4096)
	// Pipelined health checks, never read: the answers fill the socket
	// buffers, and the write deadline ends the connection.
	go func() {
		req := strings.Repeat("GET "+healthPath+" HTTP/1.1\r\nHost: g\r\n\r\n", 1000)
		for range 200 {
			if _, err := io.WriteString(c, req); err != nil {
				return
			}
		}
	}()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
		if tg.held() == 0 {
			return
		}
	}
	t.Errorf("a client that never reads still holds %d connections", tg.held())
}
