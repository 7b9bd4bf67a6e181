package k8stest

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/internal/nsfixture"
)

// Cleanup registers a cleanup that removes what carries the lineage
// label from the cluster (RemoveLineage), and fails the test if any of it
// is left.
func (c *Cluster) Cleanup(t testing.TB, lineage string) {
	t.Helper()
	if lineage == "" {
		t.Fatal("k8stest.Cleanup: empty lineage would match nothing")
	}
	t.Cleanup(func() {
		if err := c.RemoveLineage(lineage); err != nil {
			t.Errorf("cleaning up lineage %s: %v", lineage, err)
		}
	})
}

// RemoveLineage deletes the namespaces labelled with the lineage
// (drivers.LabelLineage), with everything in them, and waits until they
// are gone.
func (c *Cluster) RemoveLineage(lineage string) error {
	_, err := c.Kubectl("delete", "namespaces", "-l", drivers.LabelLineage+"="+lineage, "--wait=true", "--timeout=90s")
	if err != nil {
		return err
	}
	left, err := c.LineageObjects(lineage)
	if err != nil {
		return err
	}
	if len(left) > 0 {
		return fmt.Errorf("left after the delete: %s", strings.Join(left, ", "))
	}
	return nil
}

// LineageObjects lists what carries the lineage label in the cluster, one
// "kind namespace/name" per object: namespaces, and the objects of every
// kind kubectl lists as "all" plus ConfigMaps, Secrets, NetworkPolicies
// and ServiceAccounts, in any namespace. Empty means nothing is left.
func (c *Cluster) LineageObjects(lineage string) ([]string, error) {
	sel := drivers.LabelLineage + "=" + lineage
	var out []string
	ns, err := c.Kubectl("get", "namespaces", "-l", sel, "-o", "name")
	if err != nil {
		return nil, err
	}
	out = append(out, strings.Fields(ns)...)
	objs, err := c.Kubectl("get", "all,configmaps,secrets,networkpolicies,serviceaccounts", "-A", "-l", sel,
		"-o", `jsonpath={range .items[*]}{.kind} {.metadata.namespace}/{.metadata.name}{"\n"}{end}`)
	if err != nil {
		return nil, err
	}
	for _, l := range strings.Split(strings.TrimSpace(objs), "\n") {
		if l != "" {
			out = append(out, l)
		}
	}
	return out, nil
}

// RSS is the resident memory of the cluster's processes (daemons, shims,
// Pods), in bytes, for reports.
func (c *Cluster) RSS() (int64, error) {
	var total int64
	root := filepath.Join(nsfixture.CgroupRoot, "pids", kind.CgroupName(c.id))
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != "cgroup.procs" {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, f := range strings.Fields(string(data)) {
			status, err := os.ReadFile("/proc/" + f + "/status")
			if err != nil {
				continue // exited
			}
			for _, l := range strings.Split(string(status), "\n") {
				if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
					kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
					total += kb * 1024
				}
			}
		}
		return nil
	})
	return total, err
}
