// Package k8stest runs a real single-node Kubernetes (v1.34.4) for tests,
// on one Linux machine, offline: etcd, kube-apiserver, -controller-manager,
// -scheduler, a kubelet on a containerd of its own, kube-proxy (iptables:
// Services), kube-router's firewall (NetworkPolicy) and a registry
// (Debian's docker-registry), all in network, mount, UTS and PID
// namespaces of their own. There is no CoreDNS: names of Services do not
// resolve in Pods (the kubernetes driver resolves what it needs itself).
//
// A test package starts the cluster at most once, when its first test
// asks, and stops it when the package's tests end:
//
//	func TestMain(m *testing.M) { os.Exit(k8stest.Main(m)) }
//
//	func TestX(t *testing.T) {
//		c := k8stest.Start(t) // skips, or fails with BOTTLEFILE_REQUIRE_KUBERNETES=1
//		// c.Kubeconfig: a kubeconfig file this process uses (cluster admin)
//		// c.Busybox:    an image Pods run, pulled or already on the node
//		out, err := c.Kubectl("get", "nodes")
//		...
//	}
//
// What the cluster gives a test:
//   - Kubeconfig, Server, CAFile: the API server as this process reaches
//     it. The node's network namespace has a veth pair to the host's:
//     the host end is HostIP (NODE.254), the node's NodeIP (NODE.1), on a
//     /24 of 10.232.0.0/16 picked free at start (10.232.N.0/24), so the
//     clusters of two test processes never collide.
//   - Registry ("10.232.N.1:5000"): plain HTTP, reached by the same
//     address from this process (ctr push --plain-http, net/http) and from
//     the node's containerd (a mirror entry says http), so a Pod's image
//     can name it.
//   - NodeName, and the node's containerd: ContainerdSocket (a path under
//     Dir, usable from the host: ctr -a SOCKET -n k8s.io ...) and
//     ContainerdNamespace ("k8s.io", the CRI's).
//   - Busybox: Registry/bottlefile-test/busybox:1, imported into the
//     node's containerd and pushed to the registry, so Pods run it with
//     imagePullPolicy IfNotPresent and Always alike. Pause is the sandbox
//     image, on the node only.
//
// A new namespace gets its "default" ServiceAccount from the controller
// manager a moment after it is made; a Pod created before that is refused
// ("serviceaccount default not found"), as on any cluster.
//
// The binaries come from build.sh beside this file, into a cache outside
// the clone (BOTTLEFILE_K8S_CACHE, default ~/.cache/bottlefile/k8s-1.34.4);
// when they are missing Start skips ("kubernetes binaries not built: run
// drivers/kubernetes/k8stest/build.sh"), or fails with
// BOTTLEFILE_REQUIRE_KUBERNETES=1. While build.sh runs (its lock is held)
// Start waits for it. The rest are Debian packages: etcd-server,
// containerd, runc, containernetworking-plugins, iptables, ipset,
// docker-registry, util-linux, iproute2.
//
// Isolation on a shared host: the first process of the cluster's
// namespaces (unshare, then the pause binary as PID 1) dies with the test
// process (a parent-death signal), and every daemon, shim and container
// lives in its PID namespace, so the kernel kills them all with it. The
// daemons and the Pods live in cgroups named bottlefile-k8s-PID (the
// kubelet's cgroupRoot). In the mount namespace /run, /var/lib and
// /var/log are the cluster's own, and the kernel settings the kubelet
// would otherwise rewrite on the whole host (vm.overcommit_memory,
// kernel.panic, ...) are read-only files that already hold its values:
// the host's stay as they were. The containerd is a private one (its own
// config, root, state and socket), never the system's or Docker's.
// Teardown kills by PID, then removes the cgroups, the host's veth end
// (bfk8sPID) and the directory; what a killed test process left (its
// directory, cgroups, veth) is found by those names and removed by the
// next Start.
package k8stest

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bottlefile/bottlefile/internal/nsfixture"
)

// RequireEnv names the environment variable that turns a cluster that
// cannot start from a skip into a failure ("1"), for CI.
const RequireEnv = "BOTTLEFILE_REQUIRE_KUBERNETES"

// CacheEnv names the environment variable that moves the build cache.
const CacheEnv = "BOTTLEFILE_K8S_CACHE"

// Version is the Kubernetes release the fixture builds and runs.
const Version = "1.34.4"

// ContainerdNamespace is the containerd namespace the CRI (and so every
// Pod's image and container) lives in.
const ContainerdNamespace = "k8s.io"

// BuildHint is what to run when the binaries are missing.
const BuildHint = "drivers/kubernetes/k8stest/build.sh"

