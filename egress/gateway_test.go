package egress

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

func TestConnectAllowed(t *testing.T) {
	_, port := echoServer(t)
	p := strconv.Itoa(port)
	tg := startGateway(t, nil, newResolver("echo.test", "127.0.0.1"), "echo.test:"+p, "127.0.0.1:"+p)

	c, br, resp, _ := tg.connect(t, "Echo.Test.:"+p)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("CONNECT status %s", resp.Status)
	}
	wantDecision(t, tg.log.decision(t), "echo.test:"+p, "echo.test:"+p, true, "connected to 127.0.0.1:"+p)

	for i := range 3 {
		msg := fmt.Sprintf("hello %d through the tunnel\n", i)
		io.WriteString(c, msg)
		got, err := br.ReadString('\n')
		if err != nil || got != msg {
			t.Fatalf("echo = %q, %v; want %q", got, err, msg)
		}
	}
	// Half-close: the echo server sees EOF, closes, and the client reads EOF.
	c.(*net.TCPConn).CloseWrite()
	if rest, err := io.ReadAll(br); err != nil || len(rest) != 0 {
		t.Fatalf("after close: %q, %v", rest, err)
	}
	if got := tg.resolver.Lookups(); !slices.Equal(got, []string{"echo.test."}) {
		t.Fatalf("lookups = %q", got)
	}
	tg.log.noMore(t)
}

func TestConnectBytesSentWithConnect(t *testing.T) {
	// A client may send its first bytes (a TLS ClientHello) right behind the
	// CONNECT request, before the answer: they must reach the destination.
	_, port := echoServer(t)
	p := strconv.Itoa(port)
	tg := startGateway(t, nil, newResolver(), "127.0.0.1:"+p)
	c, err := net.Dial("tcp", tg.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "CONNECT 127.0.0.1:%s HTTP/1.1\r\nHost: x\r\n\r\nearly bytes\n", p)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %v %v", resp, err)
	}
	if got, err := br.ReadString('\n'); got != "early bytes\n" {
		t.Fatalf("echo = %q, %v", got, err)
	}
}

func TestConnectTLS(t *testing.T) {
	// What an agent does: HTTPS_PROXY=gateway, https://example.com:PORT/.
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello over TLS, auth=%q", r.Header.Get("Proxy-Authorization"))
	}))
	defer srv.Close()
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	p := strconv.Itoa(port)
	tg := startGateway(t, nil, newResolver("example.com", "127.0.0.1"), "example.com:"+p, "127.0.0.1:"+p)

	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	tr := &http.Transport{
		Proxy:           http.ProxyURL(&url.URL{Scheme: "http", Host: tg.addr, User: url.UserPassword("u", "secret")}),
		TLSClientConfig: &tls.Config{RootCAs: pool},
	}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Get("https://example.com:" + p + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != `hello over TLS, auth=""` {
		t.Fatalf("body = %q", body)
	}
	wantDecision(t, tg.log.decision(t), "example.com:"+p, "example.com:"+p, true, "connected to 127.0.0.1:"+p)
}

func TestConnectDeniedHost(t *testing.T) {
	_, port := echoServer(t)
	p := strconv.Itoa(port)
	tg := startGateway(t, nil, newResolver("echo.test", "127.0.0.1", "secret-data.evil.test", "127.0.0.1"), "echo.test:"+p, "127.0.0.1:"+p)

	_, _, resp, body := tg.connect(t, "secret-data.evil.test:"+p)
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("status %s", resp.Status)
	}
	want := "bottlefile egress: secret-data.evil.test:" + p + " is not in the allowlist of agent.coder\n"
	if body != want {
		t.Fatalf("body = %q, want %q", body, want)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Fatalf("Content-Type = %q", ct)
	}
	wantDecision(t, tg.log.decision(t), "secret-data.evil.test:"+p, "", false, "is not in the allowlist of agent.coder")
	// A name that is not allowed is never looked up (no DNS exfiltration), nor dialed.
	if got := tg.resolver.Lookups(); len(got) != 0 {
		t.Fatalf("denied name was looked up: %q", got)
	}
	if got := tg.dialer.Dials(); len(got) != 0 {
		t.Fatalf("dials = %q", got)
	}
	// Nor is an address that no rule names.
	_, _, resp, _ = tg.connect(t, "127.0.0.2:"+p)
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("status %s", resp.Status)
	}
	wantDecision(t, tg.log.decision(t), "127.0.0.2:"+p, "", false, "not in the allowlist")
}

