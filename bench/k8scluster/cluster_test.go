// Package k8scluster holds the test cluster for bench/kubernetes.sh: the
// k8stest cluster dies with the process that started it, so the script
// runs this test in the background for as long as its rounds take.
//
//	BOTTLEFILE_BENCH_CLUSTER=/tmp/info go test -count=1 -timeout=0 -run TestBenchCluster ./bench/k8scluster/
//
// writes the cluster's kubeconfig, registry, busybox image and kubectl to
// the info file (shell assignments, written whole once the node is Ready)
// and holds the cluster until the file is removed or the process gets
// SIGINT or SIGTERM. Without the variable the test skips.
package k8scluster

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bottlefile/bottlefile/drivers/kubernetes/k8stest"
)

// infoEnv names the file the cluster's facts go to.
const infoEnv = "BOTTLEFILE_BENCH_CLUSTER"

func TestMain(m *testing.M) { os.Exit(k8stest.Main(m)) }

func TestBenchCluster(t *testing.T) {
	info := os.Getenv(infoEnv)
	if info == "" {
		t.Skipf("%s is not set: this test only holds a cluster for bench/kubernetes.sh", infoEnv)
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sig)
	c := k8stest.Start(t)
	if err := writeInfo(info, c); err != nil {
		t.Fatal(err)
	}
	t.Logf("cluster up in %.1fs; holding it until %s is removed", c.StartTime.Seconds(), info)
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case s := <-sig:
			t.Logf("%v: tearing the cluster down", s)
			return
		case <-tick.C:
			if _, err := os.Stat(info); errors.Is(err, os.ErrNotExist) {
				return
			}
		}
	}
}

// writeInfo writes the cluster's facts as shell assignments, through a
// temporary file renamed into place: the script reads it once it exists.
func writeInfo(path string, c *k8stest.Cluster) error {
	var b strings.Builder
	for _, kv := range [][2]string{
		{"K8S_KUBECONFIG", c.Kubeconfig},
		{"K8S_REGISTRY", c.Registry},
		{"K8S_BUSYBOX", c.Busybox},
		{"K8S_NODE", c.NodeName},
		{"K8S_CONTAINERD", c.ContainerdSocket},
		{"K8S_KUBECTL", filepath.Join(c.BinDir, "kubectl")},
		{"K8S_DIR", c.Dir},
		{"K8S_START", fmt.Sprintf("%.1f", c.StartTime.Seconds())},
	} {
		fmt.Fprintf(&b, "%s='%s'\n", kv[0], strings.ReplaceAll(kv[1], "'", `'\''`))
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(b.String()), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
