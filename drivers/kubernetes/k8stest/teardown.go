package k8stest

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/bottlefile/bottlefile/internal/nsfixture"
)

// makeCgroups makes cluster id's cgroup in every v1 hierarchy (the
// kubelet's cgroupRoot must exist in each; cpuset's needs its cpus and
// mems set before anything joins it), and its daemons cgroup in pids.
func makeCgroups(id string) error {
	hs, err := os.ReadDir(nsfixture.CgroupRoot)
	if err != nil {
		return err
	}
	for _, h := range hs {
		if h.Name() == "unified" {
			continue
		}
		if _, err := os.Stat(filepath.Join(nsfixture.CgroupRoot, h.Name(), "cgroup.procs")); err != nil {
			continue // not a hierarchy
		}
		if err := os.Mkdir(filepath.Join(nsfixture.CgroupRoot, h.Name(), kind.CgroupName(id)), 0o755); err != nil {
			return err
		}
	}
	for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
		v, err := os.ReadFile(filepath.Join(nsfixture.CgroupRoot, "cpuset", f))
		if err != nil {
			continue // no cpuset hierarchy
		}
		if err := os.WriteFile(filepath.Join(nsfixture.CgroupRoot, "cpuset", kind.CgroupName(id), f), v, 0o644); err != nil {
			return err
		}
	}
	return os.Mkdir(filepath.Join(nsfixture.CgroupRoot, "pids", kind.CgroupName(id), "daemons"), 0o755)
}

// teardown kills cluster id's processes by PID: the holder (whose death
// kills its PID namespace, with every daemon, shim and container), then
// whatever is left in its cgroups. It then removes the cgroups, the
// directory and the host's veth end.
func teardown(id, dir string, procs []*nsfixture.Proc) error {
	errs := []error{kind.Teardown(id, dir, procs)}
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
	return errors.Join(errs...)
}

// procs are the cluster's namespaces' first processes: its holder.
func (c *Cluster) procs() []*nsfixture.Proc {
	if c.holder == nil {
		return nil
	}
	return []*nsfixture.Proc{c.holder.Proc}
}

// removeStale tears down the clusters whose owner is gone (a test process
// killed before it could stop its cluster), found by their names: the
// directories under the base directory, the cgroups bottlefile-k8s-PID,
// the host's veth ends bfk8sPID.
func removeStale() {
	var links []string
	if ifs, err := net.Interfaces(); err == nil {
		for _, i := range ifs {
			if rest, ok := strings.CutPrefix(i.Name, vethName("")); ok {
				links = append(links, rest)
			}
		}
	}
	kind.RemoveStale(links, teardown)
}
