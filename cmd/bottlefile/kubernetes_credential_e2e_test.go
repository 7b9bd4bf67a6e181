package main

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/kubernetes/k8stest"
)

// k8sCredentialBottlefile is one agent whose egress block injects a key
// into its requests to the api-host Service (an HTTPS server in the
// test's own namespace, its certificate from a test CA the gateway trusts
// through credential_ca_file), named by its address: the cluster has no
// DNS.
const k8sCredentialBottlefile = `variable "key" {
  type      = string
  sensitive = true
}

runtime "k" {
  driver             = "kubernetes"
  kubeconfig         = %[1]q
  registry           = %[2]q
  credential_ca_file = %[3]q
}

agent "coder" {
  runtime = runtime.k
  image   = %[4]q
  command = ["sh", "-c", "exec sleep 3600"]
  egress {
    allow = ["%[5]s:8443"]
    credential "api" {
      host   = "%[5]s:8443"
      header = "x-api-key"
      value  = var.key
      env    = "API_KEY"
    }
  }
}
`

// TestE2EKubernetesCredential: issue 18's credential injection on the
// kubernetes driver, on the real cluster (k8stest). The agent, holding
// only a placeholder in API_KEY, sends a request to the api-host Service
// with that placeholder in x-api-key, trusting the bottle's CA through
// SSL_CERT_FILE: the host sees the real key. The key is in no Pod's spec,
// no ConfigMap and no log; the gateway's Secret holds it, and only the
// gateway's Pod mounts it. A rotated key changes the gateway alone: the
// agent's Pod stays, and the next request carries the new key. Destroy
// leaves no Secret and no CA in the state directory.
func TestE2EKubernetesCredential(t *testing.T) {
	t.Parallel() // the long lane (e2e_test.go): not parallel(t)
	c := k8stest.Start(t)
	key := "sk-k8s-" + randomHex(12)
	rotated := "sk-k8s-rotated-" + randomHex(12)

	// The api-host: its Service first, whose address its certificate
	// names, then its Pod, running credecho from the node's filesystem.
	bin := buildStatic(t, "./testdata/credecho")
	binDir := filepath.Join(c.Dir, "credecho-"+randomHex(4))
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(binDir) })
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(binDir, "credecho"), data, 0o755); err != nil {
		t.Fatal(err)
	}
	outside := uuid.NewString()
	c.Cleanup(t, outside)
	hostNS := "bf-cred-outside-" + outside[:8]
	apply := func(manifest string) {
		t.Helper()
		// A new namespace's default ServiceAccount comes a moment after
		// it: until then its Pods are refused.
		deadline := time.Now().Add(30 * time.Second)
		for {
			out, err := c.KubectlIn(manifest, "apply", "-f", "-")
			if err == nil {
				return
			}
			if time.Now().After(deadline) || !strings.Contains(err.Error(), "serviceaccount") {
				t.Fatalf("kubectl apply: %v: %s", err, out)
			}
			time.Sleep(300 * time.Millisecond)
		}
	}
	apply(fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata: {name: %[1]s, labels: {%[2]s: %[3]s}}
---
apiVersion: v1
kind: Service
metadata: {name: api-host, namespace: %[1]s, labels: {%[2]s: %[3]s}}
spec: {selector: {app: api-host}, ports: [{port: 8443, targetPort: 8443, protocol: TCP}]}
`, hostNS, drivers.LabelLineage, outside))
	out, err := c.Kubectl("get", "service", "-n", hostNS, "api-host", "-o", "jsonpath={.spec.clusterIP}")
	hostIP := strings.TrimSpace(out)
	if err != nil || net.ParseIP(hostIP) == nil {
		t.Fatalf("the api-host Service: %v %q", err, out)
	}
	caPEM, certPEM, keyPEM := testServerCert(t, hostIP)
	caFile := filepath.Join(t.TempDir(), "test-ca.pem")
	if err := os.WriteFile(caFile, caPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	apply(fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: api-host, namespace: %[1]s, labels: {app: api-host, %[2]s: %[3]s}}
spec:
  automountServiceAccountToken: false
  enableServiceLinks: false
  terminationGracePeriodSeconds: 1
  volumes: [{name: bin, hostPath: {path: %[4]q, type: Directory}}]
  containers:
  - name: main
    image: %[5]q
    imagePullPolicy: IfNotPresent
    command: ["/cred/credecho", "serve"]
    env: [{name: CERT, value: %[6]q}, {name: KEY, value: %[7]q}]
    volumeMounts: [{name: bin, mountPath: /cred, readOnly: true}]
`, hostNS, drivers.LabelLineage, outside, binDir, c.Busybox, certPEM, keyPEM))
	if out, err := c.Kubectl("wait", "-n", hostNS, "--for=condition=Ready", "pod/api-host", "--timeout=90s"); err != nil {
		t.Fatalf("the api-host Pod: %v: %s", err, out)
	}
	hostLog := func() string {
		out, _ := c.Kubectl("logs", "-n", hostNS, "api-host")
		return out
	}

	dir := t.TempDir()
	write := func(value string) {
		t.Helper()
		writeBottlefile(t, dir, k8sCredentialBottlefile, c.Kubeconfig, c.Registry, caFile, c.Busybox, hostIP)
		if err := os.WriteFile(filepath.Join(dir, "secret.vars"), []byte(fmt.Sprintf("key = %q\n", value)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		if r := bottlefile(t, dir, "destroy", "-auto-approve", "-var-file=secret.vars"); r.code != 0 {
			t.Errorf("cleanup destroy: %s", r)
		}
	})
	write(key)
	mustRun(t, dir, "validate")
	if r := mustRun(t, dir, "plan", "-var-file=secret.vars"); strings.Contains(r.stdout+r.stderr, key) {
		t.Errorf("the plan shows the key:\n%s", r.stdout)
	}
	r := mustRun(t, dir, "apply", "-auto-approve", "-var-file=secret.vars")
	if strings.Contains(r.stdout+r.stderr, key) {
		t.Errorf("apply shows the key:\n%s", r)
	}
	lineage, _ := readState(t, dir)
	ns, err := c.Kubectl("get", "pods", "-A", "-l", drivers.LabelLineage+"="+lineage+","+drivers.LabelPrefix+"role=agent", "-o", "jsonpath={.items[0].metadata.namespace}")
	ns = strings.TrimSpace(ns)
	if err != nil || ns == "" {
		t.Fatalf("the agent's namespace: %v %q", err, ns)
	}
	if out, err := c.KubectlIn(string(data), "exec", "-i", "-n", ns, "agent", "--", "sh", "-c", "cat > /tmp/credecho && chmod 755 /tmp/credecho"); err != nil {
		t.Fatalf("copying credecho into the agent: %v: %s", err, out)
	}
	uid := func() string {
		t.Helper()
		out, err := c.Kubectl("get", "pod", "-n", ns, "agent", "-o", "jsonpath={.metadata.uid}")
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(out)
	}
	agentUID := uid()
	// A new Pod's fence (kube-router) and its Service's endpoints and
	// rules (kube-proxy) are programmed a moment after apply returns: the
	// agent's connections to a new gateway Pod may be refused until then,
	// whatever the credentials (a new allowlist is a new Pod too). Wait
	// for the gateway to answer its health page through its Service.
	reachGateway := func(when string) {
		t.Helper()
		if r := bottlefile(t, dir, "exec", "-T", "agent.coder", "--", "sh", "-c",
			`for i in $(seq 1 150); do printf 'GET /.bottlefile/health HTTP/1.0\r\n\r\n' | timeout 3 nc gateway 3128 | grep -q HTTP/ && exit 0; sleep 0.2; done; exit 1`); r.code != 0 {
			t.Fatalf("%s: the agent does not reach its gateway: %s", when, r)
		}
	}
	reachGateway("after apply")

	// The agent holds the placeholder and the trust variables.
	env := mustRun(t, dir, "exec", "-T", "agent.coder", "--", "env").stdout
	wantAll(t, "agent env", env, "API_KEY=bottlefile-placeholder-api-", "SSL_CERT_FILE=/etc/bottlefile/ca-bundle.pem",
		"NODE_EXTRA_CA_CERTS=/etc/bottlefile/ca.pem", "REQUESTS_CA_BUNDLE=/etc/bottlefile/ca-bundle.pem", "GIT_SSL_CAINFO=/etc/bottlefile/ca-bundle.pem")
	get := func(value string) {
		t.Helper()
		r := bottlefile(t, dir, "exec", "-T", "agent.coder", "--", "/tmp/credecho", "get", "https://"+hostIP+":8443/v1/messages", "x-api-key", "API_KEY")
		if r.code != 0 || !strings.Contains(r.stdout, "status=200") {
			gw, _ := c.Kubectl("logs", "-n", ns, "gateway")
			t.Fatalf("the request through the gateway: %s\napi-host log:\n%s\ngateway log:\n%s", r, hostLog(), gw)
		}
		if strings.Contains(r.stdout+r.stderr, value) {
			t.Errorf("the agent got the key in the answer:\n%s", r.stdout)
		}
		if !strings.Contains(hostLog(), "x-api-key="+value) {
			t.Errorf("the api-host did not see the key; its log:\n%s", hostLog())
		}
	}
	get(key)

	// No value in any Pod's spec, ConfigMap or the gateway's log; the
	// Secret holds it, mounted by the gateway's Pod alone.
	noKey := func(when, value string) {
		t.Helper()
		for _, args := range [][]string{
			{"get", "pods,configmaps,services", "-n", ns, "-o", "yaml"},
			{"logs", "-n", ns, "gateway"},
			{"logs", "-n", ns, "agent"},
		} {
			out, err := c.Kubectl(args...)
			if err != nil {
				t.Fatalf("kubectl %v: %v", args, err)
			}
			if strings.Contains(out, value) {
				t.Errorf("%s: kubectl %s shows the key", when, strings.Join(args, " "))
			}
		}
		agentYAML, _ := c.Kubectl("get", "pod", "-n", ns, "agent", "-o", "yaml")
		if strings.Contains(agentYAML, "gateway-credentials") || !strings.Contains(agentYAML, "bottlefile-placeholder-api-") {
			t.Errorf("%s: the agent's Pod mounts the Secret, or lacks the placeholder:\n%s", when, agentYAML)
		}
		secret, err := c.Kubectl("get", "secret", "-n", ns, "gateway-credentials", "-o", "jsonpath={.data.credentials\\.json}")
		if err != nil || secret == "" {
			t.Errorf("%s: the gateway's Secret: %v %q", when, err, secret)
		}
	}
	noKey("after apply", key)

	// A rotated key: the gateway changes in place, the agent's Pod stays.
	write(rotated)
	r = mustRun(t, dir, "apply", "-auto-approve", "-var-file=secret.vars")
	if !strings.Contains(r.stdout, "0 added, 1 changed, 0 destroyed") || strings.Contains(r.stdout+r.stderr, rotated) {
		t.Errorf("a rotated key did not change the gateway alone, or apply shows it:\n%s", r)
	}
	if got := uid(); got != agentUID {
		t.Errorf("the rotation replaced the agent's Pod (%s, was %s)", got, agentUID)
	}
	reachGateway("after the rotation")
	get(rotated)
	noKey("after the rotation", rotated)
	if r := mustRun(t, dir, "plan", "-var-file=secret.vars"); !strings.Contains(r.stdout, "No changes.") {
		t.Errorf("after the rotation, the plan is not empty:\n%s", r)
	}

	r = mustRun(t, dir, "destroy", "-auto-approve", "-var-file=secret.vars")
	if !strings.Contains(r.stdout, "Destroy complete!") {
		t.Errorf("destroy:\n%s", r)
	}
	if out, err := c.Kubectl("get", "namespaces,pods,configmaps,secrets", "-A", "-l", drivers.LabelLineage+"="+lineage, "-o", "name"); err != nil || strings.TrimSpace(out) != "" {
		t.Errorf("left on the cluster after destroy: %q %v", out, err)
	}
	if _, err := os.Stat(filepath.Join(dir, ".bottlefile", "credentials", lineage)); !os.IsNotExist(err) {
		t.Errorf("the bottle's CA stays in the state directory after destroy: %v", err)
	}
}