func TestConnectDeniedPort(t *testing.T) {
	_, port := echoServer(t)
	p := strconv.Itoa(port)
	tg := startGateway(t, nil, newResolver("echo.test", "127.0.0.1"), "echo.test", "127.0.0.1")

	// "echo.test" without a port means 80 and 443 only.
	_, _, resp, body := tg.connect(t, "echo.test:"+p)
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("status %s", resp.Status)
	}
	want := fmt.Sprintf("bottlefile egress: echo.test:%s is not in the allowlist of agent.coder (allowed ports for echo.test: 80, 443)\n", p)
	if body != want {
		t.Fatalf("body = %q, want %q", body, want)
	}
	wantDecision(t, tg.log.decision(t), "echo.test:"+p, "", false, "allowed ports for echo.test: 80, 443")
	if got := tg.resolver.Lookups(); len(got) != 0 {
		t.Fatalf("lookups = %q", got)
	}
}

func TestForwardAllowed(t *testing.T) {
	var mu sync.Mutex
	var seen *http.Request
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = r
		mu.Unlock()
		w.Header().Set("X-Upstream", "yes")
		fmt.Fprintf(w, "%s %s host=%s", r.Method, r.RequestURI, r.Host)
	}))
	defer upstream.Close()
	p := strconv.Itoa(upstream.Listener.Addr().(*net.TCPAddr).Port)
	tg := startGateway(t, nil, newResolver("web.test", "127.0.0.1"), "web.test:"+p, "127.0.0.1:"+p)

	tr := &http.Transport{Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: tg.addr, User: url.UserPassword("u", "secret")})}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Get("http://web.test:" + p + "/path?q=1")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "GET /path?q=1 host=web.test:"+p || resp.Header.Get("X-Upstream") != "yes" {
		t.Fatalf("response %s %q %v", resp.Status, body, resp.Header)
	}
	wantDecision(t, tg.log.decision(t), "web.test:"+p, "web.test:"+p, true, "connected to 127.0.0.1:"+p)
	mu.Lock()
	defer mu.Unlock()
	if a := seen.Header.Get("Proxy-Authorization"); a != "" {
		t.Fatalf("Proxy-Authorization leaked upstream: %q", a)
	}
}

func TestForwardStripsHopByHop(t *testing.T) {
	// A raw upstream, to see the request's header as sent and to send
	// hop-by-hop response headers a Go server would rewrite. (Not with
	// "close" among them: net/http drops a Connection header that has
	// "close" before a proxy sees the other names it lists.)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	reqs := make(chan *http.Request, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		req, err := http.ReadRequest(bufio.NewReader(c))
		if err != nil {
			close(reqs)
			return
		}
		reqs <- req
		io.WriteString(c, "HTTP/1.1 200 OK\r\nConnection: X-Secret-Hop\r\nX-Secret-Hop: downstream must not see this\r\n"+
			"Proxy-Authenticate: Basic\r\nX-End: kept\r\nContent-Length: 2\r\n\r\nok")
	}()
	p := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	tg := startGateway(t, nil, newResolver(), "127.0.0.1:"+p)

	resp, body := tg.raw(t, "GET http://127.0.0.1:"+p+"/x?y=1 HTTP/1.1\r\nHost: 127.0.0.1:"+p+
		"\r\nProxy-Authorization: Basic c2VjcmV0\r\nProxy-Connection: keep-alive\r\nConnection: X-Hop\r\nX-Hop: 1\r\nX-Kept: 2\r\n\r\n")
	if resp.StatusCode != 200 || body != "ok" {
		t.Fatalf("%s %q", resp.Status, body)
	}
	req := <-reqs
	if req == nil {
		t.Fatal("upstream got no request")
	}
	if req.RequestURI != "/x?y=1" || req.Host != "127.0.0.1:"+p {
		t.Errorf("upstream request line %q, host %q: want origin form", req.RequestURI, req.Host)
	}
	for _, name := range []string{"Proxy-Authorization", "Proxy-Connection", "X-Hop"} {
		if v := req.Header.Get(name); v != "" {
			t.Errorf("upstream got %s: %q", name, v)
		}
	}
	if req.Header.Get("X-Kept") != "2" {
		t.Errorf("end-to-end request header lost: %v", req.Header)
	}
	if resp.Header.Get("X-Secret-Hop") != "" || resp.Header.Get("Proxy-Authenticate") != "" || resp.Header.Get("X-End") != "kept" {
		t.Errorf("response header: %v", resp.Header)
	}
	wantDecision(t, tg.log.decision(t), "127.0.0.1:"+p, "127.0.0.1:"+p, true, "connected")
}

