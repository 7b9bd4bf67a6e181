package main

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/kubernetes/k8stest"
)

// k8sEscapeBottlefile: alpha, whose allowlist names the allowed host's
// Service and, so that only the gateway's own forbid list stands between
// them and the agent, the node's addresses, the Pod network's gateway,
// the API server's Service, an outside Pod's address and the metadata
// address; beta, with a gateway that allows nothing. Each agent and
// sidecar serves a page of its own on 8080.
const k8sEscapeBottlefile = `runtime "k" {
  driver     = "kubernetes"
  kubeconfig = %[1]q
  registry   = %[2]q
}

agent "alpha" {
  runtime = runtime.k
  image   = %[3]q
  command = ["sh", "-c", %[5]q]
  egress {
    allow = %[4]s
  }
  sidecar "web" {
    image   = %[3]q
    command = ["sh", "-c", %[6]q]
  }
}

agent "beta" {
  runtime = runtime.k
  image   = %[3]q
  command = ["sh", "-c", %[7]q]
  egress {
    allow = []
  }
  sidecar "db" {
    image   = %[3]q
    command = ["sh", "-c", %[8]q]
  }
}
`

// k8sServe is a command that serves content on 8080 and stays.
func k8sServe(content string) string {
	return "mkdir -p /www && echo " + content + " > /www/index.html && httpd -p 8080 -h /www && exec sleep 3600"
}

// tlsProbe sends plain HTTP to a TLS port: Go's TLS servers (the API
// server, the kubelet) answer "400 Bad Request ... Client sent an HTTP
// request to an HTTPS server" and close, so a reached port shows that
// marker and a blocked one times out.
func tlsProbe(host string, port int) string {
	return fmt.Sprintf(`printf 'GET / HTTP/1.0\r\n\r\n' | timeout 3 nc %s %d`, host, port)
}

// healthProbe asks a gateway's port for its health page, without the
// proxy.
func healthProbe(host string) string {
	return fmt.Sprintf(`printf 'GET /.bottlefile/health HTTP/1.0\r\n\r\n' | timeout 3 nc %s 3128 | head -1`, host)
}

const tlsReached = "an HTTPS server"

// k8sPod is what the test reads of a Pod.
type k8sPod struct {
	Metadata struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
	Status struct {
		PodIP string `json:"podIP"`
	} `json:"status"`
}

