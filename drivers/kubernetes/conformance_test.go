package kubernetes

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/zclconf/go-cty/cty"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8s "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/docker/dockertest"
	"github.com/bottlefile/bottlefile/drivers/drivertest"
	"github.com/bottlefile/bottlefile/drivers/gateway"
	"github.com/bottlefile/bottlefile/drivers/kubernetes/k8stest"
)

func TestMain(m *testing.M) { os.Exit(k8stest.Main(m)) }

// fixtureDriver is a driver configured against the test cluster, with
// its registry and node, and a static gateway binary.
func fixtureDriver(t *testing.T, c *k8stest.Cluster) drivers.Driver {
	t.Helper()
	d, err := New(nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := runtimeConfig(map[string]cty.Value{
		attrKubeconfig:     cty.StringVal(c.Kubeconfig),
		attrRegistry:       cty.StringVal(c.Registry),
		attrNodeContainerd: cty.MapVal(map[string]cty.Value{c.NodeName: cty.StringVal("unix://" + c.ContainerdSocket)}),
		gateway.AttrBinary: cty.StringVal(dockertest.GatewayBinary(t)),
	})
	if err := d.Configure(t.Context(), drivers.ConfigureRequest{Runtime: "k", Config: cfg, StateDir: t.TempDir()}); err != nil {
		t.Fatal(err)
	}
	return d
}

// fixtureClient is a clientset of the test cluster, for what a test
// does behind the driver's back.
func fixtureClient(t *testing.T, c *k8stest.Cluster) k8s.Interface {
	t.Helper()
	rc, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := k8s.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// outsideAddr is the address of the outside server: on the node's
// loopback, in its network namespace, so a gateway's Pod reaches it as a
// host beyond the cluster (not a node address, a Pod's or the API
// server's, which its forbid file refuses).
const outsideAddr = "10.233.0.1"

var outside struct {
	once sync.Once
	addr string
	err  error
}

// startOutside serves a page from the node's network namespace, with
// busybox's httpd (it runs in the node's PID namespace and ends with the
// cluster).
func startOutside(t *testing.T, c *k8stest.Cluster) (string, string) {
	const body = "outside-ok"
	outside.once.Do(func() {
		dir := filepath.Join(c.Dir, "outside")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			outside.err = err
			return
		}
		if err := os.WriteFile(filepath.Join(dir, "index.html"), []byte(body+"\n"), 0o644); err != nil {
			outside.err = err
			return
		}
		if out, err := c.InNode("ip", "addr", "add", outsideAddr+"/32", "dev", "lo"); err != nil {
			outside.err = fmt.Errorf("%v: %s", err, out)
			return
		}
		if out, err := c.InNode("busybox", "httpd", "-p", outsideAddr+":80", "-h", dir); err != nil {
			outside.err = fmt.Errorf("%v: %s", err, out)
			return
		}
		outside.addr = outsideAddr + ":80"
	})
	if outside.err != nil {
		t.Fatalf("starting the outside server in the node: %v", outside.err)
	}
	return outside.addr, body
}

// The conformance battery on the single-node fixture. A workload removed
// behind the driver's back is its Pod deleted, as kubectl delete pod
// would; a Pod cannot be stopped and kept, so there is no stop case.
func TestConformance(t *testing.T) {
	c := k8stest.Start(t)
	cs := fixtureClient(t, c)
	drivertest.TestDriver(t, drivertest.Harness{
		NewDriver: func(t *testing.T) drivers.Driver { return fixtureDriver(t, c) },
		Image:     c.Busybox,
		Outside:   func(t *testing.T) (string, string) { return startOutside(t, c) },
		RemoveOutside: func(t *testing.T, _ string, obj drivers.LiveObject) {
			ns, pod, err := podOf(obj)
			if err != nil {
				t.Fatal(err)
			}
			if err := cs.CoreV1().Pods(ns).Delete(t.Context(), pod, metav1.DeleteOptions{}); err != nil {
				t.Fatalf("kubectl delete pod -n %s %s: %v", ns, pod, err)
			}
		},
	})
}