func TestForwardPost(t *testing.T) {
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%s got %d bytes", r.Method, len(b))
	}))
	defer upstream.Close()
	p := strconv.Itoa(upstream.Listener.Addr().(*net.TCPAddr).Port)
	tg := startGateway(t, nil, newResolver("web.test", "127.0.0.1"), "web.test:"+p, "127.0.0.1:"+p)
	tr := &http.Transport{Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: tg.addr})}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	// Two requests on one client connection: two decisions.
	for range 2 {
		resp, err := client.Post("http://web.test:"+p+"/up", "text/plain", strings.NewReader(strings.Repeat("x", 100000)))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(body) != "POST got 100000 bytes" {
			t.Fatalf("body %q", body)
		}
		wantDecision(t, tg.log.decision(t), "web.test:"+p, "web.test:"+p, true, "connected")
	}
}

func TestForwardDenied(t *testing.T) {
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Error("a denied request reached the upstream")
	}))
	defer upstream.Close()
	p := strconv.Itoa(upstream.Listener.Addr().(*net.TCPAddr).Port)
	tg := startGateway(t, nil, newResolver("web.test", "127.0.0.1", "other.test", "127.0.0.1"), "web.test:"+p, "127.0.0.1:"+p)

	tr := &http.Transport{Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: tg.addr})}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	for _, tc := range []struct{ url, dest, reason string }{
		{"http://other.test:" + p + "/", "other.test:" + p, "other.test:" + p + " is not in the allowlist of agent.coder"},
		{"http://web.test/", "web.test:80", "web.test:80 is not in the allowlist of agent.coder (allowed ports for web.test: " + p + ")"},
	} {
		resp, err := client.Get(tc.url)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden || string(body) != "bottlefile egress: "+tc.reason+"\n" {
			t.Fatalf("GET %s: %s %q", tc.url, resp.Status, body)
		}
		wantDecision(t, tg.log.decision(t), tc.dest, "", false, tc.reason)
	}
	if got := tg.resolver.Lookups(); len(got) != 0 {
		t.Fatalf("lookups = %q", got)
	}
}

func TestAllowedNameForbiddenAddress(t *testing.T) {
	_, port := echoServer(t)
	p := strconv.Itoa(port)
	res := newResolver(
		"metadata.test", "169.254.169.254",
		"mapped.test", "::ffff:169.254.169.254",
		"host.test", "127.0.0.1",
		"mixed.test", "127.0.0.1,169.254.169.254",
		"corp.test", "10.1.2.3",
		"looped.test", "127.0.0.1",
	)
	g := &Gateway{Agent: "agent.coder", loopbackByRule: true, Forbidden: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/30")}}
	tg := startGateway(t, g, res,
		"metadata.test:80", "169.254.169.254:80", // an address rule does not open metadata
		"mapped.test:80",
		"host.test:"+p, "127.0.0.0/8:"+p, // nor a -forbid prefix
		"mixed.test:"+p,
		"corp.test:443",
		"looped.test:"+p,
	)
	for _, tc := range []struct{ target, reason string }{
		{"metadata.test:80", "metadata.test:80 resolves to 169.254.169.254, the link-local cloud metadata address, which the gateway never connects to"},
		{"mapped.test:80", "mapped.test:80 resolves to 169.254.169.254, the link-local cloud metadata address"},
		{"169.254.169.254:80", "169.254.169.254:80 is the link-local cloud metadata address, which the gateway never connects to"},
		{"host.test:" + p, "host.test:" + p + " resolves to 127.0.0.1, a forbidden address (in 127.0.0.0/30), which the gateway never connects to"},
		{"127.0.0.2:" + p, "127.0.0.2:" + p + " is a forbidden address (in 127.0.0.0/30)"},
		{"mixed.test:" + p, "mixed.test:" + p + " resolves to 127.0.0.1, a forbidden address"},
		{"corp.test:443", "corp.test:443 resolves to 10.1.2.3, a private address, which only a rule naming the address (such as 10.1.2.3:443) allows"},
	} {
		_, _, resp, body := tg.connect(t, tc.target)
		if resp.StatusCode != http.StatusForbidden || !strings.HasPrefix(body, "bottlefile egress: "+tc.reason) {
			t.Fatalf("CONNECT %s: %s %q\nwant 403 %q", tc.target, resp.Status, body, tc.reason)
		}
		d := tg.log.decision(t)
		wantDecision(t, d, tc.target, d.Rule, false, tc.reason)
		if d.Rule == "" {
			t.Fatalf("the name was allowed, the log should name the rule: %+v", d)
		}
	}
	if got := tg.dialer.Dials(); len(got) != 0 {
		t.Fatalf("the gateway dialed forbidden addresses: %q", got)
	}

	// Absolute form gets the same policy.
	resp, body := tg.raw(t, "GET http://metadata.test/latest/meta-data/ HTTP/1.1\r\nHost: metadata.test\r\n\r\n")
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "cloud metadata") {
		t.Fatalf("%s %q", resp.Status, body)
	}
	tg.log.decision(t)
}

