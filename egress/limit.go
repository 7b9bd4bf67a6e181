package egress

import (
	"errors"
	"net"
	"net/http"
	"sync"
	"time"
)

// connLimit caps the client connections a gateway holds. At the cap, a new
// connection takes the place of the one that has waited longest without a
// request in progress (a new one that sent nothing yet, or one kept alive
// between requests): an agent holding thousands of idle connections only
// closes its own, and a fresh request is still served. When every held
// connection is busy (tunnels, requests being served), the new one is
// closed at once: the agent then starves only itself.
type connLimit struct {
	max int

	mu    sync.Mutex
	conns map[*limitedConn]struct{}
}

func newConnLimit(max int) *connLimit {
	return &connLimit{max: max, conns: map[*limitedConn]struct{}{}}
}

// limitedConn is a client connection the limit counts until it is closed.
type limitedConn struct {
	net.Conn
	lim *connLimit

	// guarded by lim.mu
	waiting bool      // no request in progress: evictable
	since   time.Time // when it started waiting
	closed  bool
}

// admit counts c, making room by closing the longest-waiting connection
// when at the cap. It returns nil when there is no room: c is then closed.
func (l *connLimit) admit(c net.Conn) net.Conn {
	lc := &limitedConn{Conn: c, lim: l, waiting: true, since: time.Now()}
	l.mu.Lock()
	var victim *limitedConn
	if len(l.conns) >= l.max {
		for o := range l.conns {
			if o.waiting && (victim == nil || o.since.Before(victim.since)) {
				victim = o
			}
		}
		if victim == nil {
			l.mu.Unlock()
			c.Close()
			return nil
		}
		victim.closed = true
		delete(l.conns, victim)
	}
	l.conns[lc] = struct{}{}
	l.mu.Unlock()
	if victim != nil {
		victim.Conn.Close() // its handler sees the error and returns
	}
	return lc
}

// state follows http.Server's ConnState: only a connection between
// requests (or before its first) may be evicted.
func (l *connLimit) state(c net.Conn, s http.ConnState) {
	lc, ok := c.(*limitedConn)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch s {
	case http.StateNew, http.StateIdle:
		lc.waiting, lc.since = true, time.Now()
	case http.StateActive, http.StateHijacked:
		lc.waiting = false
	}
}

// held is the number of connections counted.
func (l *connLimit) held() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.conns)
}

// Close closes the connection and frees its place. A hijacked connection
// (a tunnel) is the same *limitedConn, so its end frees the place too.
func (c *limitedConn) Close() error {
	l := c.lim
	l.mu.Lock()
	if !c.closed {
		c.closed = true
		delete(l.conns, c)
	}
	l.mu.Unlock()
	return c.Conn.Close()
}

// CloseWrite half-closes, as the connection underneath allows.
func (c *limitedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errors.ErrUnsupported
}

// limitListener admits every accepted connection through a connLimit.
type limitListener struct {
	net.Listener
	lim *connLimit
}

func (l limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if lc := l.lim.admit(c); lc != nil {
			return lc, nil
		}
	}
}
