package k8stest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/bottlefile/bottlefile/internal/nsfixture"
)

// Addresses and names inside the cluster. The pod and service ranges
// exist only in the node's network namespace; the link's /24 is the one
// range the host sees, picked free per cluster.
const (
	linkPrefix  = "10.232" // the node link is linkPrefix.N.0/24
	podCIDR     = "10.244.0.0/24"
	clusterCIDR = "10.244.0.0/16"
	serviceCIDR = "10.96.0.0/16"
	apiService  = "10.96.0.1"
	nodeName    = "k8stest-node"
	busyboxRepo = "bottlefile-test/busybox"
)

// components are the binaries build.sh makes.
var components = []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet", "kube-proxy", "kubectl", "kube-router"}

// programs the cluster runs from the machine, with the Debian package
// that has each.
var programs = [][2]string{
	{"unshare", "util-linux"},
	{"nsenter", "util-linux"},
	{"ip", "iproute2"},
	{"etcd", "etcd-server"},
	{"containerd", "containerd"},
	{"containerd-shim-runc-v2", "containerd"},
	{"ctr", "containerd"},
	{"runc", "runc"},
	{"iptables", "iptables"},
	{"ipset", "ipset"},
	{"docker-registry", "docker-registry"},
	{"/usr/lib/cni/bridge", "containernetworking-plugins"},
}

// vethName is the host's end of cluster id's link.
func vethName(id string) string { return "bfk8s" + id }

// chainsWait bounds the wait for kube-proxy's and kube-router's chains:
// kube-proxy's first sync can lose a race with kube-router's first
// rewrite of the filter table ("Chain 'KUBE-EXTERNAL-SERVICES' does not
// exist"), and twice, at load 5 to 16, it then made no KUBE-SERVICES
// chain in 10 minutes; one start took over 3 minutes and got there.
const chainsWait = 4 * time.Minute

// errNoChains is a start that did not get the chains within chainsWait.
var errNoChains = errors.New("the iptables chains did not come")

// startAgain is start, and once more after a start that did not get the
// iptables chains: a new cluster does (start tears the first one down).
func startAgain(start func() (*Cluster, error)) (*Cluster, error) {
	c, err := start()
	if errors.Is(err, errNoChains) {
		fmt.Fprintf(os.Stderr, "k8stest: %s; starting a new cluster\n", strings.SplitN(err.Error(), "\n", 2)[0])
		c, err = start()
	}
	return c, err
}

