package kubernetes

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zclconf/go-cty/cty"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/kubernetes/nodesnap"
)

// fakeRegistry answers the registry API's ping and manifest deletes,
// recording the deletes. (nodesnap's tests push, pull and delete against
// Debian's docker-registry; here only what the driver asks of it counts.)
func fakeRegistry(t *testing.T) (host string, deletes func() []string) {
	t.Helper()
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/v2/":
			w.WriteHeader(http.StatusOK)
		case r.Method == http.MethodDelete && strings.Contains(r.URL.Path, "/manifests/"):
			mu.Lock()
			got = append(got, r.URL.Path)
			mu.Unlock()
			w.WriteHeader(http.StatusAccepted)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://"), func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), got...)
	}
}

// TestSnapshotTakeReadDelete: a snapshot of the agent is committed on the
// node its Pod runs on, through that node's containerd and the Pod's
// container id, into the bottle's repository under the runtime's
// registry; it is indexed so that Read lists it (with the bottle gone
// too), resumes as the agent's image by digest, and its delete removes
// the manifest, the record and the emptied snapshot namespace.
func TestSnapshotTakeReadDelete(t *testing.T) {
	fakeGateway(t)
	host, deletes := fakeRegistry(t)
	f := newFakeCluster()
	d := testDriver(t, f, settings{registry: host + "/team", containerd: map[string]string{"node-1": "unix:///run/node-1/containerd.sock"}})
	plan, err := d.Plan(t.Context(), drivers.PlanRequest{Agent: coder()})
	if err != nil {
		t.Fatal(err)
	}
	applyAll(t, d, lineage, plan.Objects)
	ctx := t.Context()
	const ns = "bf-0f3a9c2e-coder"
	pod, err := f.CoreV1().Pods(ns).Get(ctx, podAgent, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod.Status.ContainerStatuses[0].ContainerID = "containerd://c0ffee"
	if _, err := f.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	const digest = "sha256:1111111111111111111111111111111111111111111111111111111111111111"
	var gotNode nodesnap.Node
	var gotID string
	var gotRef nodesnap.Ref
	commit = func(_ context.Context, node nodesnap.Node, id string, ref nodesnap.Ref) (string, int64, error) {
		gotNode, gotID, gotRef = node, id, ref
		return digest, 4096, nil
	}
	t.Cleanup(func() { commit = nodesnap.Commit })

	snap := drivers.Object{Addr: "snapshot.s1", Kind: drivers.KindSnapshot, Attrs: map[string]cty.Value{"agent": cty.StringVal("agent.coder")}}
	resp, err := d.Apply(ctx, drivers.ApplyRequest{Op: drivers.OpCreate, Lineage: lineage, Object: snap, Hash: "hash-s1"})
	if err != nil {
		t.Fatalf("taking the snapshot: %v", err)
	}
	wantImage := host + "/team/" + ns + "-snap@" + digest
	if resp.ID != wantImage || resp.Snapshot == nil || resp.Snapshot.Image != wantImage || resp.Snapshot.Size != 4096 || resp.Snapshot.Source != "c0ffee" {
		t.Fatalf("response %+v (snapshot %+v), want the image %s", resp, resp.Snapshot, wantImage)
	}
	if gotNode.Socket != "unix:///run/node-1/containerd.sock" || gotNode.Namespace != "k8s.io" || gotID != "c0ffee" {
		t.Errorf("committed %q on %+v, want c0ffee through node-1's containerd", gotID, gotNode)
	}
	if gotRef.Registry.Host != host || gotRef.Repo != "team/"+ns+"-snap" || gotRef.Lineage != lineage || gotRef.Agent != "agent.coder" || gotRef.Address != "snapshot.s1" {
		t.Errorf("ref %+v", gotRef)
	}

	// The bottle goes; the snapshot stays listed.
	if err := f.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := f.CoreV1().Pods(ns).Delete(ctx, podAgent, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	read, err := d.Read(ctx, drivers.ReadRequest{Lineage: lineage})
	if err != nil {
		t.Fatal(err)
	}
	var found *drivers.LiveObject
	for i, o := range read.Objects {
		if o.Kind == drivers.KindSnapshot {
			found = &read.Objects[i]
		}
		if o.Kind == kindNamespace && strings.HasSuffix(o.Name, "-snapshots") {
			t.Errorf("Read takes the snapshot namespace for a bottle: %+v", o)
		}
	}
	if found == nil || found.Addr != "snapshot.s1" || found.ID != wantImage || found.Hash != "hash-s1" || found.Runtime != "k" || found.Created.IsZero() {
		t.Fatalf("Read's snapshot: %+v (objects %+v)", found, read.Objects)
	}

	// Resume: the agent's Pod runs the snapshot by digest.
	var agentObj drivers.Object
	for _, o := range plan.Objects {
		if o.Addr == "agent.coder" {
			agentObj = o
		}
	}
	boot, err := podSpec(drivers.ApplyRequest{Op: drivers.OpCreate, Lineage: lineage, Object: agentObj, BootImage: wantImage}, ns)
	if err != nil {
		t.Fatal(err)
	}
	if img := boot.Spec.Containers[0].Image; img != wantImage {
		t.Errorf("a Pod booted from the snapshot runs %q", img)
	}

	if _, err := d.Apply(ctx, drivers.ApplyRequest{Op: drivers.OpDelete, Lineage: lineage, Object: snap, ID: resp.ID}); err != nil {
		t.Fatalf("deleting the snapshot: %v", err)
	}
	if got := deletes(); len(got) != 1 || got[0] != "/v2/team/"+ns+"-snap/manifests/"+digest {
		t.Errorf("registry deletes %v", got)
	}
	if _, err := f.CoreV1().Namespaces().Get(ctx, "bf-0f3a9c2e-snapshots", metav1.GetOptions{}); err == nil {
		t.Error("the snapshot namespace outlived its last snapshot")
	}
	read, err = d.Read(ctx, drivers.ReadRequest{Lineage: lineage})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range read.Objects {
		if o.Kind == drivers.KindSnapshot {
			t.Errorf("Read still lists %+v", o)
		}
	}
}

// TestSnapshotRefused: without the registry, the node's containerd or a
// Pod, taking a snapshot fails saying which.
func TestSnapshotRefused(t *testing.T) {
	fakeGateway(t)
	commit = func(context.Context, nodesnap.Node, string, nodesnap.Ref) (string, int64, error) {
		t.Fatal("nothing may be committed")
		return "", 0, nil
	}
	t.Cleanup(func() { commit = nodesnap.Commit })
	snap := drivers.Object{Addr: "snapshot.s1", Kind: drivers.KindSnapshot, Attrs: map[string]cty.Value{"agent": cty.StringVal("agent.coder")}}
	for _, tc := range []struct {
		name  string
		s     settings
		apply bool
		want  string
	}{
		{"no registry", settings{containerd: map[string]string{"node-1": "unix:///c.sock"}}, false, "has none: set registry"},
		{"no containerd for the node", settings{registry: "r:5000"}, true, `runs on node "node-1", and the runtime's node_containerd names no containerd for it`},
		{"no pod", settings{registry: "r:5000", containerd: map[string]string{"node-1": "unix:///c.sock"}}, false, "has no Pod"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeCluster()
			d := testDriver(t, f, tc.s)
			if tc.apply {
				plan, err := d.Plan(t.Context(), drivers.PlanRequest{Agent: coder()})
				if err != nil {
					t.Fatal(err)
				}
				applyAll(t, d, lineage, plan.Objects)
			}
			_, err := d.Apply(t.Context(), drivers.ApplyRequest{Op: drivers.OpCreate, Lineage: lineage, Object: snap})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one saying %q", err, tc.want)
			}
		})
	}
}

