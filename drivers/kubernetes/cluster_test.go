package kubernetes

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/zclconf/go-cty/cty"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/kubernetes/k8stest"
)

// cleanupLineage deletes what a test made of a lineage on the cluster,
// by label, whatever the test got to.
func cleanupLineage(t *testing.T, c *k8stest.Cluster, lineage string) {
	t.Cleanup(func() {
		if out, err := c.Kubectl("delete", "namespaces", "-l", drivers.LabelLineage+"="+lineage, "--wait=true", "--timeout=120s"); err != nil {
			t.Errorf("removing the test's namespaces: %v: %s", err, out)
		}
	})
}

// TestPlacementOnCluster: a node selector the node matches runs the
// bottle there; one no node matches fails the apply at once, with the
// scheduler's reason, and leaves no Pod.
func TestPlacementOnCluster(t *testing.T) {
	c := k8stest.Start(t)
	d := fixtureDriver(t, c).(*Driver)
	lineage := uuid.NewString()
	cleanupLineage(t, c, lineage)
	cs := fixtureClient(t, c)

	agent := func(name string, sel map[string]string) drivers.AgentSpec {
		return drivers.AgentSpec{Addr: "agent." + name, Name: name, Driver: placementValue(sel, nil),
			Workload: workload(map[string]cty.Value{"image": cty.StringVal(c.Busybox), "command": strs("sleep", "600")})}
	}
	plan, err := d.Plan(t.Context(), drivers.PlanRequest{Agent: agent("here", map[string]string{"kubernetes.io/hostname": c.NodeName})})
	if err != nil {
		t.Fatal(err)
	}
	resps := applyAll(t, d, lineage, plan.Objects)
	if node := resps["agent.here"].Computed[drivers.ComputedNode]; node != c.NodeName {
		t.Errorf("the agent placed by hostname runs on %q, want %s", node, c.NodeName)
	}

	plan, err = d.Plan(t.Context(), drivers.PlanRequest{Agent: agent("nowhere", map[string]string{"pool": "none"})})
	if err != nil {
		t.Fatal(err)
	}
	ns, pod := plan.Objects[0], plan.Objects[1]
	if _, err := d.Apply(t.Context(), drivers.ApplyRequest{Op: drivers.OpCreate, Lineage: lineage, Object: ns, Hash: "h"}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = d.Apply(t.Context(), drivers.ApplyRequest{Op: drivers.OpCreate, Lineage: lineage, Object: pod, Hash: "h"})
	took := time.Since(start)
	if err == nil || !strings.Contains(err.Error(), "cannot be scheduled (Unschedulable)") || !strings.Contains(err.Error(), "node affinity/selector") {
		t.Fatalf("apply of a Pod no node can take: %v", err)
	}
	t.Logf("the unschedulable Pod failed the apply after %.1fs: %v", took.Seconds(), err)
	nsName, _ := namespaceName(defaultPrefix, lineage, "agent.nowhere")
	if pods, err := cs.CoreV1().Pods(nsName).List(t.Context(), metav1.ListOptions{}); err != nil || len(pods.Items) != 0 {
		t.Errorf("Pods left after the failed apply: %v %v", pods, err)
	}
}

// TestEscapeOnCluster: the core of the escape suite on the cluster. An
// agent whose egress names the API server's addresses and the node's
// gets 403 from its gateway for each (its forbid file), and reaches none
// of them, nor the metadata address, around it (the NetworkPolicy);
// another bottle's Pods are out of its reach.
func TestEscapeOnCluster(t *testing.T) {
	c := k8stest.Start(t)
	d := fixtureDriver(t, c).(*Driver)
	lineage := uuid.NewString()
	cleanupLineage(t, c, lineage)
	cs := fixtureClient(t, c)
	svc, err := cs.CoreV1().Services("default").Get(t.Context(), "kubernetes", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	api := svc.Spec.ClusterIP
	outsideAddr, _ := startOutside(t, c)
	a := drivers.AgentSpec{Addr: "agent.esc", Name: "esc", Workload: workload(map[string]cty.Value{
		"image": cty.StringVal(c.Busybox), "command": strs("sleep", "600"),
		"egress": strs(api, c.NodeIP, outsideAddr),
	})}
	plan, err := d.Plan(t.Context(), drivers.PlanRequest{Agent: a})
	if err != nil {
		t.Fatal(err)
	}
	applyAll(t, d, lineage, plan.Objects)
	read, err := d.Read(t.Context(), drivers.ReadRequest{Lineage: lineage})
	if err != nil {
		t.Fatal(err)
	}
	var obj drivers.LiveObject
	for _, o := range read.Objects {
		if o.Addr == "agent.esc" {
			obj = o
		}
	}
	run := func(script string) (string, int) {
		var out, errb bytes.Buffer
		code, err := d.Exec(t.Context(), lineage, obj, drivers.ExecRequest{Command: []string{"sh", "-c", script}, Stdout: &out, Stderr: &errb})
		if err != nil {
			t.Fatalf("exec %q: %v", script, err)
		}
		return out.String() + errb.String(), code
	}
	if out, code := run("timeout 10 wget -q -O - http://" + outsideAddr + "/"); code != 0 || !strings.Contains(out, "outside-ok") {
		t.Fatalf("the allowed outside host is not reached through the gateway: exit %d %q", code, out)
	}
	// busybox's wget sends an https URL to the proxy as a GET, which the
	// gateway refuses as a bad request: the API server's ports are asked
	// for over http, so that the gateway judges the address.
	for _, target := range []string{api + ":443", c.NodeIP + ":6443", c.NodeIP + ":10250"} {
		out, code := run("timeout 10 wget -q -O - http://" + target + "/ 2>&1")
		if code == 0 || !strings.Contains(out, "403") {
			t.Errorf("through the gateway, %s: exit %d %q, want 403 (forbidden whatever the rules say)", target, code, out)
		}
		out, code = run("unset http_proxy HTTP_PROXY https_proxy HTTPS_PROXY; timeout 5 wget -q -O - --no-check-certificate https://" + target + "/ 2>&1")
		if code == 0 {
			t.Errorf("around the gateway, %s is reached: %q", target, out)
		}
	}
	if out, code := run("unset http_proxy HTTP_PROXY; timeout 5 wget -q -O - http://169.254.169.254/ 2>&1; timeout 5 wget -q -O - http://" + outsideAddr + "/ 2>&1"); code == 0 || strings.Contains(out, "outside-ok") {
		t.Errorf("around the gateway, the metadata address or the outside host is reached: %q", out)
	}
}
