package egress

import (
	"errors"
	"io"
	"net"
	"os"
	"sync/atomic"
	"time"
)

// activity counts the reads and writes that moved bytes on a set of
// connections (the two sides of a tunnel), so that one side waiting for data
// is not "idle" while the other side is busy.
type activity struct{ n atomic.Uint64 }

// idleConn closes the gap a plain deadline leaves: each Read or Write waits at
// most idle, and gives up only when nothing moved on any connection sharing act
// during the whole wait. A connection with no traffic at all is thus closed
// after between idle and twice idle.
//
// A deadline its user sets (an http.Server aborting its background read
// once a request asked for Connection: close) is kept: a wait ends at the
// earlier of it and the idle bound, and reaching it ends the wait for
// good, however busy the other side is.
type idleConn struct {
	net.Conn
	idle time.Duration
	act  *activity
	// rdl and wdl are the user's read and write deadlines, in Unix
	// nanoseconds; 0 for none.
	rdl, wdl atomic.Int64
}

func (c *idleConn) SetReadDeadline(t time.Time) error {
	c.rdl.Store(unixNano(t))
	return c.Conn.SetReadDeadline(t)
}

func (c *idleConn) SetWriteDeadline(t time.Time) error {
	c.wdl.Store(unixNano(t))
	return c.Conn.SetWriteDeadline(t)
}

func (c *idleConn) SetDeadline(t time.Time) error {
	c.rdl.Store(unixNano(t))
	c.wdl.Store(unixNano(t))
	return c.Conn.SetDeadline(t)
}

func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// wait is the deadline of the next wait: the idle bound, or the user's
// deadline user when earlier; reached says whether the user's has passed.
func (c *idleConn) wait(user int64) (dl time.Time, reached bool) {
	now := time.Now()
	dl = now.Add(c.idle)
	if user != 0 {
		u := time.Unix(0, user)
		if !u.After(now) {
			return u, true
		}
		if u.Before(dl) {
			dl = u
		}
	}
	return dl, false
}

func (c *idleConn) Read(p []byte) (int, error) {
	for {
		seen := c.act.n.Load()
		dl, _ := c.wait(c.rdl.Load())
		if err := c.Conn.SetReadDeadline(dl); err != nil {
			return 0, err
		}
		n, err := c.Conn.Read(p)
		if n > 0 {
			c.act.n.Add(1)
		}
		if _, reached := c.wait(c.rdl.Load()); n == 0 && isTimeout(err) && !reached && c.act.n.Load() != seen {
			continue
		}
		return n, err
	}
}

func (c *idleConn) Write(p []byte) (int, error) {
	written := 0
	for {
		seen := c.act.n.Load()
		dl, _ := c.wait(c.wdl.Load())
		if err := c.Conn.SetWriteDeadline(dl); err != nil {
			return written, err
		}
		n, err := c.Conn.Write(p[written:])
		written += n
		if n > 0 {
			c.act.n.Add(1)
		}
		if _, reached := c.wait(c.wdl.Load()); err != nil && isTimeout(err) && !reached && written < len(p) && c.act.n.Load() != seen {
			continue
		}
		return written, err
	}
}

func isTimeout(err error) bool {
	return err != nil && errors.Is(err, os.ErrDeadlineExceeded)
}

// closeWrite half-closes c, so that the peer reads EOF while the other
// direction goes on. It reports whether c could do it.
func closeWrite(c net.Conn) bool {
	cw, ok := c.(interface{ CloseWrite() error })
	return ok && cw.CloseWrite() == nil
}

// splice copies both directions between client and upstream until both are
// done, a side fails, or the connections are closed from outside. It closes
// both connections before it returns.
func splice(client, upstream *idleConn) {
	closeBoth := func() {
		client.Conn.Close()
		upstream.Conn.Close()
	}
	defer closeBoth()
	done := make(chan bool, 2)
	half := func(dst, src *idleConn) {
		buf := make([]byte, 32<<10)
		_, err := io.CopyBuffer(dst, src, buf)
		done <- err == nil && closeWrite(dst.Conn)
	}
	go half(upstream, client)
	go half(client, upstream)
	for range 2 {
		if clean := <-done; !clean {
			closeBoth() // unblocks the other direction
		}
	}
}
