package kubernetes

import (
	"net/netip"
	"testing"

	corev1 "k8s.io/api/core/v1"
	netv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bottlefile/bottlefile/drivers"
)

// TestWithout: a Service range less the addresses kept covers every
// other address of the range and none of those kept.
func TestWithout(t *testing.T) {
	r := netip.MustParsePrefix("10.96.0.0/24")
	keep := []netip.Addr{netip.MustParseAddr("10.96.0.10"), netip.MustParseAddr("10.96.0.200"), netip.MustParseAddr("10.97.0.1")}
	out := without(r, keep)
	covered := func(a netip.Addr) bool {
		for _, p := range out {
			if p.Contains(a) {
				return true
			}
		}
		return false
	}
	n := 0
	for a := r.Addr(); r.Contains(a); a = a.Next() {
		kept := a == keep[0] || a == keep[1]
		if covered(a) == kept {
			t.Errorf("%s: covered %v, kept %v", a, covered(a), kept)
		}
		n++
	}
	if n != 256 || len(out) > 2*8 {
		t.Errorf("%d addresses, %d prefixes %v", n, len(out), out)
	}
	if got := without(r, nil); len(got) != 1 || got[0] != r {
		t.Errorf("nothing kept: %v", got)
	}
}

// TestServiceRanges: a gateway's forbid list holds the cluster's Service
// ranges but the addresses of Services outside the bottles; a bottle's
// Service and the API server's stay forbidden.
func TestServiceRanges(t *testing.T) {
	bottleNS := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "bf-x-coder", Labels: map[string]string{drivers.LabelLineage: lineage}, Annotations: map[string]string{drivers.LabelAddress: "agent.coder.network"}}}
	// Labelled with the lineage alone (for a cleanup): no bottle.
	other := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop", Labels: map[string]string{drivers.LabelLineage: lineage}}}
	svc := func(ns, name, ip string) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: corev1.ServiceSpec{ClusterIP: ip, ClusterIPs: []string{ip}}}
	}
	cidr := &netv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: "kubernetes"}, Spec: netv1.ServiceCIDRSpec{CIDRs: []string{"10.96.0.0/16"}}}
	f := newFakeCluster(bottleNS, other, cidr, svc("default", "kubernetes", "10.96.0.1"), svc("bf-x-coder", "gateway", "10.96.3.4"), svc("shop", "api", "10.96.7.8"))
	d := testDriver(t, f, settings{registry: "r:5000"})
	forbid := d.clusterForbid(t.Context(), f)
	in := func(s string) bool {
		a := netip.MustParseAddr(s)
		for _, p := range forbid {
			if p.Contains(a) {
				return true
			}
		}
		return false
	}
	for ip, want := range map[string]bool{"10.96.0.1": true, "10.96.3.4": true, "10.96.200.1": true, "10.96.7.8": false} {
		if in(ip) != want {
			t.Errorf("%s forbidden: %v, want %v (forbid %v)", ip, in(ip), want, forbid)
		}
	}
}