func TestSplitSnapshotRef(t *testing.T) {
	const d = "sha256:1111111111111111111111111111111111111111111111111111111111111111"
	reg, repo, dg, err := splitSnapshotRef("r:5000/team", "r:5000/team/bf-x-snap@"+d)
	if err != nil || reg.Host != "r:5000" || repo != "team/bf-x-snap" || dg != d {
		t.Fatalf("split = %v %q %q %v", reg, repo, dg, err)
	}
	for _, bad := range []string{"other:5000/bf-x-snap@" + d, "r:5000/bf-x-snap:tag", "busybox"} {
		if _, _, _, err := splitSnapshotRef("r:5000", bad); err == nil {
			t.Errorf("%q split without an error", bad)
		}
	}
}

// TestWritten: what the agent's container wrote is measured through the
// containerd of its Pod's node, by its container id; a node with no
// containerd named is unmeasured, saying so.
func TestWritten(t *testing.T) {
	fakeGateway(t)
	f := newFakeCluster()
	d := testDriver(t, f, settings{registry: "r:5000", containerd: map[string]string{"node-1": "unix:///run/node-1/containerd.sock"}})
	plan, err := d.Plan(t.Context(), drivers.PlanRequest{Agent: coder()})
	if err != nil {
		t.Fatal(err)
	}
	applyAll(t, d, lineage, plan.Objects)
	ctx := t.Context()
	const ns = "bf-0f3a9c2e-coder"
	pod, err := f.CoreV1().Pods(ns).Get(ctx, podAgent, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod.Status.ContainerStatuses[0].ContainerID = "containerd://c0ffee"
	made := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	pod.CreationTimestamp = metav1.NewTime(made)
	if _, err := f.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	var gotNode nodesnap.Node
	var gotID string
	written = func(_ context.Context, node nodesnap.Node, id string) (int64, error) {
		gotNode, gotID = node, id
		return 3 << 20, nil
	}
	t.Cleanup(func() { written = nodesnap.Written })
	read, err := d.Read(ctx, drivers.ReadRequest{Lineage: lineage})
	if err != nil {
		t.Fatal(err)
	}
	var agent drivers.LiveObject
	for _, o := range read.Objects {
		if o.Addr == "agent.coder" && o.Kind == kindPod {
			agent = o
		}
	}
	w, err := d.Written(ctx, lineage, agent)
	if err != nil {
		t.Fatal(err)
	}
	if w.Bytes != 3<<20 || !w.Since.Equal(made) || w.Unmeasured != "" || gotID != "c0ffee" || gotNode.Socket != "unix:///run/node-1/containerd.sock" {
		t.Fatalf("Written = %+v (container %q on %+v)", w, gotID, gotNode)
	}

	d2 := testDriver(t, f, settings{registry: "r:5000"})
	w, err = d2.Written(ctx, lineage, agent)
	if err != nil || w.Unmeasured == "" || !strings.Contains(w.Unmeasured, `node "node-1"`) {
		t.Fatalf("Written without the node's containerd = %+v, %v; want unmeasured, naming the node", w, err)
	}
}
