package k8stest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	osexec "os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bottlefile/bottlefile/internal/nsfixture"
)

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) == "crash" {
		crashHelper()
		return
	}
	code := m.Run()
	c, ok := once.Current()
	t0 := time.Now()
	Stop()
	if ok {
		fmt.Printf("k8stest: teardown in %.1fs\n", time.Since(t0).Seconds())
		if left := leftovers(c.id); len(left) > 0 {
			fmt.Printf("k8stest: teardown left %s\n", strings.Join(left, ", "))
			code = 1
		}
	}
	os.Exit(code)
}

// leftovers lists what of cluster id is still on the host: its
// directory, cgroups and veth end.
func leftovers(id string) []string {
	var left []string
	if _, err := os.Stat(filepath.Join(kind.BaseDir(), id)); err == nil {
		left = append(left, "directory "+filepath.Join(kind.BaseDir(), id))
	}
	cgs, _ := filepath.Glob(filepath.Join(nsfixture.CgroupRoot, "*", kind.CgroupName(id)))
	for _, c := range cgs {
		left = append(left, "cgroup "+c)
	}
	if out, err := runCmd("ip", "-o", "link", "show", vethName(id)); err == nil && strings.Contains(out, vethName(id)) {
		left = append(left, "link "+vethName(id))
	}
	return left
}

// TestNotBuiltSkips: without the binaries, start says what to run, and
// Start turns that into a skip (the message make test prints).
func TestNotBuiltSkips(t *testing.T) {
	t.Setenv(CacheEnv, t.TempDir())
	_, err := start()
	if !errors.Is(err, errNotBuilt) {
		t.Fatalf("start() = %v, want %v", err, errNotBuilt)
	}
	if !strings.Contains(err.Error(), "kubernetes binaries not built: run drivers/kubernetes/k8stest/build.sh") ||
		!strings.Contains(err.Error(), "kube-apiserver") {
		t.Errorf("start() = %q, want it to say what to run and what is missing", err)
	}
}

// kernelSettings are the global settings the kubelet would write on the
// host: the cluster must leave them as they were.
var kernelSettings = []string{"vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops",
	"kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes"}

func readSettings(t *testing.T) map[string]string {
	m := map[string]string{}
	for _, k := range kernelSettings {
		data, err := os.ReadFile("/proc/sys/" + k)
		if err != nil {
			t.Fatal(err)
		}
		m[k] = strings.TrimSpace(string(data))
	}
	return m
}