func start() (c *Cluster, err error) {
	t0 := time.Now()
	if runtime.GOOS != "linux" {
		return nil, errors.New("it needs Linux")
	}
	if err := waitBuild(); err != nil {
		return nil, err
	}
	bin := BinDir()
	images := filepath.Join(CacheDir(), "images")
	var missing []string
	for _, b := range components {
		if _, err := os.Stat(filepath.Join(bin, b)); err != nil {
			missing = append(missing, b)
		}
	}
	for _, f := range []string{"pause.tar", "busybox.tar", "pause-root/pause"} {
		if _, err := os.Stat(filepath.Join(images, f)); err != nil {
			missing = append(missing, "images/"+f)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%w (missing in %s: %s)", errNotBuilt, CacheDir(), strings.Join(missing, ", "))
	}
	if err := nsfixture.Preflight(programs); err != nil {
		return nil, err
	}
	removeStale()

	id, dir, err := kind.Claim()
	if err != nil {
		return nil, err
	}
	c = &Cluster{
		Dir:      dir,
		NodeName: nodeName,
		BinDir:   bin,
		id:       id,
	}
	if err := os.MkdirAll(filepath.Join(c.Dir, "log"), 0o755); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			err = fmt.Errorf("%w%s", err, c.logTails())
			teardown(c.id, c.Dir, c.procs())
			c = nil
		}
	}()
	if err := makeCgroups(id); err != nil {
		return c, err
	}

	// The namespaces, and the link to them under the lock that picks a
	// free /24.
	if c.holder, err = spawnHolder(c.Dir, filepath.Join(images, "pause-root", "pause"), id); err != nil {
		return c, err
	}
	if err := c.link(); err != nil {
		return c, err
	}
	c.Server = "https://" + net.JoinHostPort(c.NodeIP, "6443")
	c.Registry = net.JoinHostPort(c.NodeIP, "5000")
	c.RegistryURL = "http://" + c.Registry
	c.ContainerdSocket = filepath.Join(c.Dir, "containerd", "containerd.sock")
	c.Busybox = c.Registry + "/" + busyboxRepo + ":1"
	c.Pause = "docker.io/local/pause:1"
	if err := c.holder.release(nodeName, c.NodeIP, serviceCIDR); err != nil {
		return c, err
	}

	p, err := c.writeFiles()
	if err != nil {
		return c, err
	}
	if err := c.startControlPlane(); err != nil {
		return c, err
	}
	// Up in 10-20 s on a quiet machine; CI starts up to four clusters while
	// the other packages' tests load both cores, and one took over 3
	// minutes to get kube-proxy's chains in place: a generous bound, so a
	// slow start is not a failure and a dead one still is (alive()).
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	// The images, while the API server starts: the node's containerd has
	// them before the kubelet asks for a sandbox.
	if err := c.waitFor(ctx, "the node's containerd", func() error { _, err := c.Ctr("version"); return err }); err != nil {
		return c, err
	}
	for _, tar := range []string{"pause.tar", "busybox.tar"} {
		if _, err := c.Ctr("images", "import", filepath.Join(images, tar)); err != nil {
			return c, err
		}
	}
	if _, err := c.Ctr("images", "tag", "--force", "docker.io/local/busybox:1", c.Busybox); err != nil {
		return c, err
	}
	if err := c.startDaemon("kubelet", filepath.Join(bin, "kubelet"), "--config="+filepath.Join(c.Dir, "kubelet", "config.yaml"),
		"--kubeconfig="+filepath.Join(c.Dir, "kubelet.kubeconfig"), "--root-dir="+filepath.Join(c.Dir, "kubelet", "root"),
		"--hostname-override="+nodeName, "--node-ip="+c.NodeIP, "--v=1"); err != nil {
		return c, err
	}

	api, err := p.client()
	if err != nil {
		return c, err
	}
	if err := c.waitFor(ctx, "the API server's /readyz", func() error { return get(ctx, api, c.Server+"/readyz", nil) }); err != nil {
		return c, err
	}
	if err := c.startControllers(); err != nil {
		return c, err
	}
	// kube-proxy and kube-router read the node object at start.
	var node nodeStatus
	if err := c.waitFor(ctx, "the node to register", func() error {
		return get(ctx, api, c.Server+"/api/v1/nodes/"+nodeName, &node)
	}); err != nil {
		return c, err
	}
	if err := c.startAddons(ctx); err != nil {
		return c, err
	}
	if err := c.waitFor(ctx, "the busybox image in the registry", func() error {
		_, err := c.Ctr("images", "push", "--plain-http", c.Busybox)
		return err
	}); err != nil {
		return c, err
	}
	if err := c.waitFor(ctx, "the node to be Ready", func() error {
		if err := get(ctx, api, c.Server+"/api/v1/nodes/"+nodeName, &node); err != nil {
			return err
		}
		return node.ready()
	}); err != nil {
		return c, err
	}
	cctx, ccancel := context.WithTimeout(ctx, chainsWait)
	defer ccancel()
	if err := c.waitFor(cctx, "kube-proxy's and kube-router's iptables chains", func() error {
		nat, err := c.InNode("iptables-save", "-t", "nat")
		if err != nil {
			return err
		}
		filter, err := c.InNode("iptables-save", "-t", "filter")
		if err != nil {
			return err
		}
		if !strings.Contains(nat, ":KUBE-SERVICES") {
			return errors.New("no KUBE-SERVICES chain yet")
		}
		if !strings.Contains(filter, ":KUBE-ROUTER-") {
			return errors.New("no KUBE-ROUTER chains yet")
		}
		return nil
	}); err != nil {
		if cctx.Err() != nil && ctx.Err() == nil {
			err = fmt.Errorf("%w: %v", errNoChains, err)
		}
		return c, err
	}
	if err := c.waitFor(ctx, "the default namespace's ServiceAccount", func() error {
		return get(ctx, api, c.Server+"/api/v1/namespaces/default/serviceaccounts/default", nil)
	}); err != nil {
		return c, err
	}
	c.StartTime = time.Since(t0)
	return c, nil
}

