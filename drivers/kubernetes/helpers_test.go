package kubernetes

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/zclconf/go-cty/cty"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/bottlefile/bottlefile/drivers"
)

// fakeCluster is a clientset with no scheduler or kubelet: a reactor
// plays both, placing each Pod at its creation as kubelet reports it
// (running, with an address), or, with unschedulable set, as the
// scheduler reports one it cannot place. Every object gets a UID.
type fakeCluster struct {
	*fake.Clientset
	unschedulable string // the scheduler's message; "" schedules
	nextIP        atomic.Int32
}

func newFakeCluster(objs ...runtime.Object) *fakeCluster {
	f := &fakeCluster{Clientset: fake.NewClientset(objs...)}
	var n atomic.Int64
	f.PrependReactor("create", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		obj := a.(k8stesting.CreateAction).GetObject()
		m, err := metaOf(obj)
		if err == nil && m.GetUID() == "" {
			m.SetUID(types.UID(fmt.Sprintf("uid-%d", n.Add(1))))
		}
		if p, ok := obj.(*corev1.Pod); ok {
			f.place(p)
		}
		if s, ok := obj.(*corev1.Service); ok && s.Spec.ClusterIP == "" {
			s.Spec.ClusterIP = fmt.Sprintf("10.96.0.%d", n.Add(1))
		}
		return false, nil, nil
	})
	return f
}

func metaOf(obj runtime.Object) (metav1.Object, error) {
	m, ok := obj.(metav1.Object)
	if !ok {
		return nil, fmt.Errorf("%T has no metadata", obj)
	}
	return m, nil
}

func (f *fakeCluster) place(p *corev1.Pod) {
	if f.unschedulable != "" {
		p.Status.Phase = corev1.PodPending
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: f.unschedulable}}
		return
	}
	p.Spec.NodeName = "node-1"
	p.Status.Phase = corev1.PodRunning
	p.Status.PodIP = fmt.Sprintf("10.244.0.%d", f.nextIP.Add(1)+10)
	now := metav1.Now()
	for _, c := range p.Spec.Containers {
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{Name: c.Name, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}})
	}
}

// testDriver is a driver configured against the fake cluster.
func testDriver(t *testing.T, f *fakeCluster, s settings) *Driver {
	t.Helper()
	d, err := New(nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.runtime == "" {
		s.runtime = "k"
	}
	if s.prefix == "" {
		s.prefix = defaultPrefix
	}
	kd := d.(*Driver)
	kd.set(s, nil, f)
	return kd
}

// lists counts the list calls the fake saw, by resource.
func lists(f *fakeCluster) map[string]int {
	out := map[string]int{}
	for _, a := range f.Actions() {
		if a.GetVerb() == "list" {
			out[a.GetResource().Resource]++
		}
	}
	return out
}

func workload(attrs map[string]cty.Value) cty.Value { return drivers.MustWorkload(attrs) }

func strs(ss ...string) cty.Value {
	vals := make([]cty.Value, len(ss))
	for i, s := range ss {
		vals[i] = cty.StringVal(s)
	}
	return cty.ListVal(vals)
}

// applyAll creates planned objects in dependency order (the plan's
// order is already one: namespace, then what depends on it, with the
// sidecars before the agent).
func applyAll(t *testing.T, d *Driver, lineage string, objs []drivers.Object) map[string]drivers.ApplyResponse {
	t.Helper()
	out := map[string]drivers.ApplyResponse{}
	done := map[string]bool{}
	for len(done) < len(objs) {
		progress := false
		for _, o := range objs {
			if done[o.Addr] {
				continue
			}
			ready := true
			for _, dep := range o.DependsOn {
				if !done[dep] {
					ready = false
				}
			}
			if !ready {
				continue
			}
			resp, err := d.Apply(t.Context(), drivers.ApplyRequest{Op: drivers.OpCreate, Lineage: lineage, Object: o, Hash: "hash-" + o.Addr})
			if err != nil {
				t.Fatalf("create %s: %v", o.Addr, err)
			}
			out[o.Addr], done[o.Addr], progress = resp, true, true
		}
		if !progress {
			t.Fatalf("the plan's dependencies form a cycle or name what it lacks: %v", objs)
		}
	}
	return out
}
