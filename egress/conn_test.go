package egress

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// scriptedConn answers each Read from a script: data, or a deadline error
// after running a hook (which stands for the other side moving bytes, or not).
type scriptedConn struct {
	net.Conn
	steps []func() (string, error)
}

func (c *scriptedConn) Read(p []byte) (int, error) {
	if len(c.steps) == 0 {
		return 0, io.EOF
	}
	step := c.steps[0]
	c.steps = c.steps[1:]
	s, err := step()
	return copy(p, s), err
}

func (c *scriptedConn) SetReadDeadline(time.Time) error { return nil }

func TestIdleConnRead(t *testing.T) {
	act := new(activity)
	otherSideMoved := func() (string, error) {
		act.n.Add(1)
		return "", os.ErrDeadlineExceeded
	}
	nothingMoved := func() (string, error) { return "", os.ErrDeadlineExceeded }
	data := func() (string, error) { return "data", nil }
	c := &idleConn{Conn: nil, idle: time.Hour, act: act}
	c.Conn = &scriptedConn{steps: []func() (string, error){otherSideMoved, otherSideMoved, data, nothingMoved}}

	buf := make([]byte, 10)
	// While the other side moves bytes, a wait that times out is not idle.
	n, err := c.Read(buf)
	if err != nil || string(buf[:n]) != "data" {
		t.Fatalf("Read = %q, %v", buf[:n], err)
	}
	// A whole wait with nothing moving anywhere is idle.
	if _, err := c.Read(buf); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Read error = %v, want the deadline", err)
	}
}

func TestIdleTunnelIsClosed(t *testing.T) {
	_, port := echoServer(t)
	p := strconv.Itoa(port)
	g := &Gateway{IdleTimeout: 20 * time.Millisecond, loopbackByRule: true}
	tg := startGateway(t, g, newResolver(), "127.0.0.1:"+p)
	c, br, resp, _ := tg.connect(t, "127.0.0.1:"+p)
	if resp.StatusCode != 200 {
		t.Fatal(resp.Status)
	}
	io.WriteString(c, "ping\n")
	if s, _ := br.ReadString('\n'); s != "ping\n" {
		t.Fatalf("echo %q", s)
	}
	// Then nothing: the gateway closes the tunnel (the client reads EOF).
	c.SetReadDeadline(time.Now().Add(20 * time.Second)) // only so that a broken gateway fails instead of hanging
	if b, err := io.ReadAll(br); err != nil || len(b) != 0 {
		t.Fatalf("idle tunnel: read %q, %v; want EOF", b, err)
	}
}

func TestShutdownClosesTunnelsWithoutLeaks(t *testing.T) {
	_, port := echoServer(t)
	p := strconv.Itoa(port)
	tg := startGateway(t, nil, newResolver(), "127.0.0.1:"+p)

	var conns []net.Conn
	var readers []*bufio.Reader
	for range 5 {
		c, br, resp, _ := tg.connect(t, "127.0.0.1:"+p)
		if resp.StatusCode != 200 {
			t.Fatal(resp.Status)
		}
		io.WriteString(c, "x\n")
		if s, _ := br.ReadString('\n'); s != "x\n" {
			t.Fatalf("echo %q", s)
		}
		conns = append(conns, c)
		readers = append(readers, br)
	}
	// A client idle on a kept-alive connection, and one stuck in its header.
	idle, err := net.Dial("tcp", tg.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	fmt.Fprintf(idle, "GET %s HTTP/1.1\r\nHost: g\r\n\r\n", healthPath)
	if resp, err := http.ReadResponse(bufio.NewReader(idle), nil); err != nil || resp.StatusCode != 200 {
		t.Fatal(resp, err)
	}
	slow, err := net.Dial("tcp", tg.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	io.WriteString(slow, "CONNECT 127.0.0.1:"+p+" HTTP/1.1\r\n")

	tg.stop() // returns once every handler has returned
	if leaks := waitNoLeaks(); leaks != "" {
		t.Fatalf("goroutines left after Serve returned:\n%s", leaks)
	}
	for i, br := range readers {
		conns[i].SetReadDeadline(time.Now().Add(20 * time.Second))
		if b, err := io.ReadAll(br); err != nil || len(b) != 0 {
			t.Fatalf("tunnel %d after shutdown: %q, %v; want EOF", i, b, err)
		}
	}
	if _, err := net.Dial("tcp", tg.addr); err == nil {
		t.Fatal("the listener still accepts")
	}
}

func TestServeReturnsListenerError(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	if err := (&Gateway{}).Serve(context.Background(), l); err == nil {
		t.Fatal("Serve on a closed listener returned nil")
	}
}

// waitHandlersDone waits until no goroutine serves an absolute-form request.
func waitHandlersDone(t *testing.T) {
	t.Helper()
	for range 2000 {
		buf := make([]byte, 4<<20)
		if !strings.Contains(string(buf[:runtime.Stack(buf, true)]), "egress.(*Gateway).serveForward") {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("a forward handler is still running")
}

func TestForwardStalledClients(t *testing.T) {
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/big" {
			chunk := make([]byte, 64<<10)
			for range 1 << 12 { // up to 256 MiB, until the gateway gives up
				if _, err := w.Write(chunk); err != nil {
					return
				}
			}
			return
		}
		io.Copy(io.Discard, r.Body)
	}))
	defer upstream.Close()
	p := strconv.Itoa(upstream.Listener.Addr().(*net.TCPAddr).Port)
	g := &Gateway{IdleTimeout: 50 * time.Millisecond, loopbackByRule: true}
	tg := startGateway(t, g, newResolver(), "127.0.0.1:"+p)

	// A client that never reads the response it asked for.
	c, err := net.Dial("tcp", tg.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET http://127.0.0.1:%s/big HTTP/1.1\r\nHost: x\r\n\r\n", p)
	tg.log.decision(t)
	waitHandlersDone(t)

	// A client that stops sending its body.
	c2, err := net.Dial("tcp", tg.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	fmt.Fprintf(c2, "POST http://127.0.0.1:%s/up HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\nonly a part", p)
	tg.log.decision(t)
	waitHandlersDone(t)
}