// TestCluster: a Pod runs the busybox image and its log is read; a
// Service reaches it (kube-proxy); a NetworkPolicy that denies ingress
// holds and one that allows the client opens it again (kube-router); the
// registry serves an image pushed to it to a new Pod; the host's kernel
// settings are untouched, and the host paths the daemons would write are
// not made.
func TestCluster(t *testing.T) {
	before := readSettings(t)
	var absent []string // host paths a kubelet, CNI or kube-router would make
	for _, p := range []string{"/var/lib/kubelet", "/var/log/containers", "/var/log/pods", "/usr/libexec/kubernetes",
		"/var/lib/cni", "/etc/cni", "/var/lib/kube-router"} {
		if _, err := os.Lstat(p); os.IsNotExist(err) {
			absent = append(absent, p)
		}
	}
	// The CRI's Pod network namespaces (/run/netns/cni-*), not /run/netns
	// itself: other tests' `ip netns add` makes that directory on the
	// host, and CI runs them beside this one.
	podNetns := func() []string {
		m, _ := filepath.Glob("/run/netns/cni-*")
		return m
	}
	netnsBefore := podNetns()
	c := Start(t)
	ns := "k8stest-" + strconv.Itoa(os.Getpid())
	kubectl := func(stdin string, args ...string) string {
		t.Helper()
		out, err := c.KubectlIn(stdin, append([]string{"-n", ns}, args...)...)
		if err != nil {
			t.Fatalf("%v\n--- kubelet:\n%s", err, c.Log("kubelet", 10))
		}
		return out
	}
	step := func(name string, t0 time.Time) { t.Logf("%s: %.2fs", name, time.Since(t0).Seconds()) }

	t0 := time.Now()
	kubectl("", "create", "namespace", ns)
	t.Cleanup(func() { c.Kubectl("delete", "namespace", ns, "--wait=false") })
	eventually(t, 30*time.Second, "the namespace's ServiceAccount", func() error {
		_, err := c.Kubectl("-n", ns, "get", "serviceaccount", "default")
		return err
	})
	kubectl(pods(c.Busybox), "apply", "-f", "-")
	kubectl("", "wait", "--for=condition=Ready", "pod/web", "pod/client", "--timeout=90s")
	step("two Pods of the busybox image Ready", t0)
	if rss, err := c.RSS(); err == nil {
		t.Logf("the cluster's processes (daemons, shims, two Pods): %d MiB resident", rss>>20)
	}
	if logs := kubectl("", "logs", "web"); !strings.Contains(logs, "web-started") {
		t.Errorf("kubectl logs web = %q, want web-started", logs)
	}
	podIP := strings.TrimSpace(kubectl("", "get", "pod", "web", "-o", "jsonpath={.status.podIP}"))
	wget := func(addr string) error {
		out, err := c.Kubectl("-n", ns, "exec", "client", "--", "timeout", "3", "wget", "-q", "-O", "-", "http://"+addr+"/")
		if err == nil && !strings.Contains(out, "hello-web") {
			err = fmt.Errorf("got %q, want hello-web", out)
		}
		return err
	}
	if err := wget(podIP + ":8080"); err != nil {
		t.Fatalf("client -> web's Pod address: %v", err)
	}

	t0 = time.Now()
	kubectl("", "expose", "pod", "web", "--name", "web", "--port", "80", "--target-port", "8080")
	svcIP := strings.TrimSpace(kubectl("", "get", "service", "web", "-o", "jsonpath={.spec.clusterIP}"))
	eventually(t, 30*time.Second, "client -> the Service "+svcIP, func() error { return wget(svcIP) })
	step("Service reached", t0)

	t0 = time.Now()
	kubectl(`apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: web-deny}
spec:
  podSelector: {matchLabels: {app: web}}
  policyTypes: [Ingress]
`, "apply", "-f", "-")
	eventually(t, 30*time.Second, "the deny to hold", func() error {
		if wget(podIP+":8080") == nil {
			return errors.New("client still reaches web")
		}
		return nil
	})
	step("NetworkPolicy deny enforced", t0)
	for _, addr := range []string{podIP + ":8080", svcIP} {
		if err := wget(addr); err == nil {
			t.Errorf("client reaches web at %s through the deny", addr)
		}
	}
	t0 = time.Now()
	kubectl(`apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: web-allow-client}
spec:
  podSelector: {matchLabels: {app: web}}
  policyTypes: [Ingress]
  ingress: [{from: [{podSelector: {matchLabels: {app: client}}}], ports: [{port: 8080}]}]
`, "apply", "-f", "-")
	eventually(t, 30*time.Second, "the allow to open web to the client", func() error { return wget(podIP + ":8080") })
	step("NetworkPolicy allow enforced", t0)

	// An image pushed to the registry from this process, not on the node:
	// a new Pod pulls it.
	t0 = time.Now()
	pushed := c.Registry + "/k8stest/pushed:" + ns
	if _, err := c.Ctr("images", "tag", "--force", c.Busybox, pushed); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Ctr("images", "push", "--plain-http", pushed); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Ctr("images", "rm", pushed); err != nil {
		t.Fatal(err)
	}
	tags := httpGet(t, c.RegistryURL+"/v2/k8stest/pushed/tags/list")
	if !strings.Contains(tags, `"`+ns+`"`) {
		t.Fatalf("the registry's tags of k8stest/pushed = %s, want %s", tags, ns)
	}
	kubectl(fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: pulled}
spec:
  restartPolicy: Never
  containers:
  - {name: c, image: %q, imagePullPolicy: IfNotPresent, command: [echo, pulled-ok]}
`, pushed), "apply", "-f", "-")
	kubectl("", "wait", "--for=jsonpath={.status.phase}=Succeeded", "pod/pulled", "--timeout=60s")
	if logs := kubectl("", "logs", "pulled"); !strings.Contains(logs, "pulled-ok") {
		t.Errorf("kubectl logs pulled = %q, want pulled-ok", logs)
	}
	if out, _ := c.Ctr("images", "ls", "-q", "name=="+pushed); !strings.Contains(out, pushed) {
		t.Errorf("the node has no %s after the Pod ran (ctr images ls: %q)", pushed, out)
	}
	events := kubectl("", "get", "events", "--field-selector", "involvedObject.name=pulled", "-o", "jsonpath={.items[*].reason}")
	if !strings.Contains(events, "Pulled") {
		t.Errorf("the Pod's events are %q, want Pulled", events)
	}
	step("pushed image pulled by a new Pod", t0)

	if after := readSettings(t); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("the host's kernel settings changed: %v, were %v", after, before)
	}
	for _, p := range absent {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("the cluster made %s on the host", p)
		}
	}
	for _, p := range podNetns() {
		if !slices.Contains(netnsBefore, p) {
			t.Errorf("the cluster made the Pod network namespace %s on the host", p)
		}
	}
}

// pods are the web server (its log says web-started; it serves
// hello-web on 8080) and the client.
func pods(image string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: web, labels: {app: web}}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: web
    image: %[1]q
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "mkdir -p /w && echo hello-web > /w/index.html && echo web-started && exec httpd -f -p 8080 -h /w"]
---
apiVersion: v1
kind: Pod
metadata: {name: client, labels: {app: client}}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - {name: c, image: %[1]q, imagePullPolicy: Always, command: [sleep, "3600"]}
`, image)
}

