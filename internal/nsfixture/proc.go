package nsfixture

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// Proc is the first process of a fixture's namespaces: unshare, whose
// child is PID 1 of the new PID namespace. Killing it kills the child
// (--kill-child), and with the child the kernel kills every process of
// the namespace.
type Proc struct {
	Name  string
	PID   int            // unshare's, in the host's PID namespace
	Child int            // the namespace's first process as the host sees it, when known: killed too
	Stdin io.WriteCloser // nil for a stale one
	Done  chan struct{}  // closed when unshare has exited; nil for a stale one
}

// Spawn starts "unshare ARGS... DIR" (the directory last: IsOurs looks
// for it), killed when this process dies, logging to DIR/NAME.log; its
// pid goes to DIR/NAME.pid, for RemoveStale. env, if not nil, is its
// environment. A Proc returned with an error has started: tear it down.
func Spawn(dir, name string, env []string, args ...string) (*Proc, error) {
	cmd := exec.Command("unshare", append(slices.Clip(args), dir)...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	logf, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	onSpawnerThread(func() { err = cmd.Start() })
	if err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &Proc{Name: name, PID: cmd.Process.Pid, Stdin: stdin, Done: make(chan struct{})}
	go func() { cmd.Wait(); close(p.Done) }()
	if err := os.WriteFile(filepath.Join(dir, name+".pid"), []byte(strconv.Itoa(p.PID)), 0o644); err != nil {
		return p, err
	}
	return p, nil
}

// The spawner starts the namespaces' first processes from one OS thread
// that never exits: their parent-death signal fires when the thread that
// started them ends, which must be when the process ends.
var spawner struct {
	once sync.Once
	reqs chan func()
}

func onSpawnerThread(fn func()) {
	spawner.once.Do(func() {
		spawner.reqs = make(chan func())
		go func() {
			runtime.LockOSThread() // never unlocked: the thread lives as long as the process
			for fn := range spawner.reqs {
				fn()
			}
		}()
	})
	done := make(chan struct{})
	spawner.reqs <- func() { fn(); close(done) }
	<-done
}

// WaitOwnNetns waits until process pid has a network namespace other
// than this process's (unshare enters its namespaces a moment after it
// starts; a veth moved to "netns PID" before would land in the host's).
func WaitOwnNetns(pid int, timeout time.Duration) error {
	own, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		return err
	}
	deadline := time.Now().Add(timeout)
	for {
		ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", pid))
		if err != nil {
			return fmt.Errorf("reading the network namespace of pid %d: %w", pid, err)
		}
		if ns != own {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("pid %d did not enter a network namespace of its own within %s", pid, timeout)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// IsOurs says whether pid is an unshare of the fixture in dir (not a pid
// reused since by some other process).
func IsOurs(pid int, dir string) bool {
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return err == nil && bytes.HasPrefix(cmdline, []byte("unshare\x00")) && bytes.HasSuffix(cmdline, []byte("\x00"+dir+"\x00"))
}