// link picks a /24 of 10.232.0.0/16 that no address or route of the host
// touches, under a lock every cluster's start takes, and makes the veth
// pair: the host's end NODE.254, the node's eth0 (addressed by the
// holder) NODE.1.
func (c *Cluster) link() error {
	if err := os.MkdirAll(kind.BaseDir(), 0o755); err != nil {
		return err
	}
	unlock, err := lockFile(filepath.Join(kind.BaseDir(), "link.lock"))
	if err != nil {
		return err
	}
	defer unlock()
	out, err := exec.Command("ip", "-4", "-o", "route", "show", "table", "all").CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip route: %v: %s", err, out)
	}
	addrs, err := exec.Command("ip", "-4", "-o", "addr", "show").CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip addr: %v: %s", err, addrs)
	}
	used := func(n int) bool {
		_, block, _ := net.ParseCIDR(fmt.Sprintf("%s.%d.0/24", linkPrefix, n))
		for _, f := range strings.Fields(string(out) + " " + string(addrs)) {
			if ip, pfx, err := net.ParseCIDR(f); err == nil {
				if block.Contains(ip) || pfx.Contains(block.IP) {
					return true
				}
			} else if ip := net.ParseIP(f); ip != nil && block.Contains(ip) {
				return true
			}
		}
		return false
	}
	n := -1
	for _, i := range rand.Perm(254) {
		if !used(i + 1) {
			n = i + 1
			break
		}
	}
	if n < 0 {
		return fmt.Errorf("no free /24 in %s.0.0/16 on this host", linkPrefix)
	}
	c.subnet = n
	c.NodeIP = fmt.Sprintf("%s.%d.1", linkPrefix, n)
	c.HostIP = fmt.Sprintf("%s.%d.254", linkPrefix, n)
	veth := vethName(c.id)
	batch := fmt.Sprintf("link add %s type veth peer name eth0 netns %d\naddr add %s/24 dev %s\nlink set %s up\n",
		veth, c.holder.PID, c.HostIP, veth, veth)
	cmd := exec.Command("ip", "-batch", "-")
	cmd.Stdin = strings.NewReader(batch)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("making the link %s: %v: %s", veth, err, out)
	}
	return nil
}

