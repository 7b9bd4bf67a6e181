package kubernetes

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// TestWaitRunningWatches: waitRunning follows a starting Pod through one
// list and one watch, with no GET per poll, and it ends at the first
// status that says the Pod runs or will not.
func TestWaitRunningWatches(t *testing.T) {
	crash := func(p *corev1.Pod) {
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
			LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 3, Reason: "Error"}}}}
	}
	run := func(p *corev1.Pod) {
		p.Status.Phase = corev1.PodRunning
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
	}
	unschedulable := func(p *corev1.Pod) {
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: "0/1 nodes are available: 1 Insufficient cpu."}}
	}
	for _, tc := range []struct {
		name    string
		change  func(*corev1.Pod)
		wantErr string // "" runs
	}{
		{"runs", run, ""},
		{"keeps exiting", crash, "keeps exiting: it exited with code 3"},
		{"unschedulable", unschedulable, "Insufficient cpu"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: "ns", UID: "u1"},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}},
				Status:     corev1.PodStatus{Phase: corev1.PodPending},
			}
			other := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "gateway", Namespace: "ns", UID: "u2"}, Status: corev1.PodStatus{Phase: corev1.PodPending}}
			cs := fake.NewClientset(pod, other)
			watching := make(chan struct{})
			cs.PrependWatchReactor("pods", func(a k8stesting.Action) (bool, watch.Interface, error) {
				w, err := cs.Tracker().Watch(a.GetResource(), a.GetNamespace())
				close(watching)
				return true, w, err
			})
			type result struct {
				p   *corev1.Pod
				err error
			}
			done := make(chan result, 1)
			go func() {
				p, err := waitRunning(t.Context(), cs, "ns", "agent", "u1")
				done <- result{p, err}
			}()
			<-watching
			// Another Pod of the namespace changes first: not the one waited for.
			o := other.DeepCopy()
			crash(o)
			if _, err := cs.CoreV1().Pods("ns").UpdateStatus(t.Context(), o, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			p := pod.DeepCopy()
			tc.change(p)
			if _, err := cs.CoreV1().Pods("ns").UpdateStatus(t.Context(), p, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			r := <-done
			switch {
			case tc.wantErr == "" && r.err != nil:
				t.Errorf("waitRunning: %v", r.err)
			case tc.wantErr != "" && (r.err == nil || !strings.Contains(r.err.Error(), tc.wantErr)):
				t.Errorf("waitRunning: %v, want an error saying %q", r.err, tc.wantErr)
			case r.p == nil || r.p.Name != "agent":
				t.Errorf("waitRunning returned Pod %v", r.p)
			}
			verbs := map[string]int{}
			for _, a := range cs.Actions() {
				if a.GetResource().Resource == "pods" && a.GetSubresource() == "" {
					verbs[a.GetVerb()]++
				}
			}
			if verbs["get"] != 0 || verbs["list"] != 1 || verbs["watch"] != 1 {
				t.Errorf("waitRunning's calls %v, want one list and one watch", verbs)
			}
		})
	}
}
