package kubernetes

import (
	"context"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bottlefile/bottlefile/drivers"
)

// Read lists the namespaces, Pods, gateway ConfigMaps and NetworkPolicies
// of one lineage, one list call per kind across all namespaces, selected
// by the lineage label. A Pod deleted behind bottlefile's back is gone
// from the list: its workload reads as gone (a gateway's, as not
// running).
func (d *Driver) Read(ctx context.Context, req drivers.ReadRequest) (drivers.ReadResponse, error) {
	var resp drivers.ReadResponse
	if req.Lineage == "" {
		return resp, nil
	}
	cs, _, err := d.client()
	if err != nil {
		return resp, err
	}
	sel := metav1.ListOptions{LabelSelector: drivers.LabelLineage + "=" + req.Lineage}
	nss, err := cs.CoreV1().Namespaces().List(ctx, sel)
	if err != nil {
		return resp, d.unreachable(fmt.Errorf("listing namespaces of lineage %s: %w", req.Lineage, err))
	}
	pods, err := cs.CoreV1().Pods(metav1.NamespaceAll).List(ctx, sel)
	if err != nil {
		return resp, d.unreachable(fmt.Errorf("listing Pods of lineage %s: %w", req.Lineage, err))
	}
	cms, err := cs.CoreV1().ConfigMaps(metav1.NamespaceAll).List(ctx, sel)
	if err != nil {
		return resp, d.unreachable(fmt.Errorf("listing ConfigMaps of lineage %s: %w", req.Lineage, err))
	}
	pols, err := cs.NetworkingV1().NetworkPolicies(metav1.NamespaceAll).List(ctx, sel)
	if err != nil {
		return resp, d.unreachable(fmt.Errorf("listing NetworkPolicies of lineage %s: %w", req.Lineage, err))
	}
	policies := map[string]map[string]int64{}
	for _, p := range pols.Items {
		if policies[p.Namespace] == nil {
			policies[p.Namespace] = map[string]int64{}
		}
		policies[p.Namespace][p.Name] = p.Generation
	}
	gwPods := map[string]*corev1.Pod{}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.DeletionTimestamp != nil {
			// Being deleted, by bottlefile (which does not wait for a
			// Pod to go) or anyone: it is gone, as a deleted Pod is.
			continue
		}
		if p.Labels[labelRole] == roleGateway {
			gwPods[p.Namespace] = p
			continue
		}
		o, ok := d.live(p.ObjectMeta, kindPod, string(p.UID), p.Namespace+"/"+p.Name)
		if !ok {
			continue
		}
		podFacts(&o, p)
		o.Drift = podDrift(p)
		resp.Objects = append(resp.Objects, o)
	}
	for _, cm := range cms.Items {
		if o, ok := d.snapshotObject(&cm); ok {
			resp.Objects = append(resp.Objects, o)
			continue
		}
		if cm.Labels[labelRole] != roleGateway {
			continue
		}
		o, ok := d.live(cm.ObjectMeta, kindGateway, string(cm.UID), cm.Namespace+"/"+podGateway)
		if !ok {
			continue
		}
		if p := gwPods[cm.Namespace]; p != nil {
			podFacts(&o, p)
			o.Drift = podDrift(p)
		} else {
			o.State = drivers.StateExited
			o.Exit = &drivers.Exit{Stopped: true, Error: "its Pod was deleted outside bottlefile"}
		}
		resp.Objects = append(resp.Objects, o)
	}
	for _, ns := range nss.Items {
		o, ok := d.live(ns.ObjectMeta, kindNamespace, string(ns.UID), ns.Name)
		if !ok {
			continue
		}
		if ns.DeletionTimestamp != nil {
			o.Unfinished = true
		}
		o.Created = ns.CreationTimestamp.UTC()
		o.Drift = policyDrift(policies[ns.Name])
		resp.Objects = append(resp.Objects, o)
	}
	drivers.SortLive(resp.Objects)
	return resp, nil
}

// live is the object a runtime object with these labels and annotations
// is: the address, hash and runtime are annotations (names.go).
func (d *Driver) live(m metav1.ObjectMeta, kind, id, name string) (drivers.LiveObject, bool) {
	all := map[string]string{}
	maps.Copy(all, m.Labels)
	maps.Copy(all, m.Annotations)
	return drivers.Labelled(d.log, all, kind, id, name)
}

// podFacts fills a workload's state from its Pod: "running" once its
// container runs, "created" while it is scheduled or started, "exited"
// with its code once it ended (a Pod that ended, or a container that
// keeps failing and waits to be restarted).
func podFacts(o *drivers.LiveObject, p *corev1.Pod) {
	o.Created = p.CreationTimestamp.UTC()
	o.Node = p.Spec.NodeName
	o.ImageID = ""
	if len(p.Spec.Containers) > 0 {
		o.ImageID = p.Spec.Containers[0].Image
	}
	if p.DeletionTimestamp != nil {
		o.State = drivers.StateExited
		o.Exit = &drivers.Exit{Stopped: true, Error: "its Pod is being deleted"}
		return
	}
	var cst *corev1.ContainerStatus
	if len(p.Status.ContainerStatuses) > 0 {
		cst = &p.Status.ContainerStatuses[0]
	}
	switch {
	case p.Status.Phase == corev1.PodRunning && cst != nil && cst.State.Running != nil:
		o.Running = true
		o.State = drivers.StateRunning
		o.Started = cst.State.Running.StartedAt.UTC()
		if cst.RestartCount > 0 {
			o.Restarted = fmt.Sprintf("its container was restarted %d times by the kubelet", cst.RestartCount)
		}
	case cst != nil && cst.State.Terminated != nil:
		t := cst.State.Terminated
		o.State, o.ExitCode = drivers.StateExited, int(t.ExitCode)
		o.Finished = t.FinishedAt.UTC()
		o.Exit = &drivers.Exit{Code: int(t.ExitCode), At: o.Finished, OOMKilled: t.Reason == "OOMKilled", Error: t.Message}
	case cst != nil && cst.State.Waiting != nil && cst.LastTerminationState.Terminated != nil:
		t := cst.LastTerminationState.Terminated
		o.State, o.ExitCode = drivers.StateExited, int(t.ExitCode)
		o.Finished = t.FinishedAt.UTC()
		o.Exit = &drivers.Exit{Code: int(t.ExitCode), At: o.Finished, OOMKilled: t.Reason == "OOMKilled", Error: cst.State.Waiting.Reason}
	case p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded:
		o.State = drivers.StateExited
		o.Exit = &drivers.Exit{Error: p.Status.Message}
	default:
		o.State = drivers.StateCreated
		if err := podProblem(p); err != nil {
			o.Exit = &drivers.Exit{Error: err.Error()}
		}
	}
}
