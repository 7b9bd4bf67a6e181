package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bottlefile/bottlefile/drivers/kubernetes/k8stest"
)

// k8sOutside is the outside server of the kubernetes end-to-end test: on
// the node's loopback, in its network namespace, so a gateway's Pod
// reaches it as a host beyond the cluster. k8sDenied is an address there
// nothing allows.
const (
	k8sOutside = "10.233.0.1"
	k8sDenied  = "10.233.0.2"
)

// kubernetesBottlefile is an agent with a sidecar and an egress block on
// the test cluster; allow is its allowlist, marker an env value whose
// change replaces the agent.
func kubernetesBottlefile(t *testing.T, dir string, c *k8stest.Cluster, allow, marker string) {
	t.Helper()
	writeBottlefile(t, dir, `runtime "k" {
  driver     = "kubernetes"
  kubeconfig = %q
  registry   = %q
}

agent "coder" {
  runtime = runtime.k
  image   = %q
  command = ["sh", "-c", "echo hello-from-coder; exec sleep 600"]
  env = {
    MARK = %q
  }
  egress {
    allow = [%s]
  }
  sidecar "web" {
    image   = %q
    command = ["sh", "-c", "mkdir -p /www && echo sidecar-ok > /www/index.html && exec httpd -f -p 8080 -h /www"]
  }
}
`, c.Kubeconfig, c.Registry, c.Busybox, marker, allow, c.Busybox)
}

// TestE2EKubernetes: issue 29's driver end to end on the real
// single-node cluster (k8stest): apply an agent with a sidecar and an
// egress block; the agent reaches its sidecar by name and the allowed
// host through its gateway, a denied one is refused and `egress denials`
// says so; a new allowlist changes the gateway in place, a new env
// replaces the agent; destroy leaves no namespace of the lineage, and a
// second apply makes the bottle again.
func TestE2EKubernetes(t *testing.T) {
	t.Parallel() // the long lane (e2e_test.go): not parallel(t)
	c := k8stest.Start(t)
	www := filepath.Join(c.Dir, "e2e-outside")
	if err := os.MkdirAll(www, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(www, "index.html"), []byte("outside-ok\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"ip", "addr", "add", k8sOutside + "/32", "dev", "lo"},
		{"ip", "addr", "add", k8sDenied + "/32", "dev", "lo"},
		{"busybox", "httpd", "-p", k8sOutside + ":80", "-h", www},
		{"busybox", "httpd", "-p", k8sDenied + ":80", "-h", www},
	} {
		if out, err := c.InNode(args...); err != nil {
			t.Fatalf("starting the outside server in the node: %v: %s", err, out)
		}
	}
	dir := t.TempDir()
	timed := func(args ...string) result {
		t.Helper()
		start := time.Now()
		r := mustRun(t, dir, args...)
		t.Logf("bottlefile %s: %.1fs", strings.Join(args, " "), time.Since(start).Seconds())
		return r
	}
	t.Cleanup(func() {
		if r := bottlefile(t, dir, "destroy", "-auto-approve"); r.code != 0 {
			t.Errorf("cleanup destroy: %s", r)
		}
	})
	// Through sh, as the conformance suite's probes: busybox's applets
	// run inside its shell.
	fetch := func(url string, prefix ...string) (string, int) {
		r := bottlefile(t, dir, "exec", "-T", "agent.coder", "--", "sh", "-c", strings.Join(prefix, "")+"timeout 10 wget -q -O - "+url)
		return r.stdout + r.stderr, r.code
	}
	check := func(when string) {
		t.Helper()
		// Directly, as the conformance suite does: busybox's wget
		// ignores NO_PROXY, and the gateway refuses a sidecar's name.
		if out, code := fetch("http://web:8080/", "unset http_proxy HTTP_PROXY; "); code != 0 || !strings.Contains(out, "sidecar-ok") {
			t.Errorf("%s: the agent does not reach its sidecar by name: exit %d %q", when, code, out)
		}
		if out, code := fetch("http://" + k8sOutside + "/"); code != 0 || !strings.Contains(out, "outside-ok") {
			t.Errorf("%s: the agent does not reach the allowed host through its gateway: exit %d %q", when, code, out)
		}
		r := bottlefile(t, dir, "exec", "-T", "agent.coder", "--", "sh", "-c", "unset http_proxy HTTP_PROXY; timeout 5 wget -q -O - http://"+k8sOutside+"/")
		if r.code == 0 {
			t.Errorf("%s: the agent reaches the allowed host around its gateway:\n%s", when, r)
		}
	}

	kubernetesBottlefile(t, dir, c, `"`+k8sOutside+`"`, "one")
	r := timed("apply", "-auto-approve")
	if !strings.Contains(r.stdout, "Apply complete! Objects: 4 added, 0 changed, 0 destroyed.") {
		t.Fatalf("apply did not add the namespace, two Pods and the gateway:\n%s", r)
	}
	lineage, _ := readState(t, dir)
	wantNoChanges(t, dir, "after apply")
	check("after apply")
	if out, code := fetch("http://" + k8sDenied + "/"); code == 0 || strings.Contains(out, "outside-ok") {
		t.Errorf("the agent reaches a host its egress does not allow: exit %d %q", code, out)
	}
	if r := mustRun(t, dir, "egress", "denials"); !strings.Contains(r.stdout, k8sDenied) {
		t.Errorf("egress denials does not list %s:\n%s", k8sDenied, r)
	}
	if r := mustRun(t, dir, "logs", "agent.coder"); !strings.Contains(r.stdout, "hello-from-coder") {
		t.Errorf("logs of agent.coder:\n%s", r)
	}
	if r := mustRun(t, dir, "status"); !strings.Contains(r.stdout, "running") {
		t.Errorf("status:\n%s", r)
	}

	// A new allowlist: the gateway changes in place, the agent stays.
	kubernetesBottlefile(t, dir, c, `"`+k8sOutside+`", "`+k8sDenied+`"`, "one")
	r = timed("apply", "-auto-approve")
	if !strings.Contains(r.stdout, "0 added, 1 changed, 0 destroyed") {
		t.Errorf("a new allowlist did not change the gateway alone:\n%s", r)
	}
	if out, code := fetch("http://" + k8sDenied + "/"); code != 0 || !strings.Contains(out, "outside-ok") {
		t.Errorf("the newly allowed host is not reached: exit %d %q", code, out)
	}
	// A new env: the agent's Pod is replaced, and the plan says so.
	kubernetesBottlefile(t, dir, c, `"`+k8sOutside+`"`, "two")
	if r := mustRun(t, dir, "plan"); !strings.Contains(r.stdout, "must be replaced") {
		t.Errorf("a new env does not replace the agent's Pod:\n%s", r)
	}
	timed("apply", "-auto-approve")
	wantNoChanges(t, dir, "after the change")
	check("after the change")

	r = timed("destroy", "-auto-approve")
	if !strings.Contains(r.stdout, "Destroy complete!") {
		t.Errorf("destroy:\n%s", r)
	}
	if out, err := c.Kubectl("get", "namespaces,pods,configmaps,networkpolicies,services", "-A", "-l", "io.bottlefile.lineage="+lineage, "-o", "name"); err != nil || strings.TrimSpace(out) != "" {
		t.Errorf("left on the cluster after destroy: %q %v", out, err)
	}

	timed("apply", "-auto-approve")
	check("applied again")
}