// Cluster is a running single-node cluster.
type Cluster struct {
	// Dir holds the cluster's data, sockets, certificates and logs
	// (log/NAME.log).
	Dir string
	// Kubeconfig is a kubeconfig file with the cluster's admin
	// (system:masters) credentials and Server, for this process.
	Kubeconfig string
	// Server is the API server's URL: https://NodeIP:6443.
	Server string
	// CAFile is the cluster's CA certificate (PEM), which signed the API
	// server's certificate.
	CAFile string
	// NodeName is the one node's name.
	NodeName string
	// NodeIP is the node's address; HostIP is the host's end of the link.
	NodeIP, HostIP string
	// Registry is the registry's address (host:port, plain HTTP), the same
	// from this process and from the node's containerd; RegistryURL is its
	// HTTP API.
	Registry, RegistryURL string
	// ContainerdSocket is the node containerd's socket, a path this
	// process can dial; its CRI's namespace is ContainerdNamespace.
	ContainerdSocket string
	// Busybox is the busybox image Pods run (on the node and in the
	// registry); Pause is the sandbox image (on the node only).
	Busybox, Pause string
	// BinDir holds the Kubernetes binaries (kubectl among them).
	BinDir string
	// StartTime is how long Start took to bring the cluster up.
	StartTime time.Duration

	id      string // the owning process's pid: names the cgroups, veth and directory
	subnet  int    // N of 10.232.N.0/24
	holder  *holder
	daemons []*daemon
}

// kind names what clusters leave on the host: their directories and
// cgroups (and veth ends, which teardown and removeStale handle). A
// cluster's cgroup is the kubelet's cgroupRoot, whose "daemons" child
// (pids hierarchy) holds the daemons.
var kind = nsfixture.Kind{Name: "k8stest", Dir: "bottlefile-k8s", Cgroup: "bottlefile-k8s-"}

// once is the cluster of this process, started by the first Start.
var once = nsfixture.Once[*Cluster]{
	Name:       "k8stest",
	What:       "the test kubernetes cluster",
	RequireEnv: RequireEnv,
	Up:         func() (*Cluster, error) { return startAgain(start) },
	Started: func(c *Cluster) string {
		return fmt.Sprintf("k8stest: node %s Ready, kube-proxy, kube-router and the registry up in %.1fs (%s, API %s)",
			c.NodeName, c.StartTime.Seconds(), c.Dir, c.Server)
	},
	Down: func(c *Cluster) error { return teardown(c.id, c.Dir, c.procs()) },
}

// Main runs the package's tests and then stops the cluster if one was
// started: call it from TestMain.
func Main(m *testing.M) int { return once.Main(m) }

// Start returns the cluster of this test process, starting it the first
// time. When it cannot start, the test is skipped, or fails when
// BOTTLEFILE_REQUIRE_KUBERNETES=1; later calls report the same error
// without trying again.
func Start(t testing.TB) *Cluster {
	t.Helper()
	return once.Start(t)
}

// Stop tears the cluster down, if one runs.
func Stop() { once.Stop() }

// CacheDir is where build.sh puts the binaries and images.
func CacheDir() string {
	if d := os.Getenv(CacheEnv); d != "" {
		return d
	}
	home, err := os.UserHomeDir()
	if err != nil {
		home = os.TempDir()
	}
	return filepath.Join(home, ".cache", "bottlefile", "k8s-"+Version)
}

// BinDir is where build.sh puts the Kubernetes binaries.
func BinDir() string { return filepath.Join(CacheDir(), "kbuild", "bin") }

// Kubectl runs the cluster's kubectl (v1.34) with its admin kubeconfig
// and returns what it printed (stdout; stderr is in the error).
func (c *Cluster) Kubectl(args ...string) (string, error) {
	return c.KubectlIn("", args...)
}

// KubectlIn is Kubectl with stdin (a manifest for "apply -f -").
func (c *Cluster) KubectlIn(stdin string, args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(c.BinDir, "kubectl"), append([]string{"--kubeconfig", c.Kubeconfig}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return out.String(), nil
}

// Ctr runs ctr against the node's containerd in the CRI's namespace
// ("ctr -a SOCKET -n k8s.io ARGS...").
func (c *Cluster) Ctr(args ...string) (string, error) {
	cmd := exec.Command("ctr", append([]string{"-a", c.ContainerdSocket, "-n", ContainerdNamespace}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("ctr %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// InNode runs a command in the node's network, mount and UTS namespaces
// (iptables-save, ip, a curl to a Pod's address) and returns its
// combined output.
func (c *Cluster) InNode(args ...string) (string, error) {
	cmd := c.holder.command(args...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("in the node: %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// Log is the end of the named daemon's log (etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler, kubelet, containerd,
// kube-proxy, kube-router, registry), for a test's failure message.
func (c *Cluster) Log(name string, lines int) string {
	data, err := os.ReadFile(filepath.Join(c.Dir, "log", name+".log"))
	if err != nil {
		return err.Error()
	}
	l := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	return strings.Join(l[max(0, len(l)-lines):], "\n")
}

// errNotBuilt says the binaries are missing, with how to build them.
var errNotBuilt = errors.New("kubernetes binaries not built: run " + BuildHint)
