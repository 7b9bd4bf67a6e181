package kubernetes

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	netv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	k8s "k8s.io/client-go/kubernetes"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/gateway"
)

// A bottle is a namespace. Its NetworkPolicies fence it: its Pods reach
// each other and the cluster's DNS, nothing else, and nothing from
// another namespace reaches them; the gateway's Pod alone reaches out.
// The gateway's Service, whose address the workloads' host aliases name,
// lives as long as the namespace, so a new gateway keeps it.

// policies are a bottle's NetworkPolicies.
func policies(ns string, labels map[string]string) []*netv1.NetworkPolicy {
	udp, tcp := corev1.ProtocolUDP, corev1.ProtocolTCP
	dns := intstr.FromInt32(53)
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels}
	}
	same := []netv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{}}}
	return []*netv1.NetworkPolicy{
		{
			ObjectMeta: meta(policyFence),
			Spec: netv1.NetworkPolicySpec{
				PodSelector: metav1.LabelSelector{},
				PolicyTypes: []netv1.PolicyType{netv1.PolicyTypeIngress, netv1.PolicyTypeEgress},
				Ingress:     []netv1.NetworkPolicyIngressRule{{From: same}},
				Egress: []netv1.NetworkPolicyEgressRule{
					{To: same},
					{
						To: []netv1.NetworkPolicyPeer{{
							NamespaceSelector: &metav1.LabelSelector{},
							PodSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"k8s-app": "kube-dns"}},
						}},
						Ports: []netv1.NetworkPolicyPort{{Protocol: &udp, Port: &dns}, {Protocol: &tcp, Port: &dns}},
					},
				},
			},
		},
		{
			ObjectMeta: meta(policyEgress),
			Spec: netv1.NetworkPolicySpec{
				PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{labelRole: roleGateway}},
				PolicyTypes: []netv1.PolicyType{netv1.PolicyTypeEgress},
				Egress:      []netv1.NetworkPolicyEgressRule{{}},
			},
		},
	}
}

// gatewayService is the Service the workloads reach their gateway by.
func gatewayService(ns string, labels map[string]string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: svcGateway, Namespace: ns, Labels: labels},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{labelRole: roleGateway},
			Ports:    []corev1.ServicePort{{Name: "proxy", Port: gateway.Port, TargetPort: intstr.FromInt32(gateway.Port), Protocol: corev1.ProtocolTCP}},
		},
	}
}

// createNamespace makes a bottle's namespace, its policies and, for a
// bottle with egress, its gateway's Service. A namespace of this lineage
// an earlier, cut-off apply left is taken as it is; one being deleted is
// waited for.
func (d *Driver) createNamespace(ctx context.Context, cs k8s.Interface, cfg settings, req drivers.ApplyRequest) (drivers.ApplyResponse, error) {
	addr := req.Object.Addr
	name, err := namespaceName(cfg.prefix, req.Lineage, req.NamedAddr(addr))
	if err != nil {
		return drivers.ApplyResponse{}, err
	}
	fail := func(format string, args ...any) (drivers.ApplyResponse, error) {
		return drivers.ApplyResponse{}, fmt.Errorf("creating namespace %s for %s: %s", name, addr, fmt.Sprintf(format, args...))
	}
	labels := objectLabels(req, "")
	want := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: objectAnnotations(req)}}
	var ns *corev1.Namespace
	fresh := true // made now: it holds no gateway Service to remove
	for {
		ns, err = cs.CoreV1().Namespaces().Create(ctx, want, metav1.CreateOptions{})
		if !apierrors.IsAlreadyExists(err) {
			break
		}
		old, gerr := cs.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
		if gerr != nil {
			if apierrors.IsNotFound(gerr) {
				continue
			}
			return fail("%v", gerr)
		}
		if old.Labels[drivers.LabelLineage] != req.Lineage {
			return fail("a namespace of that name exists and is not this state's (its lineage label is %q): remove it, or set another namespace_prefix", old.Labels[drivers.LabelLineage])
		}
		if old.DeletionTimestamp != nil {
			if err := waitNamespaceGone(ctx, cs, name); err != nil {
				return fail("%v", err)
			}
			continue
		}
		old.Annotations = want.Annotations
		fresh = false
		if ns, err = cs.CoreV1().Namespaces().Update(ctx, old, metav1.UpdateOptions{}); err != nil {
			return fail("taking over what an earlier apply left: %v", err)
		}
		break
	}
	if err != nil {
		return fail("%v", err)
	}
	for _, p := range policies(name, labels) {
		if _, err := cs.NetworkingV1().NetworkPolicies(name).Create(ctx, p, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fail("NetworkPolicy %s: %v", p.Name, err)
		}
	}
	if err := d.syncGatewayService(ctx, cs, name, labels, req.Object, !fresh); err != nil {
		return fail("%v", err)
	}
	d.log.Info("created namespace", "addr", addr, "namespace", name)
	return drivers.ApplyResponse{ID: string(ns.UID), Computed: map[string]string{"name": name}}, nil
}

