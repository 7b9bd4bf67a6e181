package nodesnap

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/kubernetes/k8stest"
)

// The tests of the real cluster share one, started by the first that asks
// (the others start parts of their own and never need it).
func TestMain(m *testing.M) { os.Exit(k8stest.Main(m)) }

// TestCommitOnCluster: a Pod's running container on the real cluster
// (k8stest) is committed through the node's containerd, found as a driver
// finds it (Spec.NodeName, Status.ContainerStatuses[].ContainerID), and a
// new Pod whose image is the snapshot by digest, pulled by the kubelet
// from the registry, reads the file.
func TestCommitOnCluster(t *testing.T) {
	c := k8stest.Start(t)
	ns := fmt.Sprintf("bf-nodesnap-%d", os.Getpid())
	if out, err := c.Kubectl("create", "namespace", ns); err != nil {
		t.Fatalf("creating namespace %s: %v: %s", ns, err, out)
	}
	t.Cleanup(func() { _, _ = c.Kubectl("delete", "namespace", ns, "--wait=false") })
	if out, err := c.Kubectl("label", "namespace", ns, drivers.LabelLineage+"=nodesnap-test"); err != nil {
		t.Fatalf("labelling %s: %v: %s", ns, err, out)
	}
	pod := func(name, image, pull, restart, cmd string) string {
		return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s, namespace: %s, labels: {%s: nodesnap-test}}
spec:
  restartPolicy: %s
  terminationGracePeriodSeconds: 0
  containers:
  - {name: agent, image: %q, imagePullPolicy: %s, command: ["/bin/sh", "-c", %q]}
`, name, ns, drivers.LabelLineage, restart, image, pull, cmd)
	}
	apply := func(y string) {
		t.Helper()
		// A new namespace gets its default ServiceAccount a moment later.
		deadline := time.Now().Add(30 * time.Second)
		for {
			out, err := c.KubectlIn(y, "apply", "-f", "-")
			if err == nil {
				return
			}
			if !strings.Contains(out, "serviceaccount") || time.Now().After(deadline) {
				t.Fatalf("kubectl apply: %v: %s", err, out)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	apply(pod("writer", c.Busybox, "IfNotPresent", "Always", "echo on-the-node > /kept.txt && exec sleep 3600"))
	if out, err := c.Kubectl("wait", "-n", ns, "--for=condition=Ready", "pod/writer", "--timeout=90s"); err != nil {
		t.Fatalf("the writer Pod did not run: %v: %s\n%s", err, out, c.Log("kubelet", 20))
	}
	get := func(name, path string) string {
		t.Helper()
		out, err := c.Kubectl("get", "-n", ns, "pod", name, "-o", "jsonpath={"+path+"}")
		if err != nil {
			t.Fatalf("kubectl get %s %s: %v: %s", name, path, err, out)
		}
		return strings.TrimSpace(out)
	}
	if node := get("writer", ".spec.nodeName"); node != c.NodeName {
		t.Fatalf("the Pod runs on %q, the cluster's node is %q", node, c.NodeName)
	}
	id, err := ContainerID(get("writer", ".status.containerStatuses[0].containerID"))
	if err != nil {
		t.Fatal(err)
	}
	// The file is written once the shell ran: the exec reads it.
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, err := c.Kubectl("exec", "-n", ns, "writer", "--", "cat", "/kept.txt")
		if err == nil && out == "on-the-node\n" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the writer Pod did not write its file: %v: %s", err, out)
		}
		time.Sleep(200 * time.Millisecond)
	}

	if n, err := Written(context.Background(), Node{Socket: c.ContainerdSocket}, id); err != nil || n <= 0 {
		t.Fatalf("Written of the Pod's container = %d, %v; want what it wrote", n, err)
	}
	ref := Ref{Registry: Registry{Host: c.Registry, PlainHTTP: true}, Repo: "bottlefile-test/nodesnap-" + ns, Tag: "s1",
		Lineage: "nodesnap-test", Agent: "agent.writer", Address: "snapshot.s1"}
	dgst, size, err := Commit(context.Background(), Node{Socket: c.ContainerdSocket, Namespace: DefaultNamespace}, id, ref)
	if err != nil {
		t.Fatalf("Commit of the Pod's container %s: %v", id, err)
	}
	t.Logf("committed the Pod's container as %s@%s (layer %d bytes)", ref.Repo, dgst, size)

	image := c.Registry + "/" + ref.Repo + "@" + dgst
	apply(pod("resumed", image, "Always", "Never", "cat /kept.txt"))
	if out, err := c.Kubectl("wait", "-n", ns, "--for=jsonpath={.status.phase}=Succeeded", "pod/resumed", "--timeout=90s"); err != nil {
		desc, _ := c.Kubectl("describe", "-n", ns, "pod", "resumed")
		t.Fatalf("the Pod of the snapshot did not finish: %v: %s\n%s", err, out, desc)
	}
	if out, err := c.Kubectl("logs", "-n", ns, "resumed"); err != nil || out != "on-the-node\n" {
		t.Fatalf("the Pod of the snapshot printed %q (%v), want the file the first one wrote", out, err)
	}
}