// eventually polls try every 200 ms until it succeeds, or fails the test
// after limit (a bound on waiting, not a timed assertion).
func eventually(t *testing.T, limit time.Duration, what string, try func() error) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		err := try()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still failing after %s: %v", what, limit, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func httpGet(t *testing.T, url string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s: %s", url, resp.Status, body)
	}
	return string(body)
}

func runCmd(name string, args ...string) (string, error) {
	out, err := osexec.Command(name, args...).CombinedOutput()
	return string(out), err
}

// helperEnv makes the test binary the helper of
// TestCrashedClusterRemoved: it starts a cluster, says so, and waits to
// be killed.
const helperEnv = "K8STEST_HELPER"

func crashHelper() {
	c, err := startAgain(start)
	if err != nil {
		fmt.Printf("START-ERROR %v\n", strings.ReplaceAll(err.Error(), "\n", " | "))
		os.Exit(2)
	}
	fmt.Printf("STARTED %s %s %d %.1f\n", c.id, c.NodeIP, c.holder.PID, c.StartTime.Seconds())
	time.Sleep(10 * time.Minute) // killed by the test
	os.Exit(3)
}

// TestCrashedClusterRemoved: a second test process starts a cluster of
// its own beside this one's (another /24, both answer), and is killed
// (SIGKILL, no cleanup): its namespaces die with it, and the next start's
// sweep removes what it left (directory, cgroups, link), leaving this
// process's cluster running.
func TestCrashedClusterRemoved(t *testing.T) {
	c := Start(t)
	cmd := osexec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=crash")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	t.Cleanup(func() {
		if !killed {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	f := strings.Fields(line)
	if err != nil || len(f) != 5 || f[0] != "STARTED" {
		t.Fatalf("the helper's cluster did not start: %q %v\n%s", line, err, stderr.String())
	}
	id, nodeIP := f[1], f[2]
	holderPID, _ := strconv.Atoi(f[3])
	t.Logf("a second cluster (pid %s) up in %ss beside this one's, at %s (this one's %s)", id, f[4], nodeIP, c.NodeIP)
	if nodeIP == c.NodeIP {
		t.Errorf("both clusters have the node address %s", nodeIP)
	}
	for _, kc := range []string{c.Kubeconfig, filepath.Join(kind.BaseDir(), id, "admin.kubeconfig")} {
		if out, err := runCmd(filepath.Join(c.BinDir, "kubectl"), "--kubeconfig", kc, "get", "nodes", "--no-headers"); err != nil || !strings.Contains(out, " Ready") {
			t.Errorf("kubectl --kubeconfig %s get nodes: %q %v", kc, out, err)
		}
	}

	cmd.Process.Kill()
	cmd.Wait()
	killed = true
	eventually(t, 15*time.Second, "the killed helper's namespaces to die", func() error {
		if nsfixture.IsOurs(holderPID, filepath.Join(kind.BaseDir(), id)) {
			return fmt.Errorf("its holder (pid %d) lives", holderPID)
		}
		return nil
	})
	if left := leftovers(id); len(left) == 0 {
		t.Fatal("the killed helper left nothing: the sweep below would prove nothing")
	}
	removeStale()
	if left := leftovers(id); len(left) > 0 {
		t.Errorf("after the sweep, the killed cluster left %s", strings.Join(left, ", "))
	}
	if out, err := c.Kubectl("get", "nodes", "--no-headers"); err != nil || !strings.Contains(out, " Ready") {
		t.Errorf("this process's cluster after the sweep: %q %v", out, err)
	}
}

// TestRemoveLineage: a namespace labelled with a lineage, a Pod and a
// ConfigMap in it are listed as the lineage's, and RemoveLineage leaves
// none of them.
func TestRemoveLineage(t *testing.T) {
	c := Start(t)
	lineage := "k8stest-" + strconv.Itoa(os.Getpid()) + "-rm"
	ns := lineage
	labels := "labels: {io.bottlefile.lineage: " + lineage + "}"
	if _, err := c.KubectlIn("apiVersion: v1\nkind: Namespace\nmetadata: {name: "+ns+", "+labels+"}\n", "apply", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	c.Cleanup(t, lineage) // a second removal finds nothing: harmless
	eventually(t, 30*time.Second, "the namespace's ServiceAccount", func() error {
		_, err := c.Kubectl("-n", ns, "get", "serviceaccount", "default")
		return err
	})
	manifest := fmt.Sprintf(`apiVersion: v1
kind: ConfigMap
metadata: {name: cm, %[1]s}
data: {a: b}
---
apiVersion: v1
kind: Pod
metadata: {name: p, %[1]s}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - {name: c, image: %[2]q, imagePullPolicy: IfNotPresent, command: [sleep, "3600"]}
`, labels, c.Busybox)
	if _, err := c.KubectlIn(manifest, "-n", ns, "apply", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	left, err := c.LineageObjects(lineage)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"namespace/" + ns, "Pod " + ns + "/p", "ConfigMap " + ns + "/cm"}
	for _, w := range want {
		if !strings.Contains(strings.Join(left, "\n"), w) {
			t.Errorf("LineageObjects = %q, want %q among them", left, w)
		}
	}
	t0 := time.Now()
	if err := c.RemoveLineage(lineage); err != nil {
		t.Fatal(err)
	}
	t.Logf("RemoveLineage (a namespace with a running Pod): %.1fs", time.Since(t0).Seconds())
	if out, err := c.Kubectl("get", "namespace", ns); err == nil {
		t.Errorf("namespace %s still there: %s", ns, out)
	}
}

// TestStartAgain: a start that did not get the iptables chains is made
// once more; any other failure, or a second one, is the answer.
func TestStartAgain(t *testing.T) {
	other := errors.New("the node did not become Ready")
	for _, tc := range []struct {
		name  string
		errs  []error // what each start returns
		calls int
		want  error
	}{
		{"first start up", []error{nil}, 1, nil},
		{"no chains, then up", []error{fmt.Errorf("%w: waiting", errNoChains), nil}, 2, nil},
		{"no chains twice", []error{errNoChains, errNoChains}, 2, errNoChains},
		{"another failure", []error{other}, 1, other},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			c, err := startAgain(func() (*Cluster, error) {
				err := tc.errs[calls]
				calls++
				if err != nil {
					return nil, err
				}
				return &Cluster{}, nil
			})
			if calls != tc.calls || !errors.Is(err, tc.want) || (err == nil) != (c != nil) {
				t.Errorf("%d starts, cluster %v, err %v; want %d starts, err %v", calls, c != nil, err, tc.calls, tc.want)
			}
		})
	}
}