// writeFiles writes the certificates, kubeconfigs and the daemons'
// configurations, and the admin kubeconfig the tests use.
func (c *Cluster) writeFiles() (*pki, error) {
	p, err := newPKI(filepath.Join(c.Dir, "pki"))
	if err != nil {
		return nil, err
	}
	c.CAFile = p.path("ca.crt")
	serial := int64(2)
	next := func() int64 { serial++; return serial }
	if _, _, err := p.sign(cert{name: "apiserver", cn: "kube-apiserver", server: true,
		dns: []string{"kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local", "localhost"},
		ips: []string{"127.0.0.1", c.NodeIP, apiService}}, next()); err != nil {
		return nil, err
	}
	if _, _, err := p.sign(cert{name: "kubelet-serving", cn: nodeName, server: true, dns: []string{nodeName}, ips: []string{c.NodeIP}}, next()); err != nil {
		return nil, err
	}
	if _, _, err := p.sign(cert{name: "apiserver-kubelet-client", cn: "kube-apiserver-kubelet-client", org: "system:masters"}, next()); err != nil {
		return nil, err
	}
	clients := []cert{
		{name: "admin", cn: "admin", org: "system:masters"},
		{name: "kcm", cn: "system:kube-controller-manager"},
		{name: "scheduler", cn: "system:kube-scheduler"},
		{name: "kubelet", cn: "system:node:" + nodeName, org: "system:nodes"},
	}
	for _, cl := range clients {
		crt, key, err := p.sign(cl, next())
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(c.Dir, cl.name+".kubeconfig"), p.kubeconfig(c.Server, cl.cn, crt, key), 0o600); err != nil {
			return nil, err
		}
	}
	c.Kubeconfig = filepath.Join(c.Dir, "admin.kubeconfig")
	if err := p.serviceAccountKeys(); err != nil {
		return nil, err
	}
	files := map[string]string{
		"containerd/config.toml":       c.containerdConfig(),
		"cni/net.d/10-bridge.conflist": cniConfig(c.Dir),
		"kubelet/config.yaml":          c.kubeletConfig(),
		"registry/config.yml":          nsfixture.RegistryConfig(filepath.Join(c.Dir, "registry", "data"), c.Registry),
	}
	for name, data := range files {
		path := filepath.Join(c.Dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// startControlPlane starts etcd, the node's containerd, the registry and
// the API server at once: each waits for what it needs by itself.
func (c *Cluster) startControlPlane() error {
	pk := func(f string) string { return filepath.Join(c.Dir, "pki", f) }
	bin := func(n string) string { return filepath.Join(c.BinDir, n) }
	daemons := [][]string{
		{"etcd", "etcd", "--name", "k8stest", "--data-dir", filepath.Join(c.Dir, "etcd"),
			"--listen-client-urls", "http://127.0.0.1:2379", "--advertise-client-urls", "http://127.0.0.1:2379",
			"--listen-peer-urls", "http://127.0.0.1:2380", "--initial-advertise-peer-urls", "http://127.0.0.1:2380",
			"--initial-cluster", "k8stest=http://127.0.0.1:2380", "--quota-backend-bytes", "1073741824",
			"--unsafe-no-fsync", "--log-level", "warn"},
		{"containerd", "containerd", "--config", filepath.Join(c.Dir, "containerd", "config.toml")},
		{"registry", "docker-registry", "serve", filepath.Join(c.Dir, "registry", "config.yml")},
		{"kube-apiserver", bin("kube-apiserver"), "--etcd-servers=http://127.0.0.1:2379",
			"--bind-address=0.0.0.0", "--secure-port=6443", "--advertise-address=" + c.NodeIP,
			"--tls-cert-file=" + pk("apiserver.crt"), "--tls-private-key-file=" + pk("apiserver.key"),
			"--client-ca-file=" + pk("ca.crt"),
			"--kubelet-client-certificate=" + pk("apiserver-kubelet-client.crt"),
			"--kubelet-client-key=" + pk("apiserver-kubelet-client.key"),
			"--kubelet-preferred-address-types=InternalIP",
			"--service-account-key-file=" + pk("sa.pub"), "--service-account-signing-key-file=" + pk("sa.key"),
			"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
			"--service-cluster-ip-range=" + serviceCIDR, "--authorization-mode=Node,RBAC",
			"--enable-admission-plugins=NodeRestriction", "--allow-privileged=true"},
	}
	for _, d := range daemons {
		if err := c.startDaemon(d[0], d[1:]...); err != nil {
			return err
		}
	}
	return nil
}

// startControllers starts the controller manager and the scheduler, once
// the API server is ready: before its RBAC roles exist they exit.
func (c *Cluster) startControllers() error {
	pk := func(f string) string { return filepath.Join(c.Dir, "pki", f) }
	kc := func(n string) string { return filepath.Join(c.Dir, n+".kubeconfig") }
	bin := func(n string) string { return filepath.Join(c.BinDir, n) }
	daemons := [][]string{
		{"kube-controller-manager", bin("kube-controller-manager"), "--kubeconfig=" + kc("kcm"),
			"--authentication-kubeconfig=" + kc("kcm"), "--authorization-kubeconfig=" + kc("kcm"),
			"--bind-address=127.0.0.1", "--leader-elect=false", "--use-service-account-credentials=true",
			"--service-account-private-key-file=" + pk("sa.key"), "--root-ca-file=" + pk("ca.crt"),
			"--cluster-signing-cert-file=" + pk("ca.crt"), "--cluster-signing-key-file=" + pk("ca.key"),
			"--allocate-node-cidrs=true", "--cluster-cidr=" + clusterCIDR, "--node-cidr-mask-size=24",
			"--service-cluster-ip-range=" + serviceCIDR,
			// its default, /usr/libexec/kubernetes/..., would be made on the host
			"--flex-volume-plugin-dir=" + filepath.Join(c.Dir, "kubelet", "volume-plugins")},
		{"kube-scheduler", bin("kube-scheduler"), "--kubeconfig=" + kc("scheduler"),
			"--authentication-kubeconfig=" + kc("scheduler"), "--authorization-kubeconfig=" + kc("scheduler"),
			"--bind-address=127.0.0.1", "--leader-elect=false"},
	}
	for _, d := range daemons {
		if err := c.startDaemon(d[0], d[1:]...); err != nil {
			return err
		}
	}
	return nil
}

// startAddons starts kube-router with only its NetworkPolicy firewall,
// then, once its chains are in the filter table, kube-proxy (iptables
// mode: no IPVS in this kernel): started together, kube-proxy's first
// sync could lose a race with kube-router's first rewrite of the filter
// table and then make no chains for minutes (chainsWait).
func (c *Cluster) startAddons(ctx context.Context) error {
	kc := filepath.Join(c.Dir, "admin.kubeconfig")
	if err := c.startDaemon("kube-router", filepath.Join(c.BinDir, "kube-router"), "--kubeconfig="+kc,
		"--hostname-override="+nodeName, "--run-firewall=true", "--run-router=false",
		"--run-service-proxy=false", "--enable-cni=false", "--enable-ipv6=false", "--health-port=20244"); err != nil {
		return err
	}
	if err := c.waitFor(ctx, "kube-router's iptables chains", func() error {
		filter, err := c.InNode("iptables-save", "-t", "filter")
		if err != nil {
			return err
		}
		if !strings.Contains(filter, ":KUBE-ROUTER-") {
			return errors.New("no KUBE-ROUTER chains yet")
		}
		return nil
	}); err != nil {
		return err
	}
	return c.startDaemon("kube-proxy", filepath.Join(c.BinDir, "kube-proxy"), "--kubeconfig="+kc,
		"--hostname-override="+nodeName, "--cluster-cidr="+clusterCIDR, "--proxy-mode=iptables",
		// the conntrack table's size is the host's (read-only outside its
		// network namespace), and its timeouts are left alone
		"--conntrack-max-per-core=0", "--conntrack-tcp-timeout-established=0", "--conntrack-tcp-timeout-close-wait=0",
		"--metrics-bind-address=127.0.0.1:10249", "--healthz-bind-address=127.0.0.1:10256")
}

// containerdConfig: a private containerd. restrict_oom_score_adj because
// this machine's root lacks CAP_SYS_RESOURCE (runc cannot give the pause
// container the negative oom_score_adj the CRI asks for); the registry is
// a plain-HTTP mirror of itself.
func (c *Cluster) containerdConfig() string {
	d := filepath.Join(c.Dir, "containerd")
	return fmt.Sprintf(`version = 2
root = "%[1]s/root"
state = "%[1]s/state"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs"]
[grpc]
  address = "%[1]s/containerd.sock"
[ttrpc]
  address = "%[1]s/containerd.sock.ttrpc"
[plugins."io.containerd.internal.v1.opt"]
  path = "%[1]s/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "local/pause:1"
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "%[1]s/runc"
  [plugins."io.containerd.grpc.v1.cri".registry.mirrors."%[2]s"]
    endpoint = ["http://%[2]s"]
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "%[3]s/cni/net.d"
`, d, c.Registry, c.Dir)
}

// cniConfig: one bridge for the Pods; isDefaultGateway, or Pods cannot
// reach Service addresses.
func cniConfig(dir string) string {
	return fmt.Sprintf(`{"cniVersion":"0.4.0","name":"k8stest-pods","plugins":[
 {"type":"bridge","bridge":"cni0","isGateway":true,"isDefaultGateway":true,"ipMasq":false,"hairpinMode":true,
  "ipam":{"type":"host-local","ranges":[[{"subnet":"%s"}]],"dataDir":"%s/cni/ipam"}},
 {"type":"portmap","capabilities":{"portMappings":true}}]}
`, podCIDR, dir)
}

// kubeletConfig: cgroupfs under the cluster's cgroup root; the paths the
// kubelet would otherwise make on the host are under the cluster's
// directory; image GC never runs (the tests' images stay).
func (c *Cluster) kubeletConfig() string {
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: %[1]s/pki/ca.crt}
authorization: {mode: Webhook}
tlsCertFile: %[1]s/pki/kubelet-serving.crt
tlsPrivateKeyFile: %[1]s/pki/kubelet-serving.key
cgroupDriver: cgroupfs
cgroupRoot: /%[2]s
containerRuntimeEndpoint: unix://%[1]s/containerd/containerd.sock
podLogsDir: %[1]s/podlogs
volumePluginDir: %[1]s/kubelet/volume-plugins
resolvConf: ""
failSwapOn: false
healthzBindAddress: 127.0.0.1
readOnlyPort: 0
serializeImagePulls: false
evictionHard: {memory.available: "100Mi", nodefs.available: "1%%", imagefs.available: "1%%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
`, c.Dir, kind.CgroupName(c.id))
}

// startDaemon starts a daemon in the cluster's namespaces, in its
// daemons cgroup, logging to log/NAME.log.
func (c *Cluster) startDaemon(name string, args ...string) error {
	logf, err := os.Create(filepath.Join(c.Dir, "log", name+".log"))
	if err != nil {
		return err
	}
	defer logf.Close()
	procs := filepath.Join(nsfixture.CgroupRoot, "pids", kind.CgroupName(c.id), "daemons", "cgroup.procs")
	cmd := c.holder.command(append([]string{"sh", "-c", `echo 0 > "$0" && exec "$@"`, procs}, args...)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Dir = c.Dir
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", name, err)
	}
	d := &daemon{name: name, done: make(chan struct{})}
	go func() { cmd.Wait(); close(d.done) }()
	c.daemons = append(c.daemons, d)
	return nil
}

// daemon is one of the cluster's daemons, as nsenter started it.
type daemon struct {
	name string
	done chan struct{} // closed when it has exited
}

// alive says which of the cluster's processes has died.
func (c *Cluster) alive() error {
	if c.holder != nil {
		select {
		case <-c.holder.Done:
			return errors.New("the namespaces' first process exited")
		default:
		}
	}
	for _, d := range c.daemons {
		select {
		case <-d.done:
			return fmt.Errorf("%s exited:\n%s", d.name, c.Log(d.name, 15))
		default:
		}
	}
	return nil
}

// waitFor polls try every 100 ms until it succeeds, ctx ends, or one of
// the cluster's processes dies.
func (c *Cluster) waitFor(ctx context.Context, what string, try func() error) error {
	if err := nsfixture.Poll(ctx, 100*time.Millisecond, try, c.alive); err != nil {
		return fmt.Errorf("waiting for %s: %w", what, err)
	}
	return nil
}

// logTails is the end of every log of the cluster, for a start that
// failed.
func (c *Cluster) logTails() string {
	logs, _ := filepath.Glob(filepath.Join(c.Dir, "log", "*.log"))
	return nsfixture.LogTails(append(logs, filepath.Join(c.Dir, "holder.log")))
}

// client is an HTTP client of the API server with the admin's
// certificate.
func (p *pki) client() (*http.Client, error) {
	pool := x509.NewCertPool()
	pool.AddCert(p.caCert)
	crt, err := tls.LoadX509KeyPair(p.path("admin.crt"), p.path("admin.key"))
	if err != nil {
		return nil, err
	}
	return &http.Client{
		Timeout:   5 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{crt}}},
	}, nil
}

// get GETs url and decodes its JSON into v (if not nil); a status other
// than 200 is an error.
func get(ctx context.Context, cli *http.Client, url string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := cli.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", url, resp.Status, strings.TrimSpace(string(body)))
	}
	if v == nil {
		return nil
	}
	return json.Unmarshal(body, v)
}

// nodeStatus is what start reads of the node object.
type nodeStatus struct {
	Status struct {
		Conditions []struct {
			Type, Status, Reason, Message string
		} `json:"conditions"`
	} `json:"status"`
}

func (n nodeStatus) ready() error {
	for _, cond := range n.Status.Conditions {
		if cond.Type == "Ready" {
			if cond.Status == "True" {
				return nil
			}
			return fmt.Errorf("node not Ready: %s: %s", cond.Reason, cond.Message)
		}
	}
	return errors.New("node has no Ready condition yet")
}

// waitBuild waits while build.sh runs (it holds its lock), so a test run
// started beside the build uses what it builds.
func waitBuild() error {
	path := filepath.Join(CacheDir(), "build.lock")
	f, err := os.Open(path)
	if err != nil {
		return nil // no build has run here
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB); err == nil {
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		return nil
	}
	fmt.Fprintf(os.Stderr, "k8stest: %s is running (%s is locked): waiting for it\n", BuildHint, path)
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH); err != nil {
		return err
	}
	syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return nil
}

// lockFile takes an exclusive lock shared by every process on the
// machine, waiting for it, and returns its release.
func lockFile(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}
