package enginetest

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// RequireEnv is the variable that makes a missing sshd a failure ("1"),
// as it makes a missing engine one: CI installs openssh-server.
const RequireEnv = "BOTTLEFILE_REQUIRE_DOCKER"

// SSHD is an sshd of the test's own on loopback, as an engine's host
// reached with ssh://: it takes one key of the test, and a login runs
// its commands (`docker system dial-stdio`) on this machine, whose docker
// CLI talks to the local engine.
type SSHD struct {
	// Port is where it listens on 127.0.0.1; User the user to log in as.
	Port int
	User string
	dir  string
	// hostKey is its public host key, for known_hosts.
	hostKey string
	log     *lockedBuffer
}

// lockedBuffer is sshd's output: written by exec's copying goroutine while
// the test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Host is its address as a runtime's host attribute:
// ssh://USER@127.0.0.1:PORT.
func (s *SSHD) Host() string { return fmt.Sprintf("ssh://%s@127.0.0.1:%d", s.User, s.Port) }

// Log is what sshd has logged so far.
func (s *SSHD) Log() string { return s.log.String() }

// StartSSHD starts an sshd on a free loopback port, stopped by its PID
// when the test ends. Without sshd or a docker CLI the test is skipped,
// or fails under BOTTLEFILE_REQUIRE_DOCKER=1.
func StartSSHD(t testing.TB) *SSHD {
	t.Helper()
	missing := func(what string) {
		t.Helper()
		msg := what + " (Debian: openssh-server, openssh-client)"
		if os.Getenv(RequireEnv) == "1" {
			t.Fatalf("%s; %s=1 requires it", msg, RequireEnv)
		}
		t.Skip(msg)
	}
	sshd, err := exec.LookPath("sshd")
	if err != nil {
		if _, serr := os.Stat("/usr/sbin/sshd"); serr != nil {
			missing("no sshd")
		}
		sshd = "/usr/sbin/sshd"
	}
	for _, tool := range []string{"ssh", "ssh-keygen", "docker"} {
		if _, err := exec.LookPath(tool); err != nil {
			missing("no " + tool + " on PATH")
		}
	}
	u, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	s := &SSHD{User: u.Username, dir: dir, log: &lockedBuffer{}}
	keygen(t, filepath.Join(dir, "host_key"))
	keygen(t, filepath.Join(dir, "client_key"))
	keygen(t, filepath.Join(dir, "other_key"))
	s.hostKey = strings.TrimSpace(readFile(t, filepath.Join(dir, "host_key.pub")))
	writeFile(t, filepath.Join(dir, "authorized_keys"), readFile(t, filepath.Join(dir, "client_key.pub")))
	if os.Geteuid() == 0 {
		// sshd's privilege separation directory.
		if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
			t.Fatal(err)
		}
	}
	s.Port = freePort(t)
	cfg := filepath.Join(dir, "sshd_config")
	writeFile(t, cfg, fmt.Sprintf(`ListenAddress 127.0.0.1
Port %d
HostKey %s
AuthorizedKeysFile %s
PidFile %s
StrictModes no
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
UsePAM no
LogLevel VERBOSE
`, s.Port, filepath.Join(dir, "host_key"), filepath.Join(dir, "authorized_keys"), filepath.Join(dir, "sshd.pid")))
	cmd := exec.Command(sshd, "-D", "-e", "-f", cfg)
	cmd.Stdout, cmd.Stderr = s.log, s.log
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting sshd: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", s.Port), time.Second)
		if err == nil {
			c.Close()
			break
		}
		select {
		case err := <-exited:
			t.Fatalf("sshd exited: %v\n%s", err, s.log)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("sshd does not listen on %d: %v\n%s", s.Port, err, s.log)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return s
}

// Client is how the test's ssh client is set up.
type Client struct {
	// OtherKey offers a key the sshd does not accept.
	OtherKey bool
	// UnknownHost leaves the sshd's host key out of known_hosts.
	UnknownHost bool
}

// UseClient puts an ssh first on PATH for the rest of the test (for
// this process and the ones it starts) that is the real ssh client with
// a configuration of the test's: its key, a known_hosts holding the
// sshd's host key, nothing of the user's.
func (s *SSHD) UseClient(t testing.TB, c Client) {
	t.Helper()
	t.Setenv("PATH", s.ClientPath(t, c))
}

// ClientPath is the PATH UseClient sets, for a test that hands it to the
// processes it starts instead (t.Setenv forbids t.Parallel).
func (s *SSHD) ClientPath(t testing.TB, c Client) string {
	t.Helper()
	real, err := exec.LookPath("ssh")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	key := filepath.Join(s.dir, "client_key")
	if c.OtherKey {
		key = filepath.Join(s.dir, "other_key")
	}
	known := ""
	if !c.UnknownHost {
		known = fmt.Sprintf("[127.0.0.1]:%d %s\n", s.Port, s.hostKey)
	}
	writeFile(t, filepath.Join(dir, "known_hosts"), known)
	writeFile(t, filepath.Join(dir, "config"), fmt.Sprintf(`Host *
  IdentityFile %s
  IdentitiesOnly yes
  IdentityAgent none
  UserKnownHostsFile %s
  GlobalKnownHostsFile /dev/null
  StrictHostKeyChecking yes
  LogLevel ERROR
`, key, filepath.Join(dir, "known_hosts")))
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	script := fmt.Sprintf("#!/bin/sh\nexec %s -F %s \"$@\"\n", real, filepath.Join(dir, "config"))
	if err := os.WriteFile(filepath.Join(bin, "ssh"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin + string(os.PathListSeparator) + os.Getenv("PATH")
}

func keygen(t testing.TB, path string) {
	t.Helper()
	out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "bottlefile-test", "-f", path).CombinedOutput()
	if err != nil {
		t.Fatalf("ssh-keygen: %v\n%s", err, out)
	}
}

func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	n, _ := strconv.Atoi(port)
	return n
}

func readFile(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func writeFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}