// k8sPods lists the Pods kubectl selects (its arguments), by
// "namespace/name".
func k8sPods(t *testing.T, c *k8stest.Cluster, args ...string) map[string]string {
	t.Helper()
	out, err := c.Kubectl(append([]string{"get", "pods", "-o", "json"}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	var list struct{ Items []k8sPod }
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("kubectl get pods: %v: %s", err, out)
	}
	ips := map[string]string{}
	for _, p := range list.Items {
		if p.Status.PodIP == "" {
			t.Fatalf("Pod %s/%s has no address", p.Metadata.Namespace, p.Metadata.Name)
		}
		ips[p.Metadata.Namespace+"/"+p.Metadata.Name] = p.Status.PodIP
	}
	return ips
}

// k8sOutsideWorld is the test's own namespace beside the bottles: an
// allowed and a denied host (busybox httpd Pods behind Services) and a
// prober Pod, from which every target is reached (the controls).
type k8sOutsideWorld struct {
	ns                     string
	allowedPod, allowedSvc string
	deniedPod, deniedSvc   string
}

func startK8sOutsideWorld(t *testing.T, c *k8stest.Cluster) k8sOutsideWorld {
	t.Helper()
	lineage := uuid.NewString()
	c.Cleanup(t, lineage)
	w := k8sOutsideWorld{ns: "bf-esc-outside-" + lineage[:8]}
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: v1\nkind: Namespace\nmetadata: {name: %s, labels: {%s: %s}}\n", w.ns, drivers.LabelLineage, lineage)
	pod := func(name, cmd string) {
		fmt.Fprintf(&b, `---
apiVersion: v1
kind: Pod
metadata: {name: %[1]s, namespace: %[2]s, labels: {app: %[1]s, %[3]s: %[4]s}}
spec:
  automountServiceAccountToken: false
  enableServiceLinks: false
  terminationGracePeriodSeconds: 1
  containers:
  - {name: main, image: %[5]q, imagePullPolicy: IfNotPresent, command: ["sh", "-c", %[6]q]}
`, name, w.ns, drivers.LabelLineage, lineage, c.Busybox, cmd)
	}
	svc := func(name string) {
		fmt.Fprintf(&b, `---
apiVersion: v1
kind: Service
metadata: {name: %[1]s, namespace: %[2]s, labels: {%[3]s: %[4]s}}
spec: {selector: {app: %[1]s}, ports: [{port: 8080, targetPort: 8080, protocol: TCP}]}
`, name, w.ns, drivers.LabelLineage, lineage)
	}
	pod("allowed-host", k8sServe("allowed-host-content"))
	svc("allowed-host")
	pod("denied-host", k8sServe("denied-host-content"))
	svc("denied-host")
	pod("prober", "exec sleep 3600")
	// A new namespace's default ServiceAccount comes a moment after it:
	// until then its Pods are refused.
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, err := c.KubectlIn(b.String(), "apply", "-f", "-")
		if err == nil {
			break
		}
		if time.Now().After(deadline) || !strings.Contains(err.Error(), "serviceaccount") {
			t.Fatalf("making the outside world: %v: %s", err, out)
		}
		time.Sleep(300 * time.Millisecond)
	}
	if out, err := c.Kubectl("wait", "-n", w.ns, "--for=condition=Ready", "pod", "--all", "--timeout=90s"); err != nil {
		t.Fatalf("the outside world's Pods: %v: %s", err, out)
	}
	ips := k8sPods(t, c, "-n", w.ns)
	w.allowedPod, w.deniedPod = ips[w.ns+"/allowed-host"], ips[w.ns+"/denied-host"]
	for _, s := range []struct {
		name string
		to   *string
	}{{"allowed-host", &w.allowedSvc}, {"denied-host", &w.deniedSvc}} {
		out, err := c.Kubectl("get", "service", "-n", w.ns, s.name, "-o", "jsonpath={.spec.clusterIP}")
		if err != nil || net.ParseIP(strings.TrimSpace(out)) == nil {
			t.Fatalf("the Service %s: %v %q", s.name, err, out)
		}
		*s.to = strings.TrimSpace(out)
	}
	return w
}

// probeK8s runs the probes at once through run (a shell script's
// output) and returns each one's result by name.
func probeK8s(t *testing.T, where string, run func(script string) string, probes []probe) map[string]execResult {
	t.Helper()
	out := run(buildProbeScript(probes))
	res := map[string]execResult{}
	parts := strings.Split(out, "### probe ")
	for _, part := range parts[1:] {
		head, body, _ := strings.Cut(part, "\n")
		idxS, rcS, ok := strings.Cut(head, " rc=")
		idx, err1 := strconv.Atoi(idxS)
		rc, err2 := strconv.Atoi(strings.TrimSpace(rcS))
		if !ok || err1 != nil || err2 != nil || idx >= len(probes) {
			continue
		}
		res[probes[idx].name] = execResult{out: strings.TrimSpace(body), code: rc}
	}
	for _, p := range probes {
		if _, ok := res[p.name]; !ok {
			t.Fatalf("%s: probe %q left no result; the script printed:\n%s", where, p.name, out)
		}
	}
	return res
}

