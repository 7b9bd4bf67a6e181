package nsfixture

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Teardown kills fixture id's processes by PID: procs (the namespaces'
// first processes, whose death kills their namespaces), then whatever is
// left in its pids cgroup. It then removes its cgroups in every
// hierarchy, waits for procs to exit, and removes dir (if not "").
func (k Kind) Teardown(id, dir string, procs []*Proc) error {
	for _, p := range procs {
		_ = syscall.Kill(p.PID, syscall.SIGKILL)
		if p.Child > 0 {
			_ = syscall.Kill(p.Child, syscall.SIGKILL)
		}
	}
	var errs []error
	root := filepath.Join(CgroupRoot, "pids", k.CgroupName(id))
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
	// Every hierarchy: the fixture's daemons made their containers'
	// cgroups under its cgroup in each.
	hierarchies, _ := os.ReadDir(CgroupRoot)
	for _, h := range hierarchies {
		top := filepath.Join(CgroupRoot, h.Name(), k.CgroupName(id))
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
	for _, p := range procs {
		if p.Done != nil {
			select {
			case <-p.Done:
			case <-time.After(5 * time.Second):
				errs = append(errs, fmt.Errorf("%s (pid %d) did not exit", p.Name, p.PID))
			}
		}
	}
	if dir != "" {
		if err := os.RemoveAll(dir); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// RemoveStale tears down the fixtures whose owner is gone (a test process
// killed before it could stop its fixture), found by their names: the
// directories under BaseDir, the cgroups, and the ids of more (what else
// a fixture of this kind leaves). teardown removes each, given the
// processes of its pid files that are still its unshares (IsOurs).
func (k Kind) RemoveStale(more []string, teardown func(id, dir string, procs []*Proc) error) {
	seen := map[string]bool{}
	dirs, _ := os.ReadDir(k.BaseDir())
	for _, d := range dirs {
		if d.IsDir() {
			seen[d.Name()] = true
		}
	}
	cgs, _ := filepath.Glob(filepath.Join(CgroupRoot, "*", k.CgroupName("*")))
	for _, c := range cgs {
		seen[strings.TrimPrefix(filepath.Base(c), k.CgroupName(""))] = true
	}
	for _, id := range more {
		seen[id] = true
	}
	for id := range seen {
		pid, err := strconv.Atoi(id)
		if err != nil {
			continue
		}
		dir := filepath.Join(k.BaseDir(), id)
		owner, _ := os.ReadFile(filepath.Join(dir, "owner"))
		if st, err := StartTime(pid); err == nil && (len(owner) == 0 || st == string(owner)) {
			continue // its owner lives (or is starting it): not stale
		}
		var procs []*Proc
		pids, _ := filepath.Glob(filepath.Join(dir, "*.pid"))
		for _, p := range pids {
			data, _ := os.ReadFile(p)
			if n, err := strconv.Atoi(strings.TrimSpace(string(data))); err == nil && IsOurs(n, dir) {
				procs = append(procs, &Proc{Name: strings.TrimSuffix(filepath.Base(p), ".pid"), PID: n})
			}
		}
		if err := teardown(id, dir, procs); err != nil {
			fmt.Fprintf(os.Stderr, "%s: removing the stale fixture %s: %v\n", k.Name, dir, err)
		}
	}
}
