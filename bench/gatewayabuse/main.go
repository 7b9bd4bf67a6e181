// Command gatewayabuse loads an egress gateway the way a hostile agent
// would, from inside the bottle, and prints what it saw as one JSON line.
// It is built statically and copied into an agent container by
// bench/gateway-abuse.sh and by the escape suite (cmd/bottlefile).
//
//	gatewayabuse -mode flood -addr GW:3128 -size 60000 -duration 10s
//	    bad requests (an origin-form request target of -size bytes of '<',
//	    which the decision log escapes to six bytes each) from -workers
//	    connections at a time, for -duration
//	gatewayabuse -mode idle -addr GW:3128 -n 3000 [-unread] -connect HOST:PORT
//	    opens -n connections that each send one request and then sit idle
//	    (or, with -unread, send a bad request of -size bytes and never read
//	    the answer), waits -hold, then sends a fresh CONNECT to -connect and
//	    reports its answer, and how many of the -n the gateway had closed
//	gatewayabuse -mode allowed -addr GW:3128 -connect HOST:PORT -n 100000 -duration 50s
//	    allowed requests (GET http://HOST:PORT/ through the proxy, on
//	    keep-alive connections) from -workers connections at a time, until
//	    -n were answered or -duration is over: a flood the decision log
//	    must not let rotate earlier refusals away
//	gatewayabuse -mode sink -addr :PORT
//	    an HTTP server that answers every request 204 and closes: the
//	    cheapest destination for -mode allowed
//	gatewayabuse -mode tunnel -addr GW:3128 -connect HOST:PORT
//	    opens a tunnel and prints its answer, then holds it until the
//	    gateway closes it (at most -hold), and prints "closed" or "open"
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

type result struct {
	Mode     string  `json:"mode"`
	Requests int64   `json:"requests,omitempty"` // flood: requests sent whole
	Answers  int64   `json:"answers,omitempty"`  // flood: status lines read
	Opened   int     `json:"opened,omitempty"`   // idle: connections opened
	OpenErrs int     `json:"open_errors,omitempty"`
	Closed   int     `json:"closed_by_gateway,omitempty"` // idle: found closed after -hold
	Connect  string  `json:"connect_status,omitempty"`    // idle: the fresh CONNECT's status line, or the error
	ConnectS float64 `json:"connect_seconds,omitempty"`
	Seconds  float64 `json:"seconds"`
}

func main() {
	mode := flag.String("mode", "flood", "flood or idle")
	addr := flag.String("addr", "", "the gateway's host:port")
	size := flag.Int("size", 60000, "bytes of the bad request target")
	dur := flag.Duration("duration", 10*time.Second, "flood: how long")
	workers := flag.Int("workers", 8, "flood: connections at a time")
	n := flag.Int("n", 3000, "idle: connections to hold")
	unread := flag.Bool("unread", false, "idle: send a bad request and never read the answer")
	hold := flag.Duration("hold", 5*time.Second, "idle: how long to hold them before the fresh CONNECT")
	connect := flag.String("connect", "example.test:443", "idle: the fresh CONNECT's target")
	flag.Parse()
	if *addr == "" {
		fmt.Fprintln(os.Stderr, "gatewayabuse: -addr is required")
		os.Exit(2)
	}
	bad := "GET /" + strings.Repeat("<", *size) + " HTTP/1.1\r\nHost: x\r\n\r\n"
	start := time.Now()
	var r result
	switch *mode {
	case "flood":
		r = flood(*addr, bad, *dur, *workers)
	case "idle":
		r = idle(*addr, bad, *n, *unread, *hold, *connect)
	case "allowed":
		r = allowed(*addr, *connect, *dur, *workers, int64(*n))
	case "sink":
		sink(*addr)
		return
	case "tunnel":
		tunnel(*addr, *connect, *hold)
		return
	default:
		fmt.Fprintf(os.Stderr, "gatewayabuse: unknown -mode %q\n", *mode)
		os.Exit(2)
	}
	r.Seconds = time.Since(start).Seconds()
	json.NewEncoder(os.Stdout).Encode(r)
}

func flood(addr, bad string, d time.Duration, workers int) result {
	var sent, answered atomic.Int64
	end := time.Now().Add(d)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for time.Now().Before(end) {
				c, err := net.DialTimeout("tcp", addr, 2*time.Second)
				if err != nil {
					time.Sleep(10 * time.Millisecond)
					continue
				}
				c.SetDeadline(time.Now().Add(5 * time.Second))
				if _, err := io.WriteString(c, bad); err == nil {
					sent.Add(1)
					if line, err := bufio.NewReader(c).ReadString('\n'); err == nil && strings.HasPrefix(line, "HTTP/") {
						answered.Add(1)
					}
				}
				c.Close()
			}
		})
	}
	wg.Wait()
	return result{Mode: "flood", Requests: sent.Load(), Answers: answered.Load()}
}

