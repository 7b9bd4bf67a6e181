package k8stest

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// makeCgroups makes cluster id's cgroup in every v1 hierarchy (the
// kubelet's cgroupRoot must exist in each; cpuset's needs its cpus and
// mems set before anything joins it), and its daemons cgroup in pids.
func makeCgroups(id string) error {
	hs, err := os.ReadDir(cgroupRoot)
	if err != nil {
		return err
	}
	for _, h := range hs {
		if h.Name() == "unified" {
			continue
		}
		if _, err := os.Stat(filepath.Join(cgroupRoot, h.Name(), "cgroup.procs")); err != nil {
			continue // not a hierarchy
		}
		if err := os.Mkdir(filepath.Join(cgroupRoot, h.Name(), cgroupName(id)), 0o755); err != nil {
			return err
		}
	}
	for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
		v, err := os.ReadFile(filepath.Join(cgroupRoot, "cpuset", f))
		if err != nil {
			continue // no cpuset hierarchy
		}
		if err := os.WriteFile(filepath.Join(cgroupRoot, "cpuset", cgroupName(id), f), v, 0o644); err != nil {
			return err
		}
	}
	return os.Mkdir(filepath.Join(cgroupRoot, "pids", cgroupName(id), "daemons"), 0o755)
}

// teardown kills cluster id's processes by PID: the holder (whose death
// kills its PID namespace, with every daemon, shim and container), then
// whatever is left in its cgroups. It then removes the cgroups, the
// host's veth end and the directory.
func teardown(id, dir string, h *holder) error {
	var errs []error
	if h != nil {
		_ = syscall.Kill(h.unsharePID, syscall.SIGKILL)
		if h.initPID > 0 {
			_ = syscall.Kill(h.initPID, syscall.SIGKILL)
		}
	}
	root := filepath.Join(cgroupRoot, "pids", cgroupName(id))
	deadline := time.Now().Add(15 * time.Second)
	for {
		left := 0
		filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || d.Name() != "cgroup.procs" {
				return nil
			}
			data, _ := os.ReadFile(path)
			for _, f := range strings.Fields(string(data)) {
				if pid, err := strconv.Atoi(f); err == nil {
					left++
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			}
			return nil
		})
		if left == 0 {
			break
		}
		if time.Now().After(deadline) {
			errs = append(errs, fmt.Errorf("%d processes still in %s", left, root))
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	hs, _ := os.ReadDir(cgroupRoot)
	for _, hh := range hs {
		top := filepath.Join(cgroupRoot, hh.Name(), cgroupName(id))
		if _, err := os.Stat(top); err != nil {
			continue
		}
		var dirs []string
		filepath.WalkDir(top, func(path string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, path)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			// A cgroup whose last process just died can refuse removal
			// for a moment (EBUSY).
			for try := 0; ; try++ {
				err := os.Remove(dirs[i])
				if err == nil || os.IsNotExist(err) {
					break
				}
				if try == 50 {
					errs = append(errs, err)
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
	}
	if h != nil {
		select {
		case <-h.done:
		case <-time.After(5 * time.Second):
			errs = append(errs, fmt.Errorf("the namespaces' first process (pid %d) did not exit", h.unsharePID))
		}
	}
	// The veth pair goes with its network namespace, a moment after its
	// last process (the kernel cleans namespaces up in the background); a
	// namespace kept by something else would keep it: then remove the
	// host's end.
	for try := 0; ; try++ {
		if _, err := net.InterfaceByName(vethName(id)); err != nil {
			break
		}
		if try < 100 {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		out, err := exec.Command("ip", "link", "del", vethName(id)).CombinedOutput()
		if err != nil && !strings.Contains(string(out), "Cannot find device") {
			errs = append(errs, fmt.Errorf("removing %s: %v: %s", vethName(id), err, out))
		}
		break
	}
	if dir != "" {
		if err := os.RemoveAll(dir); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// removeStale tears down the clusters whose owner is gone (a test process
// killed before it could stop its cluster), found by their names: the
// directories under baseDir, the cgroups bottlefile-k8s-PID, the host's
// veth ends bfk8sPID.
func removeStale() {
	seen := map[string]bool{}
	dirs, _ := os.ReadDir(baseDir())
	for _, d := range dirs {
		if d.IsDir() {
			seen[d.Name()] = true
		}
	}
	cgs, _ := filepath.Glob(filepath.Join(cgroupRoot, "*", cgroupName("*")))
	for _, c := range cgs {
		seen[strings.TrimPrefix(filepath.Base(c), cgroupName(""))] = true
	}
	if ifs, err := net.Interfaces(); err == nil {
		for _, i := range ifs {
			if rest, ok := strings.CutPrefix(i.Name, vethName("")); ok {
				seen[rest] = true
			}
		}
	}
	for id := range seen {
		pid, err := strconv.Atoi(id)
		if err != nil {
			continue
		}
		dir := filepath.Join(baseDir(), id)
		owner, _ := os.ReadFile(filepath.Join(dir, "owner"))
		if st, err := startTime(pid); err == nil && (len(owner) == 0 || st == string(owner)) {
			continue // its owner lives (or is starting it): not stale
		}
		var h *holder
		if data, err := os.ReadFile(filepath.Join(dir, "holder.pid")); err == nil {
			if n, err := strconv.Atoi(strings.TrimSpace(string(data))); err == nil && isOurs(n, dir) {
				h = &holder{unsharePID: n}
			}
		}
		if err := teardown(id, dir, h); err != nil {
			fmt.Fprintf(os.Stderr, "k8stest: removing the stale cluster %s: %v\n", dir, err)
		}
	}
}

// isOurs says whether pid is the holder of the cluster in dir (not a pid
// reused since by some other process).
func isOurs(pid int, dir string) bool {
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return err == nil && bytes.HasPrefix(cmdline, []byte("unshare\x00")) && bytes.HasSuffix(cmdline, []byte("\x00"+dir+"\x00"))
}

// startTime is a process's start time (field 22 of /proc/PID/stat), which
// with its pid names it uniquely.
func startTime(pid int) (string, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", err
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return "", fmt.Errorf("unexpected /proc/%d/stat", pid)
	}
	fields := strings.Fields(s[i+1:])
	if len(fields) < 20 {
		return "", fmt.Errorf("unexpected /proc/%d/stat", pid)
	}
	return fields[19], nil
}