// updateNamespace makes or removes the gateway's Service, as the
// bottle gains or loses its egress block.
func (d *Driver) updateNamespace(ctx context.Context, cs k8s.Interface, cfg settings, req drivers.ApplyRequest) (drivers.ApplyResponse, error) {
	name, err := namespaceName(cfg.prefix, req.Lineage, req.NamedAddr(req.Object.Addr))
	if err != nil {
		return drivers.ApplyResponse{}, err
	}
	if err := d.syncGatewayService(ctx, cs, name, objectLabels(req, ""), req.Object, true); err != nil {
		return drivers.ApplyResponse{}, fmt.Errorf("updating namespace %s of %s: %w", name, req.Object.Addr, err)
	}
	ns, err := cs.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return drivers.ApplyResponse{}, err
	}
	ns.Annotations[drivers.LabelConfigHash] = req.Hash
	if _, err := cs.CoreV1().Namespaces().Update(ctx, ns, metav1.UpdateOptions{}); err != nil {
		return drivers.ApplyResponse{}, err
	}
	return drivers.ApplyResponse{ID: string(ns.UID), Computed: map[string]string{"name": name}}, nil
}

// syncGatewayService makes the gateway's Service when the bottle has
// egress, else removes it; may says whether there may be one to remove
// (not in a namespace just made).
func (d *Driver) syncGatewayService(ctx context.Context, cs k8s.Interface, ns string, labels map[string]string, o drivers.Object, may bool) error {
	want := false
	if v := o.Attr("gateway"); !v.IsNull() && v.IsKnown() {
		want = v.True()
	}
	if want {
		_, err := cs.CoreV1().Services(ns).Create(ctx, gatewayService(ns, labels), metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("the gateway's Service: %w", err)
		}
		return nil
	}
	if !may {
		return nil
	}
	err := cs.CoreV1().Services(ns).Delete(ctx, svcGateway, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("removing the gateway's Service: %w", err)
	}
	return nil
}

// deleteNamespace deletes a bottle's namespace, with all it holds, and
// waits until it is gone, so that the next apply can make it again.
func (d *Driver) deleteNamespace(ctx context.Context, cs k8s.Interface, cfg settings, req drivers.ApplyRequest) (drivers.ApplyResponse, error) {
	name, err := namespaceName(cfg.prefix, req.Lineage, req.NamedAddr(req.Object.Addr))
	if err != nil {
		return drivers.ApplyResponse{}, err
	}
	ns, err := cs.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return drivers.ApplyResponse{}, nil
	}
	if err != nil {
		return drivers.ApplyResponse{}, err
	}
	if ns.Labels[drivers.LabelLineage] != req.Lineage {
		return drivers.ApplyResponse{}, fmt.Errorf("deleting namespace %s of %s: it is not this state's (its lineage label is %q)", name, req.Object.Addr, ns.Labels[drivers.LabelLineage])
	}
	uid := ns.UID
	err = cs.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if err != nil && !apierrors.IsNotFound(err) {
		return drivers.ApplyResponse{}, fmt.Errorf("deleting namespace %s of %s: %w", name, req.Object.Addr, err)
	}
	if err := waitNamespaceGone(ctx, cs, name); err != nil {
		return drivers.ApplyResponse{}, fmt.Errorf("deleting namespace %s of %s: %w", name, req.Object.Addr, err)
	}
	d.log.Info("deleted namespace", "addr", req.Object.Addr, "namespace", name)
	return drivers.ApplyResponse{}, nil
}

func waitNamespaceGone(ctx context.Context, cs k8s.Interface, name string) error {
	deadline := time.Now().Add(podGone)
	for {
		_, err := cs.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("namespace %s is still being deleted after %v", name, podGone)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(poll):
		}
	}
}