func allowed(addr, target string, d time.Duration, workers int, n int64) result {
	var sent, answered atomic.Int64
	end := time.Now().Add(d)
	req := fmt.Sprintf("GET http://%[1]s/ HTTP/1.1\r\nHost: %[1]s\r\n\r\n", target)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for time.Now().Before(end) && answered.Load() < n {
				c, err := net.DialTimeout("tcp", addr, 2*time.Second)
				if err != nil {
					time.Sleep(10 * time.Millisecond)
					continue
				}
				br := bufio.NewReader(c)
				for time.Now().Before(end) && answered.Load() < n {
					c.SetDeadline(time.Now().Add(5 * time.Second))
					if _, err := io.WriteString(c, req); err != nil {
						break
					}
					sent.Add(1)
					resp, err := http.ReadResponse(br, nil)
					if err != nil {
						break
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode/100 == 2 {
						answered.Add(1)
					}
					if resp.Close {
						break
					}
				}
				c.Close()
			}
		})
	}
	wg.Wait()
	return result{Mode: "allowed", Requests: sent.Load(), Answers: answered.Load()}
}

func sink(addr string) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "gatewayabuse:", err)
		os.Exit(1)
	}
	fmt.Println("listening")
	for {
		c, err := l.Accept()
		if err != nil {
			continue
		}
		go func() {
			defer c.Close()
			c.SetDeadline(time.Now().Add(10 * time.Second))
			br := bufio.NewReader(c)
			for {
				line, err := br.ReadString('\n')
				if err != nil {
					return
				}
				if line == "\r\n" {
					break
				}
			}
			io.WriteString(c, "HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n")
		}()
	}
}

func idle(addr, bad string, n int, unread bool, hold time.Duration, target string) result {
	r := result{Mode: "idle"}
	if unread {
		r.Mode = "unread"
	}
	var mu sync.Mutex
	conns := make([]net.Conn, 0, n)
	sem := make(chan struct{}, 50) // opened 50 at a time
	var wg sync.WaitGroup
	for range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			c, err := open(addr, bad, unread)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				r.OpenErrs++
			}
			if c != nil {
				conns = append(conns, c)
			}
		})
	}
	wg.Wait()
	r.Opened = len(conns)
	time.Sleep(hold)

	t0 := time.Now()
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err == nil {
		c.SetDeadline(time.Now().Add(15 * time.Second))
		fmt.Fprintf(c, "CONNECT %[1]s HTTP/1.1\r\nHost: %[1]s\r\n\r\n", target)
		var line string
		line, err = bufio.NewReader(c).ReadString('\n')
		r.Connect = strings.TrimSpace(line)
		c.Close()
	}
	if err != nil {
		r.Connect = "error: " + err.Error()
	}
	r.ConnectS = time.Since(t0).Seconds()

	// A connection the gateway closed reads to EOF (or a reset) at once;
	// an open one times out.
	var closed atomic.Int64
	wg = sync.WaitGroup{}
	for _, c := range conns {
		wg.Go(func() {
			c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
			if _, err := io.Copy(io.Discard, c); !isTimeout(err) {
				closed.Add(1)
			}
			c.Close()
		})
	}
	wg.Wait()
	r.Closed = int(closed.Load())
	return r
}

func tunnel(addr, target string, hold time.Duration) {
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	defer c.Close()
	fmt.Fprintf(c, "CONNECT %[1]s HTTP/1.1\r\nHost: %[1]s\r\n\r\n", target)
	br := bufio.NewReader(c)
	line, err := br.ReadString('\n')
	fmt.Println(strings.TrimSpace(line), err)
	c.SetReadDeadline(time.Now().Add(hold))
	for {
		if _, err := br.ReadByte(); err != nil {
			if isTimeout(err) {
				fmt.Println("open")
			} else {
				fmt.Println("closed")
			}
			return
		}
	}
}

// open opens one connection and sends its one request: a bad one it never
// reads the answer of, or a health check whose answer it reads, leaving
// the connection idle.
func open(addr, bad string, unread bool) (net.Conn, error) {
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return nil, err
	}
	if unread {
		// Never read: the answer stays in the gateway's socket buffers.
		c.(*net.TCPConn).SetReadBuffer(4096)
		c.SetWriteDeadline(time.Now().Add(2 * time.Second))
		_, err = io.WriteString(c, bad)
		return c, err
	}
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, "GET /.bottlefile/health HTTP/1.1\r\nHost: gateway\r\n\r\n"); err != nil {
		return c, err
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return c, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	c.SetDeadline(time.Time{})
	return c, nil
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}
