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
type idleConn struct {
	net.Conn
	idle time.Duration
	act  *activity
}

func (c *idleConn) Read(p []byte) (int, error) {
	for {
		seen := c.act.n.Load()
		if err := c.Conn.SetReadDeadline(time.Now().Add(c.idle)); err != nil {
			return 0, err
		}
		n, err := c.Conn.Read(p)
		if n > 0 {
			c.act.n.Add(1)
		}
		if n == 0 && isTimeout(err) && c.act.n.Load() != seen {
			continue
		}
		return n, err
	}
}

func (c *idleConn) Write(p []byte) (int, error) {
	written := 0
	for {
		seen := c.act.n.Load()
		if err := c.Conn.SetWriteDeadline(time.Now().Add(c.idle)); err != nil {
			return written, err
		}
		n, err := c.Conn.Write(p[written:])
		written += n
		if n > 0 {
			c.act.n.Add(1)
		}
		if err != nil && isTimeout(err) && written < len(p) && c.act.n.Load() != seen {
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