// TestE2EKubernetesEscape is the escape suite's core on the k8stest
// cluster (issue 29): from inside alpha's agent, the allowed host is
// reached through the gateway; a host not allowed is refused with 403
// and listed by egress denials; the gateway bypassed (the outside Pods
// and Services directly), another bottle (beta's Pods and gateway, and
// the reverse), the node's addresses (its InternalIP, the host's end of
// its link, the Pod network's gateway: the kubelet, the API server and a
// port the test opens), the API server's Service and the metadata
// address are unreachable, directly and through alpha's proxy (the
// gateway's forbid list refuses what alpha's allowlist names). Every
// target answers a Pod of the test's own namespace, its own bottle or
// the node: a refusal is the fence, not a dead target. Last, alpha's
// allowlist names beta's gateway Service: the forbid list holds the
// Service range (all but the Services outside the bottles), so alpha's
// gateway refuses it (403) without dialing.
func TestE2EKubernetesEscape(t *testing.T) {
	c := parallelOnCluster(t)
	began := time.Now()
	t.Cleanup(func() { t.Logf("the kubernetes escape suite took %.1fs", time.Since(began).Seconds()) })
	const podGW = "10.244.0.1" // the Pod bridge's address on the node (k8stest's podCIDR)
	const apiSvc = "10.96.0.1" // the kubernetes Service: the first of k8stest's serviceCIDR
	const metadata = "169.254.169.254"

	// The node: the metadata address on its loopback and a port of the
	// test's own on all its addresses, each a busybox httpd in the node's
	// namespaces, stopped by PID.
	www := filepath.Join(c.Dir, "esc-"+randomHex(4))
	nodePort := 20000 + int(time.Now().UnixNano()%10000)
	for name, content := range map[string]string{"node": "node-secret", "metadata": "metadata-secret"} {
		if err := os.MkdirAll(filepath.Join(www, name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(www, name, "index.html"), []byte(content+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := c.InNode("ip", "addr", "add", metadata+"/32", "dev", "lo"); err != nil && !strings.Contains(out, "File exists") {
		t.Fatalf("the metadata address on the node: %v", err)
	}
	for _, l := range []struct{ listen, dir string }{
		{strconv.Itoa(nodePort), "node"},
		{metadata + ":80", "metadata"},
	} {
		out, err := c.InNode("sh", "-c", fmt.Sprintf("busybox httpd -f -p %s -h %s >/dev/null 2>&1 </dev/null & echo $!", l.listen, filepath.Join(www, l.dir)))
		if err != nil {
			t.Fatalf("a server on the node: %v", err)
		}
		pid := strings.TrimSpace(out)
		if _, err := strconv.Atoi(pid); err != nil {
			t.Fatalf("a server on the node: no PID: %q", out)
		}
		t.Cleanup(func() { _, _ = c.InNode("kill", pid) })
	}
	// The host's end of the node's link: a server of this process.
	ln, err := net.Listen("tcp", c.HostIP+":0")
	if err != nil {
		t.Fatal(err)
	}
	hostSrv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "host-secret") })}
	go func() { _ = hostSrv.Serve(ln) }()
	t.Cleanup(func() { _ = hostSrv.Close() })
	hostAddr := ln.Addr().String()

	w := startK8sOutsideWorld(t, c)
	prober := func(script string) string {
		out, err := c.Kubectl("exec", "-n", w.ns, "prober", "--", "sh", "-c", script)
		if err != nil {
			t.Fatalf("exec in the prober: %v: %s", err, out)
		}
		return out
	}

	nodeHTTP := func(a string) string { return fmt.Sprintf("http://%s:%d/", a, nodePort) }
	allow := []string{
		w.allowedSvc + ":8080", w.allowedPod + ":8080",
		c.NodeIP + ":10250", c.NodeIP + ":6443", fmt.Sprintf("%s:%d", c.NodeIP, nodePort),
		podGW + ":10250", podGW + ":6443", fmt.Sprintf("%s:%d", podGW, nodePort),
		apiSvc + ":443", metadata + ":80",
	}
	list, _ := json.Marshal(allow)
	dir := t.TempDir()
	writeBottlefile(t, dir, k8sEscapeBottlefile, c.Kubeconfig, c.Registry, c.Busybox, string(list),
		k8sServe("alpha-agent-content"), k8sServe("alpha-web-content"), k8sServe("beta-agent-content"), k8sServe("beta-db-content"))
	t.Cleanup(func() {
		if r := bottlefile(t, dir, "destroy", "-auto-approve"); r.code != 0 {
			t.Errorf("cleanup destroy: %s", r)
		}
	})
	applyStart := time.Now()
	r := bottlefile(t, dir, "apply", "-auto-approve")
	if _, err := os.Stat(filepath.Join(dir, ".bottlefile")); err == nil {
		if lineage, _ := readState(t, dir); lineage != "" {
			c.Cleanup(t, lineage)
		}
	}
	if r.code != 0 {
		t.Fatalf("apply: %s", r)
	}
	t.Logf("apply of the two bottles: %.1fs", time.Since(applyStart).Seconds())
	lineage, _ := readState(t, dir)
	ips := k8sPods(t, c, "-A", "-l", drivers.LabelLineage+"="+lineage)
	var alpha, beta struct{ agent, sidecar, gateway, gatewaySvc string }
	for key, ip := range ips {
		ns, name, _ := strings.Cut(key, "/")
		b := &alpha
		if strings.HasSuffix(ns, "-beta") {
			b = &beta
		} else if !strings.HasSuffix(ns, "-alpha") {
			t.Fatalf("a Pod of the lineage in an unknown namespace: %s", key)
		}
		switch {
		case name == "agent":
			b.agent = ip
		case name == "gateway":
			b.gateway = ip
			out, err := c.Kubectl("get", "service", "-n", ns, "gateway", "-o", "jsonpath={.spec.clusterIP}")
			if err != nil {
				t.Fatal(err)
			}
			b.gatewaySvc = strings.TrimSpace(out)
		case strings.HasPrefix(name, "sidecar-"):
			b.sidecar = ip
		}
	}
	if alpha.agent == "" || alpha.sidecar == "" || alpha.gateway == "" || beta.agent == "" || beta.sidecar == "" || beta.gateway == "" || beta.gatewaySvc == "" {
		t.Fatalf("the bottles' Pods: alpha %+v beta %+v (%v)", alpha, beta, ips)
	}
	in := func(agent string) func(string) string {
		return func(script string) string {
			r := bottlefile(t, dir, "exec", "-T", agent, "--", "sh", "-c", script)
			if r.code != 0 {
				t.Fatalf("exec in %s: %s", agent, r)
			}
			return r.stdout
		}
	}
	inAlpha, inBeta := in("agent.alpha"), in("agent.beta")

	// Controls: every target answers from somewhere allowed.
	ctl := probeK8s(t, "the prober", prober, []probe{
		{"allowed host's Pod", direct("http://" + w.allowedPod + ":8080/")},
		{"allowed host's Service", direct("http://" + w.allowedSvc + ":8080/")},
		{"denied host's Pod", direct("http://" + w.deniedPod + ":8080/")},
		{"denied host's Service", direct("http://" + w.deniedSvc + ":8080/")},
		{"node kubelet", tlsProbe(c.NodeIP, 10250)},
		{"node API server", tlsProbe(c.NodeIP, 6443)},
		{"node test port", direct(nodeHTTP(c.NodeIP))},
		{"Pod gateway kubelet", tlsProbe(podGW, 10250)},
		{"Pod gateway API server", tlsProbe(podGW, 6443)},
		{"Pod gateway test port", direct(nodeHTTP(podGW))},
		{"API server Service", tlsProbe(apiSvc, 443)},
		{"metadata", direct("http://" + metadata + "/")},
	})
	for name, marker := range map[string]string{
		"allowed host's Pod": "allowed-host-content", "allowed host's Service": "allowed-host-content",
		"denied host's Pod": "denied-host-content", "denied host's Service": "denied-host-content",
		"node kubelet": tlsReached, "node API server": tlsReached, "node test port": "node-secret",
		"Pod gateway kubelet": tlsReached, "Pod gateway API server": tlsReached, "Pod gateway test port": "node-secret",
		"API server Service": tlsReached, "metadata": "metadata-secret",
	} {
		wantContent(t, ctl, name, marker)
	}
	// The host's end of the link answers the node; a Pod's packets to it
	// have no way back (the host has no route to the Pod range and the
	// node does not masquerade), so from a Pod it is unreachable by the
	// fixture's topology as well as by the fence.
	if out, err := c.InNode("busybox", "wget", "-qO-", "http://"+hostAddr+"/"); err != nil || !strings.Contains(out, "host-secret") {
		t.Errorf("control from the node: the host's end of the link: %v %q", err, out)
	}
	ctl = probeK8s(t, "beta", inBeta, []probe{
		{"beta's agent by address", direct("http://" + beta.agent + ":8080/")},
		{"beta's sidecar by address", direct("http://" + beta.sidecar + ":8080/")},
		{"beta's gateway Pod", healthProbe(beta.gateway)},
		{"beta's gateway Service", healthProbe(beta.gatewaySvc)},
	})
	wantContent(t, ctl, "beta's agent by address", "beta-agent-content")
	wantContent(t, ctl, "beta's sidecar by address", "beta-db-content")
	wantContent(t, ctl, "beta's gateway Pod", "200")
	wantContent(t, ctl, "beta's gateway Service", "200")
	ctl = probeK8s(t, "alpha", inAlpha, []probe{
		{"alpha's agent", direct("http://127.0.0.1:8080/")},
		{"alpha's sidecar by address", direct("http://" + alpha.sidecar + ":8080/")},
		{"proxy settings", "env"},
	})
	wantContent(t, ctl, "alpha's agent", "alpha-agent-content")
	wantContent(t, ctl, "alpha's sidecar by address", "alpha-web-content")
	wantContent(t, ctl, "proxy settings", "HTTP_PROXY=http://gateway:3128")

	// From inside alpha's agent.
	res := probeK8s(t, "alpha", inAlpha, []probe{
		// 1. The allowed host, through the proxy.
		{"allowed host through the proxy", viaProxy("http://" + w.allowedSvc + ":8080/")},
		{"allowed host through CONNECT", connect("gateway", w.allowedSvc+":8080")},
		// 2. A host not allowed.
		{"denied host through the proxy", viaProxy("http://" + w.deniedSvc + ":8080/")},
		{"denied host through CONNECT", connect("gateway", w.deniedSvc+":8080")},
		// 3. The gateway bypassed.
		{"direct: allowed host's Pod", direct("http://" + w.allowedPod + ":8080/")},
		{"direct: allowed host's Service", direct("http://" + w.allowedSvc + ":8080/")},
		{"direct: denied host's Pod", direct("http://" + w.deniedPod + ":8080/")},
		{"direct: denied host's Service", direct("http://" + w.deniedSvc + ":8080/")},
		{"tcp: allowed host's Pod", fmt.Sprintf(`printf 'GET / HTTP/1.0\r\n\r\n' | timeout 3 nc %s 8080`, w.allowedPod)},
		// The Pod ranges are forbidden whatever the rules say.
		{"proxy: allowed host's Pod (named by a rule)", viaProxy("http://" + w.allowedPod + ":8080/")},
		// 4. Another bottle.
		{"direct: beta's agent", direct("http://" + beta.agent + ":8080/")},
		{"direct: beta's sidecar", direct("http://" + beta.sidecar + ":8080/")},
		{"direct: beta's gateway Pod", healthProbe(beta.gateway)},
		{"direct: beta's gateway Service", healthProbe(beta.gatewaySvc)},
		{"proxy: beta's agent", viaProxy("http://" + beta.agent + ":8080/")},
		{"CONNECT: beta's gateway Service", connect("gateway", beta.gatewaySvc+":3128")},
		// 5. The node's addresses.
		{"direct: node kubelet", tlsProbe(c.NodeIP, 10250)},
		{"direct: node API server", tlsProbe(c.NodeIP, 6443)},
		{"direct: node test port", direct(nodeHTTP(c.NodeIP))},
		{"direct: Pod gateway kubelet", tlsProbe(podGW, 10250)},
		{"direct: Pod gateway API server", tlsProbe(podGW, 6443)},
		{"direct: Pod gateway test port", direct(nodeHTTP(podGW))},
		{"direct: host's end of the link", direct("http://" + hostAddr + "/")},
		{"proxy: node kubelet", viaProxy("http://" + c.NodeIP + ":10250/")},
		{"proxy: node API server", viaProxy("http://" + c.NodeIP + ":6443/")},
		{"proxy: node test port", viaProxy(nodeHTTP(c.NodeIP))},
		{"proxy: Pod gateway kubelet", viaProxy("http://" + podGW + ":10250/")},
		{"proxy: Pod gateway test port", viaProxy(nodeHTTP(podGW))},
		{"proxy: host's end of the link", viaProxy("http://" + hostAddr + "/")},
		{"CONNECT: node kubelet", connect("gateway", c.NodeIP+":10250")},
		{"CONNECT: node API server", connect("gateway", c.NodeIP+":6443")},
		{"CONNECT: Pod gateway kubelet", connect("gateway", podGW+":10250")},
		// 6. The API server's Service.
		{"direct: API server Service", tlsProbe(apiSvc, 443)},
		{"proxy: API server Service", viaProxy("http://" + apiSvc + ":443/")},
		{"CONNECT: API server Service", connect("gateway", apiSvc+":443")},
		// 7. Metadata.
		{"direct: metadata", direct("http://" + metadata + "/")},
		{"proxy: metadata", viaProxy("http://" + metadata + "/")},
		{"CONNECT: metadata", connect("gateway", metadata+":80")},
	})
	wantContent(t, res, "allowed host through the proxy", "allowed-host-content")
	wantContent(t, res, "allowed host through CONNECT", "allowed-host-content")
	want403(t, res, "denied host through the proxy", "denied-host-content")
	want403(t, res, "denied host through CONNECT", "denied-host-content")
	for name, got := range res {
		if strings.HasPrefix(name, "allowed host through") || strings.HasPrefix(name, "denied host through") {
			continue
		}
		// A direct attempt must fail and show nothing of its target;
		// through the gateway it must be the gateway's 403.
		for _, marker := range []string{"-content", "-secret", tlsReached, "200 OK"} {
			if strings.Contains(got.out, marker) {
				t.Errorf("from alpha, %s: reached (%q): %q", name, marker, got.out)
			}
		}
		if strings.HasPrefix(name, "proxy: ") || strings.HasPrefix(name, "CONNECT: ") {
			want403(t, res, name, "")
		} else if got.code == 0 && !strings.HasPrefix(name, "direct: beta's gateway") {
			t.Errorf("from alpha, %s: exit 0: %q", name, got.out)
		}
	}
	if r := mustRun(t, dir, "egress", "denials"); !strings.Contains(r.stdout, w.deniedSvc) {
		t.Errorf("egress denials does not list %s:\n%s", w.deniedSvc, r)
	}

	// 4, the other way: beta reaches nothing of alpha.
	res = probeK8s(t, "beta", inBeta, []probe{
		{"direct: alpha's agent", direct("http://" + alpha.agent + ":8080/")},
		{"direct: alpha's sidecar", direct("http://" + alpha.sidecar + ":8080/")},
		{"direct: alpha's gateway Pod", healthProbe(alpha.gateway)},
		{"proxy: the allowed host (beta allows nothing)", viaProxy("http://" + w.allowedSvc + ":8080/")},
	})
	for name, got := range res {
		if strings.Contains(got.out, "-content") || strings.Contains(got.out, "200 OK") {
			t.Errorf("from beta, %s: reached: %q", name, got.out)
		}
	}
	want403(t, res, "proxy: the allowed host (beta allows nothing)", "allowed-host-content")

	// The gateway's forbid list holds the Service range, less the
	// Services outside the bottles (the allowed host is one): an
	// allowlist that names beta's gateway Service is refused by alpha's
	// gateway itself, before beta's fence.
	list, _ = json.Marshal(append(allow, beta.gatewaySvc+":3128"))
	writeBottlefile(t, dir, k8sEscapeBottlefile, c.Kubeconfig, c.Registry, c.Busybox, string(list),
		k8sServe("alpha-agent-content"), k8sServe("alpha-web-content"), k8sServe("beta-agent-content"), k8sServe("beta-db-content"))
	if r := mustRun(t, dir, "apply", "-auto-approve"); !strings.Contains(r.stdout, "0 added, 1 changed, 0 destroyed") {
		t.Fatalf("naming beta's gateway Service in alpha's allowlist did not change alpha's gateway alone:\n%s", r)
	}
	res = probeK8s(t, "alpha", inAlpha, []probe{
		{"proxy: beta's gateway Service, named by a rule", viaProxy("http://" + beta.gatewaySvc + ":3128/.bottlefile/health")},
		{"CONNECT: beta's gateway Service, named by a rule", connect("gateway", beta.gatewaySvc+":3128")},
		{"control: the allowed host through the new gateway", viaProxy("http://" + w.allowedSvc + ":8080/")},
	})
	wantContent(t, res, "control: the allowed host through the new gateway", "allowed-host-content")
	for _, name := range []string{"proxy: beta's gateway Service, named by a rule", "CONNECT: beta's gateway Service, named by a rule"} {
		// 403: alpha's gateway refused it (forbidden whatever the rules
		// say); 502 would be a dial beta's fence answered with silence,
		// 200 a tunnel.
		if got := res[name]; !strings.Contains(got.out, "403") || strings.Contains(got.out, " 200 ") {
			t.Errorf("from alpha, %s: want the gateway's 403 (the Service range forbidden), got (exit %d) %q", name, got.code, got.out)
		}
	}
	t.Logf("alpha's gateway, asked for beta's gateway Service: %q", res["proxy: beta's gateway Service, named by a rule"].out)
}