func TestPrivateAddressNeedsAddressRule(t *testing.T) {
	res := newResolver("corp.test", "10.1.2.3")
	tg := startGateway(t, &Gateway{Agent: "agent.coder"}, res, "corp.test:443")

	_, _, resp, body := tg.connect(t, "corp.test:443")
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "such as 10.1.2.3:443") {
		t.Fatalf("%s %q", resp.Status, body)
	}
	tg.log.decision(t)

	// A rule naming the address (here a CIDR) opts it in: the gateway dials
	// 10.1.2.3 (the test dialer refuses to leave the machine: 502).
	tg.SetRules(mustRules(t, "corp.test:443", "10.0.0.0/8:443"))
	_, _, resp, body = tg.connect(t, "corp.test:443")
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(body, "cannot connect to corp.test:443") {
		t.Fatalf("%s %q", resp.Status, body)
	}
	wantDecision(t, tg.log.decision(t), "corp.test:443", "corp.test:443", true, "cannot connect to corp.test:443: test dialer")
	if got := tg.dialer.Dials(); !slices.Equal(got, []string{"10.1.2.3:443"}) {
		t.Fatalf("dials = %q", got)
	}
}

func TestLoopbackIsForbiddenInProduction(t *testing.T) {
	_, port := echoServer(t)
	p := strconv.Itoa(port)
	// Without the test-only switch, loopback is the gateway itself: even an
	// address rule does not open it.
	tg := startGateway(t, &Gateway{Agent: "agent.coder"}, newResolver("echo.test", "127.0.0.1"), "echo.test:"+p, "127.0.0.1:"+p, "[::1]:"+p)
	for _, target := range []string{"echo.test:" + p, "127.0.0.1:" + p, "[::1]:" + p, "[::ffff:127.0.0.1]:" + p} {
		_, _, resp, body := tg.connect(t, target)
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "a loopback address, which the gateway never connects to") {
			t.Fatalf("CONNECT %s: %s %q", target, resp.Status, body)
		}
		tg.log.decision(t)
	}
	if got := tg.dialer.Dials(); len(got) != 0 {
		t.Fatalf("dials = %q", got)
	}
}

func TestUnresolvableAllowedName(t *testing.T) {
	tg := startGateway(t, nil, newResolver(), "gone.test:443")
	_, _, resp, body := tg.connect(t, "gone.test:443")
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(body, "cannot resolve gone.test") {
		t.Fatalf("%s %q", resp.Status, body)
	}
	wantDecision(t, tg.log.decision(t), "gone.test:443", "gone.test:443", true, "cannot resolve gone.test")
}

