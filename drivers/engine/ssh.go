package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// sshCommand is the ssh client run for ssh:// engines, found on PATH.
const sshCommand = "ssh"

// sshArgs are the ssh client's arguments for an ssh:// address: as the
// docker CLI's connection helper, it runs `docker system dial-stdio` on
// the engine's host and speaks to the engine over ssh's standard input
// and output. BatchMode: never a password or host-key prompt (bottlefile
// opens several connections at once); keys come from ssh-agent or the
// user's ssh configuration, and the host must be in known_hosts.
func sshArgs(ep Endpoint) []string {
	args := []string{"-o", "ConnectTimeout=" + strconv.Itoa(int(dialTimeout/time.Second)), "-o", "BatchMode=yes"}
	if ep.URL.User != nil && ep.URL.User.Username() != "" {
		args = append(args, "-l", ep.URL.User.Username())
	}
	if p := ep.URL.Port(); p != "" {
		args = append(args, "-p", p)
	}
	return append(args, "--", ep.URL.Hostname(), "docker", "system", "dial-stdio")
}

// sshTarget is how errors name the ssh destination: user@host:port.
func sshTarget(ep Endpoint) string {
	t := ep.URL.Hostname()
	if ep.URL.User != nil && ep.URL.User.Username() != "" {
		t = ep.URL.User.Username() + "@" + t
	}
	if p := ep.URL.Port(); p != "" {
		t += ":" + p
	}
	return t
}

func (d *dialer) dialSSH(ctx context.Context) (net.Conn, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// Not CommandContext: the connection outlives the dial's context.
	cmd := exec.Command(sshCommand, sshArgs(d.ep)...)
	detach(cmd)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	c := &sshConn{cmd: cmd, stdin: stdin, stdout: stdout, target: sshTarget(d.ep), stderr: &capped{max: 16 << 10}}
	cmd.Stderr = c.stderr
	if err := cmd.Start(); err != nil {
		if errors.Is(err, exec.ErrNotFound) {
			return nil, &ConnectError{Failure: Unreachable, Msg: "ssh:// needs the ssh client on this machine (Debian: openssh-client), and there is none on PATH", Err: err}
		}
		return nil, &ConnectError{Failure: Unreachable, Msg: fmt.Sprintf("cannot run ssh: %v", err), Err: err}
	}
	return c, nil
}

// sshConn is a connection to the engine through an ssh process's standard
// input and output. When ssh ends with an error, reads and writes return
// a *ConnectError made from what it wrote on its standard error.
type sshConn struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout io.ReadCloser
	stderr *capped
	target string

	closed   atomic.Bool
	waitOnce sync.Once
	waitErr  error
}

func (c *sshConn) Read(b []byte) (int, error) {
	n, err := c.stdout.Read(b)
	if err != nil {
		err = c.ended(err)
	}
	return n, err
}

func (c *sshConn) Write(b []byte) (int, error) {
	n, err := c.stdin.Write(b)
	if err != nil {
		err = c.ended(err)
	}
	return n, err
}

// ended is the error a read or write returns once the ssh process's pipe
// failed (EOF, a closed pipe): the process's own failure when it ended
// with one, else err.
func (c *sshConn) ended(err error) error {
	if c.closed.Load() {
		return err
	}
	c.wait()
	var exit *exec.ExitError
	if errors.As(c.waitErr, &exit) {
		return sshError(c.target, exit.ExitCode(), c.stderr.String())
	}
	return err
}

func (c *sshConn) wait() {
	c.waitOnce.Do(func() { c.waitErr = c.cmd.Wait() })
}

// CloseWrite closes ssh's standard input: the engine sees the end of what
// is sent and still answers (a hijacked exec's input ending).
func (c *sshConn) CloseWrite() error { return c.stdin.Close() }

func (c *sshConn) Close() error {
	if c.closed.Swap(true) {
		return nil
	}
	c.stdin.Close()
	if c.cmd.Process != nil {
		_ = c.cmd.Process.Kill()
	}
	c.wait()
	return nil
}

func (c *sshConn) LocalAddr() net.Addr              { return sshAddr(c.target) }
func (c *sshConn) RemoteAddr() net.Addr             { return sshAddr(c.target) }
func (c *sshConn) SetDeadline(time.Time) error      { return nil }
func (c *sshConn) SetReadDeadline(time.Time) error  { return nil }
func (c *sshConn) SetWriteDeadline(time.Time) error { return nil }

type sshAddr string

func (a sshAddr) Network() string { return "ssh" }
func (a sshAddr) String() string  { return string(a) }

// sshError says why the ssh process ended with code: ssh's own failures
// (code 255) by what ssh wrote, else the remote docker command's.
func sshError(target string, code int, stderr string) error {
	said := lastLines(stderr, 3)
	if code == 255 {
		switch {
		case strings.Contains(stderr, "Permission denied"), strings.Contains(stderr, "Too many authentication failures"):
			return &ConnectError{Failure: Authentication, Msg: fmt.Sprintf("ssh authentication to %s failed (%s): ssh runs without prompts, so it needs a key from ssh-agent or the ssh configuration that the host accepts", target, said)}
		case strings.Contains(stderr, "Host key verification failed"), strings.Contains(stderr, "REMOTE HOST IDENTIFICATION HAS CHANGED"):
			return &ConnectError{Failure: Authentication, Msg: fmt.Sprintf("ssh does not know the host key of %s (%s): connect once with ssh to check and accept it", target, said)}
		case strings.Contains(stderr, "Connection refused"):
			return &ConnectError{Failure: Refused, Msg: fmt.Sprintf("the connection to %s was refused: no ssh server listens there", target)}
		case strings.Contains(stderr, "Could not resolve hostname"):
			return &ConnectError{Failure: Unreachable, Msg: fmt.Sprintf("ssh cannot resolve the host of %s (%s)", target, said)}
		}
		return &ConnectError{Failure: Unreachable, Msg: fmt.Sprintf("ssh to %s failed: %s", target, said)}
	}
	if code == 127 || strings.Contains(stderr, "command not found") || strings.Contains(stderr, "docker: not found") {
		return &ConnectError{Failure: Unreachable, Msg: fmt.Sprintf("there is no docker command on %s: ssh:// runs `docker system dial-stdio` there (Docker 18.09 or later)", target)}
	}
	return &ConnectError{Failure: Unreachable, Msg: fmt.Sprintf("`docker system dial-stdio` on %s ended with code %d: %s", target, code, said)}
}

// lastLines is the last n non-empty lines of s, joined with "; ", leaving
// out ssh's note that it added a host key.
func lastLines(s string, n int) string {
	var lines []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "Warning: Permanently added") {
			lines = append(lines, l)
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	if len(lines) == 0 {
		return "it said nothing"
	}
	return strings.Join(lines, "; ")
}

// capped keeps the last max bytes written to it.
type capped struct {
	mu  sync.Mutex
	buf bytes.Buffer
	max int
}

func (c *capped) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.buf.Write(p)
	if over := c.buf.Len() - c.max; over > 0 {
		c.buf.Next(over)
	}
	return len(p), nil
}

func (c *capped) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.String()
}