func TestNotAProxyRequest(t *testing.T) {
	tg := startGateway(t, nil, newResolver(), "github.com")
	for _, tc := range []struct{ req, body string }{
		{"GET / HTTP/1.1\r\nHost: gateway\r\n\r\n", "GET / is not a proxy request; this is an HTTP proxy"},
		{"POST /x HTTP/1.1\r\nHost: gateway\r\nContent-Length: 0\r\n\r\n", "POST /x is not a proxy request"},
		{"OPTIONS * HTTP/1.1\r\nHost: gateway\r\n\r\n", "OPTIONS * is not a proxy request"},
		{"GET https://github.com/ HTTP/1.1\r\nHost: github.com\r\n\r\n", "the client must use CONNECT for https:// URLs"},
		{"GET ftp://github.com/ HTTP/1.1\r\nHost: github.com\r\n\r\n", "ftp:// URLs are not proxied"},
		{"CONNECT github.com HTTP/1.1\r\nHost: github.com\r\n\r\n", `CONNECT needs host:port, not "github.com"`},
		{"CONNECT github.com:0 HTTP/1.1\r\nHost: github.com\r\n\r\n", "port 0 is out of range"},
		{"CONNECT git!hub.com:443 HTTP/1.1\r\nHost: x\r\n\r\n", `invalid host "git!hub.com"`},
		{"CONNECT [fe80::1%25eth0]:443 HTTP/1.1\r\nHost: x\r\n\r\n", "zone"},
		{"GET http://git!hub.com/ HTTP/1.1\r\nHost: x\r\n\r\n", `invalid host`},
	} {
		resp, body := tg.raw(t, tc.req)
		if resp.StatusCode != http.StatusBadRequest || !strings.HasPrefix(body, "bottlefile egress: ") || !strings.Contains(body, tc.body) {
			t.Errorf("%q: %s %q, want 400 with %q", tc.req, resp.Status, body, tc.body)
			continue
		}
		d := tg.log.decision(t)
		if d.Allowed || !strings.Contains(d.Reason, tc.body) {
			t.Errorf("%q: decision %+v", tc.req, d)
		}
	}
	if got := tg.resolver.Lookups(); len(got) != 0 {
		t.Fatalf("lookups = %q", got)
	}
}

func TestHealth(t *testing.T) {
	tg := startGateway(t, nil, newResolver())
	resp, body := tg.raw(t, "GET "+healthPath+" HTTP/1.1\r\nHost: gateway\r\n\r\n")
	if resp.StatusCode != 200 || body != "ok\n" {
		t.Fatalf("%s %q", resp.Status, body)
	}
	tg.log.noMore(t) // health checks are not decisions
}

func TestHeaderTooLarge(t *testing.T) {
	tg := startGateway(t, &Gateway{MaxHeaderBytes: 1024, loopbackByRule: true}, newResolver())
	resp, _ := tg.raw(t, "CONNECT github.com:443 HTTP/1.1\r\nHost: github.com\r\nX-Big: "+strings.Repeat("a", 8192)+"\r\n\r\n")
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("status %s", resp.Status)
	}
}

func TestDecisionJSONShape(t *testing.T) {
	tg := startGateway(t, nil, newResolver(), "github.com:443")
	tg.connect(t, "github.com:22")
	line := tg.log.next(t)
	var m map[string]any
	if err := json.Unmarshal([]byte(line), &m); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if strings.Join(keys, ",") != "allow_with,allowed,destination,outcome,reason,refusal,rule,serial,source,time" {
		t.Fatalf("keys %q in %s", keys, line)
	}
	if m["time"] != "2025-01-02T03:04:05.123456789Z" {
		t.Fatalf("time %v", m["time"])
	}
	if strings.Count(line, "\n") != 0 || !strings.HasPrefix(line, `{"time":`) {
		t.Fatalf("line %q", line)
	}
}

func TestSetRulesWhileServing(t *testing.T) {
	// Rules swap atomically under load (run with -race).
	_, port := echoServer(t)
	p := strconv.Itoa(port)
	tg := startGateway(t, nil, newResolver("echo.test", "127.0.0.1"), "echo.test:"+p, "127.0.0.1:"+p)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 10 {
				c, err := net.Dial("tcp", tg.addr)
				if err != nil {
					t.Error(err)
					return
				}
				fmt.Fprintf(c, "CONNECT echo.test:%s HTTP/1.1\r\nHost: x\r\n\r\n", p)
				resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: http.MethodConnect})
				if err != nil || (resp.StatusCode != 200 && resp.StatusCode != 403) {
					t.Errorf("CONNECT: %v %v", resp, err)
				}
				c.Close()
			}
		})
	}
	for i := range 50 {
		if i%2 == 0 {
			tg.SetRules(nil)
		} else {
			tg.SetRules(mustRules(t, "echo.test:"+p, "127.0.0.1:"+p))
		}
		_ = tg.Rules()
	}
	wg.Wait()
}

func TestRulesAreCopied(t *testing.T) {
	g := &Gateway{}
	rules := mustRules(t, "a.test:443")
	g.SetRules(rules)
	rules[0] = mustRules(t, "b.test:443")[0]
	got := g.Rules()
	got[0] = Rule{}
	if r := g.Rules(); r[0].String() != "a.test:443" {
		t.Fatalf("rules = %v", r)
	}
	if (&Gateway{}).Rules() != nil {
		t.Fatal("zero Gateway has rules")
	}
}
