package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	k8s "k8s.io/client-go/kubernetes"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/gateway"
	"github.com/bottlefile/bottlefile/egress"
)

// A bottle's gateway is its ConfigMap (the rules and forbid files, and
// the object's id: it lasts through an update) and its Pod, which mounts
// it, behind the Service the namespace holds. A new allowlist is a new
// ConfigMap content and a new Pod: a ConfigMap volume reaches a running
// Pod only after the kubelet's sync, up to a minute later.

// gatewayReady bounds how long create and update wait for a new gateway
// Pod to report that it listens with its rules.
var gatewayReady = 30 * time.Second

// gatewayBinary reads and hashes the gateway binary, once per
// configured driver.
func (d *Driver) gatewayBinary(cfg settings) (gateway.Binary, error) {
	d.mu.RLock()
	g := d.gwImage
	d.mu.RUnlock()
	if g == nil {
		return gateway.Binary{}, errors.New("kubernetes driver is not configured")
	}
	g.binOnce.Do(func() { g.bin, g.binErr = gateway.ReadBinary(cfg.binary) })
	return g.bin, g.binErr
}

// gatewayImage is the gateway image as the cluster pulls it, pushed once
// per configured driver.
type gatewayImage struct {
	binOnce sync.Once
	bin     gateway.Binary
	binErr  error

	mu  sync.Mutex
	ref string
}

// gatewayRef pushes the gateway image of the binary to the registry
// (once) and returns its reference by digest.
func (d *Driver) gatewayRef(ctx context.Context, cfg settings) (string, string, error) {
	bin, err := d.gatewayBinary(cfg)
	if err != nil {
		return "", "", err
	}
	d.mu.RLock()
	g := d.gwImage
	d.mu.RUnlock()
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.ref != "" {
		return g.ref, bin.Version(), nil
	}
	if cfg.registry == "" {
		return "", "", errors.New("the runtime has no registry to push the gateway image to")
	}
	ref, err := pushGatewayImage(ctx, cfg.registry, bin)
	if err != nil {
		return "", "", fmt.Errorf("pushing the gateway image to %s: %w", cfg.registry, err)
	}
	d.log.Info("pushed the gateway image", "ref", ref)
	g.ref = ref
	return ref, bin.Version(), nil
}

// clusterFacts are what a gateway's forbid file holds of the cluster:
// its nodes' addresses and Pod ranges, and the API server's addresses.
type clusterFacts struct {
	mu     sync.Mutex
	done   bool
	forbid []netip.Prefix
}

func (d *Driver) clusterForbid(ctx context.Context, cs k8s.Interface) []netip.Prefix {
	d.mu.RLock()
	f := d.facts
	d.mu.RUnlock()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.done {
		return f.forbid
	}
	var out []netip.Prefix
	add := func(s string) {
		if p, err := netip.ParsePrefix(s); err == nil {
			out = append(out, p.Masked())
		} else if a, err := netip.ParseAddr(s); err == nil {
			out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
		}
	}
	if nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); err == nil {
		for _, n := range nodes.Items {
			for _, a := range n.Status.Addresses {
				add(a.Address)
			}
			for _, c := range n.Spec.PodCIDRs {
				add(c)
			}
		}
	} else {
		d.log.Warn("cannot list the nodes to forbid their addresses to gateways", "error", err)
	}
	if svc, err := cs.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{}); err == nil {
		for _, ip := range svc.Spec.ClusterIPs {
			add(ip)
		}
	}
	out = append(out, d.serviceRanges(ctx, cs)...)
	if slices, err := cs.DiscoveryV1().EndpointSlices("default").List(ctx, metav1.ListOptions{LabelSelector: "kubernetes.io/service-name=kubernetes"}); err == nil {
		for _, sl := range slices.Items {
			for _, e := range sl.Endpoints {
				for _, a := range e.Addresses {
					add(a)
				}
			}
		}
	}
	d.mu.RLock()
	if d.rest != nil {
		host := d.rest.Host
		if i := strings.Index(host, "://"); i >= 0 {
			host = host[i+3:]
		}
		if h, _, err := net.SplitHostPort(strings.TrimSuffix(host, "/")); err == nil {
			add(h)
		}
	}
	d.mu.RUnlock()
	f.done, f.forbid = true, egress.CompactPrefixes(out)
	return f.forbid
}

// serviceRanges is what a gateway may not reach of the cluster's Service
// ranges (networking.k8s.io/v1 ServiceCIDR, Kubernetes 1.33+): all of
// them but the addresses of the Services that exist now outside any
// bottle's namespace (an allowed host may be a cluster Service), so an
// allowlist can never send a gateway to another bottle's Service, nor to
// a Service made after it started. Nothing when the ranges cannot be
// listed (an older cluster, or the list refused): the API server's
// Service address is forbidden anyway.
func (d *Driver) serviceRanges(ctx context.Context, cs k8s.Interface) []netip.Prefix {
	cidrs, err := cs.NetworkingV1().ServiceCIDRs().List(ctx, metav1.ListOptions{})
	if err != nil {
		d.log.Warn("cannot list the cluster's Service ranges to forbid them to gateways; forbidding the API server's Service address only", "error", err)
		return nil
	}
	var ranges []netip.Prefix
	for _, c := range cidrs.Items {
		for _, r := range c.Spec.CIDRs {
			if p, err := netip.ParsePrefix(r); err == nil {
				ranges = append(ranges, p.Masked())
			}
		}
	}
	if len(ranges) == 0 {
		return nil
	}
	bottles := map[string]bool{}
	nss, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{LabelSelector: drivers.LabelLineage})
	if err != nil {
		d.log.Warn("cannot list the bottles' namespaces; forbidding the whole Service range to gateways", "error", err)
		return ranges
	}
	for _, ns := range nss.Items {
		// A bottle's namespace carries its address too; a namespace
		// labelled with a lineage alone (a test's, for its cleanup) is
		// no bottle.
		if ns.Annotations[drivers.LabelAddress] != "" {
			bottles[ns.Name] = true
		}
	}
	svcs, err := cs.CoreV1().Services(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		d.log.Warn("cannot list the Services; forbidding the whole Service range to gateways", "error", err)
		return ranges
	}
	var keep []netip.Addr
	for _, svc := range svcs.Items {
		if bottles[svc.Namespace] || (svc.Namespace == "default" && svc.Name == "kubernetes") {
			continue
		}
		for _, ip := range svc.Spec.ClusterIPs {
			if a, err := netip.ParseAddr(ip); err == nil {
				keep = append(keep, a.Unmap())
			}
		}
	}
	var out []netip.Prefix
	for _, r := range ranges {
		out = append(out, without(r, keep)...)
	}
	return out
}

// without is p less the addresses keep: the fewest prefixes that cover
// the rest of p (about p's host bits of them per address kept).
func without(p netip.Prefix, keep []netip.Addr) []netip.Prefix {
	var in []netip.Addr
	for _, a := range keep {
		if p.Contains(a) {
			in = append(in, a)
		}
	}
	if len(in) == 0 {
		return []netip.Prefix{p}
	}
	if p.Bits() == p.Addr().BitLen() {
		return nil // the one address, kept
	}
	lo := netip.PrefixFrom(p.Addr(), p.Bits()+1)
	b := p.Addr().AsSlice()
	bit := p.Bits()
	b[bit/8] |= 0x80 >> (bit % 8)
	hiAddr, _ := netip.AddrFromSlice(b)
	hi := netip.PrefixFrom(hiAddr, p.Bits()+1)
	return append(without(lo, in), without(hi, in)...)
}

// gatewaySpec is a gateway object's attributes, decoded.
type gatewaySpec struct {
	gateway.Attrs
	place placement
}

func decodeGateway(o drivers.Object) (gatewaySpec, error) {
	a, err := gateway.DecodeAttrs(o)
	if err != nil {
		return gatewaySpec{}, err
	}
	p, err := placementOf(o)
	return gatewaySpec{Attrs: a, place: p}, err
}

// gatewayConfigMap is the ConfigMap of a gateway: its rules and forbid
// files.
func (d *Driver) gatewayConfigMap(ctx context.Context, cs k8s.Interface, req drivers.ApplyRequest, ns string, s gatewaySpec) (*corev1.ConfigMap, error) {
	rules, err := gateway.RulesData(s.Agent, s.Allow, s.Sidecars)
	if err != nil {
		return nil, fmt.Errorf("rules: %w", err)
	}
	forbid, err := gateway.ForbidData(d.clusterForbid(ctx, cs))
	if err != nil {
		return nil, err
	}
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: cmGateway, Namespace: ns, Labels: objectLabels(req, roleGateway), Annotations: objectAnnotations(req)},
		Data:       map[string]string{gateway.RulesFile: string(rules), gateway.ForbidFile: string(forbid)},
	}, nil
}

// gatewayPod is the gateway's Pod, running ref, mounting the ConfigMap.
// What a gateway's Pod requests of its node, under its limits
// (gateway.CPUs, gateway.Memory).
const (
	gatewayCPURequest    = 10       // millicores
	gatewayMemoryRequest = 32 << 20 // bytes
)

func gatewayPod(req drivers.ApplyRequest, ns, ref string, s gatewaySpec, credVersion string) *corev1.Pod {
	uid, no, grace := int64(65534), false, gracePeriod
	args := []string{"gateway",
		"-listen", fmt.Sprintf(":%d", gateway.Port),
		"-rules", gateway.RulesDir + "/" + gateway.RulesFile,
		"-forbid-file", gateway.RulesDir + "/" + gateway.ForbidFile}
	args = append(args, gateway.CeilingArgs(s.Ceiling)...)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: podGateway, Namespace: ns, Labels: objectLabels(req, roleGateway), Annotations: objectAnnotations(req)},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name:            "gateway",
				Image:           ref,
				Command:         []string{"/bottlefile"},
				Args:            args,
				ImagePullPolicy: corev1.PullIfNotPresent,
				Env:             []corev1.EnvVar{{Name: "GOMEMLIMIT", Value: fmt.Sprintf("%dMiB", gateway.Memory*5/8>>20)}},
				Ports:           []corev1.ContainerPort{{Name: "proxy", ContainerPort: gateway.Port}},
				Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{
					corev1.ResourceCPU:    *resource.NewMilliQuantity(gateway.CPUs/1e6, resource.DecimalSI),
					corev1.ResourceMemory: *resource.NewQuantity(gateway.Memory, resource.BinarySI),
				}, Requests: corev1.ResourceList{
					// A gateway idles between an agent's requests: it asks
					// the scheduler for little, so that a node holds one
					// per bottle (limits alone make the requests equal to
					// them, and a 2-CPU node held two gateways).
					corev1.ResourceCPU:    *resource.NewMilliQuantity(gatewayCPURequest, resource.DecimalSI),
					corev1.ResourceMemory: *resource.NewQuantity(gatewayMemoryRequest, resource.BinarySI),
				}},
				SecurityContext: &corev1.SecurityContext{
					RunAsUser: &uid, RunAsGroup: &uid, RunAsNonRoot: new(bool),
					AllowPrivilegeEscalation: &no,
					Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				},
				VolumeMounts: []corev1.VolumeMount{{Name: "rules", MountPath: gateway.RulesDir, ReadOnly: true}},
			}},
			Volumes: []corev1.Volume{{Name: "rules", VolumeSource: corev1.VolumeSource{
				ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: cmGateway}},
			}}},
			RestartPolicy:                 corev1.RestartPolicyAlways,
			AutomountServiceAccountToken:  &no,
			EnableServiceLinks:            &no,
			TerminationGracePeriodSeconds: &grace,
			NodeSelector:                  s.place.NodeSelector,
			Tolerations:                   s.place.Tolerations,
		},
	}
	*pod.Spec.Containers[0].SecurityContext.RunAsNonRoot = true
	if len(s.DNS) > 0 {
		pod.Spec.DNSPolicy = corev1.DNSNone
		pod.Spec.DNSConfig = &corev1.PodDNSConfig{Nameservers: s.DNS}
	}
	if credVersion != "" {
		mountCredentials(pod)
	}
	pod.Annotations[annotSpec] = podFingerprint(pod)
	return pod
}

// createGateway makes a bottle's gateway: its ConfigMap, then its Pod,
// and waits until the Pod reports its rules in force.
func (d *Driver) createGateway(ctx context.Context, cs k8s.Interface, cfg settings, req drivers.ApplyRequest) (drivers.ApplyResponse, error) {
	addr := req.Object.Addr
	ns, err := namespaceName(cfg.prefix, req.Lineage, req.NamedAddr(addr))
	if err != nil {
		return drivers.ApplyResponse{}, err
	}
	fail := func(format string, args ...any) (drivers.ApplyResponse, error) {
		return drivers.ApplyResponse{}, fmt.Errorf("creating gateway %s/%s for %s: %s", ns, podGateway, addr, fmt.Sprintf(format, args...))
	}
	s, err := decodeGateway(req.Object)
	if err != nil {
		return fail("%v", err)
	}
	ref, version, err := d.gatewayRef(ctx, cfg)
	if err != nil {
		return fail("%v", err)
	}
	if s.Version != "" && s.Version != version {
		return fail("the gateway binary changed since the plan (now %s, planned %s); plan again", version, s.Version)
	}
	cm, err := d.gatewayConfigMap(ctx, cs, req, ns, s)
	if err != nil {
		return fail("%v", err)
	}
	made, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		if err = cs.CoreV1().ConfigMaps(ns).Delete(ctx, cmGateway, metav1.DeleteOptions{}); err == nil {
			made, err = cs.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{})
		}
	}
	if err != nil {
		return fail("its ConfigMap: %v", err)
	}
	credVersion, err := d.writeCredentials(ctx, cs, cfg, req, ns, false)
	if err == nil {
		var resp drivers.ApplyResponse
		if resp, err = d.runGateway(ctx, cs, req, ns, ref, s, credVersion); err == nil {
			resp.ID = string(made.UID)
			d.log.Info("created gateway", "addr", addr, "namespace", ns, "allow", len(s.Allow), "credentials", credVersion != "")
			return resp, nil
		}
	}
	_ = deleteCredentials(context.WithoutCancel(ctx), cs, ns)
	_ = cs.CoreV1().ConfigMaps(ns).Delete(context.WithoutCancel(ctx), cmGateway, metav1.DeleteOptions{})
	return fail("%v", err)
}

// writeCredentials puts the gateway object's credentials file into its
// Secret, or, when it has no credentials and may have had some
// (an update), removes the Secret; it returns the file's version, ""
// without credentials.
func (d *Driver) writeCredentials(ctx context.Context, cs k8s.Interface, cfg settings, req drivers.ApplyRequest, ns string, update bool) (string, error) {
	f, ok, err := d.credentialsFile(cfg, req)
	if err != nil {
		return "", err
	}
	if !ok {
		if update {
			return "", deleteCredentials(ctx, cs, ns)
		}
		return "", nil
	}
	if err := putCredentials(ctx, cs, req, ns, f); err != nil {
		return "", fmt.Errorf("its Secret: %w", err)
	}
	return f.Version, nil
}

// runGateway makes the gateway's Pod and waits for its rules, and the
// credentials file of credVersion when there is one, in force.
func (d *Driver) runGateway(ctx context.Context, cs k8s.Interface, req drivers.ApplyRequest, ns, ref string, s gatewaySpec, credVersion string) (drivers.ApplyResponse, error) {
	pod := gatewayPod(req, ns, ref, s, credVersion)
	created, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		// What an earlier, cut-off apply left goes, only when there is one.
		if err := deletePodWait(ctx, cs, ns, podGateway, ""); err != nil {
			return drivers.ApplyResponse{}, fmt.Errorf("removing what an earlier apply left: %w", err)
		}
		created, err = cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	}
	if err != nil {
		return drivers.ApplyResponse{}, err
	}
	running, err := waitRunning(ctx, cs, ns, podGateway, created.UID)
	if err == nil {
		err = waitGatewayRules(ctx, cs, ns, gateway.NewWant(s.Allow, credVersion))
	}
	if err != nil {
		_ = cs.CoreV1().Pods(ns).Delete(context.WithoutCancel(ctx), podGateway, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &created.UID}})
		return drivers.ApplyResponse{}, err
	}
	resp := podResponse(running)
	resp.Computed["proxy"] = fmt.Sprintf("http://%s:%d", svcGateway, gateway.Port)
	resp.Computed["gateway_pod"] = string(running.UID)
	return resp, nil
}

// waitGatewayRules is waitRules; a test without a kubelet, which has no
// log to follow, replaces it.
var waitGatewayRules = waitRules

// waitRules follows the gateway Pod's log until it listens with want (its
// allowlist, its credentials file's version) in force.
func waitRules(ctx context.Context, cs k8s.Interface, ns string, want gateway.Want) error {
	lctx, cancel := context.WithTimeout(ctx, gatewayReady)
	defer cancel()
	rc, err := cs.CoreV1().Pods(ns).GetLogs(podGateway, &corev1.PodLogOptions{Follow: true}).Stream(lctx)
	if err != nil {
		return fmt.Errorf("reading its log: %w", err)
	}
	defer rc.Close()
	st, log := gateway.Follow(rc, want)
	if st.Ready(true) {
		return nil
	}
	switch {
	case st.LastErr != "":
		return fmt.Errorf("the gateway did not take its rules or credentials: %s", st.LastErr)
	case ctx.Err() != nil:
		return ctx.Err()
	case lctx.Err() != nil:
		return fmt.Errorf("the gateway did not report its rules and credentials in force within %v; its log:\n%s", gatewayReady, gateway.Indent(log))
	}
	return fmt.Errorf("the gateway's log ended before it was ready; its log:\n%s", gateway.Indent(log))
}

// updateGateway writes the new rules into the ConfigMap and replaces the
// gateway's Pod behind its Service; the id (the ConfigMap's) stays.
func (d *Driver) updateGateway(ctx context.Context, cs k8s.Interface, cfg settings, req drivers.ApplyRequest) (drivers.ApplyResponse, error) {
	addr := req.Object.Addr
	ns, err := namespaceName(cfg.prefix, req.Lineage, req.NamedAddr(addr))
	if err != nil {
		return drivers.ApplyResponse{}, err
	}
	fail := func(format string, args ...any) (drivers.ApplyResponse, error) {
		return drivers.ApplyResponse{}, fmt.Errorf("updating gateway %s/%s for %s: %s", ns, podGateway, addr, fmt.Sprintf(format, args...))
	}
	s, err := decodeGateway(req.Object)
	if err != nil {
		return fail("%v", err)
	}
	ref, _, err := d.gatewayRef(ctx, cfg)
	if err != nil {
		return fail("%v", err)
	}
	want, err := d.gatewayConfigMap(ctx, cs, req, ns, s)
	if err != nil {
		return fail("%v", err)
	}
	cm, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, cmGateway, metav1.GetOptions{})
	if err != nil {
		return fail("its ConfigMap: %v", err)
	}
	cm.Data, cm.Annotations = want.Data, want.Annotations
	if cm, err = cs.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		return fail("its ConfigMap: %v", err)
	}
	// A rotated value too makes the Pod again: a mounted Secret reaches
	// a running Pod only after the kubelet's sync.
	credVersion, err := d.writeCredentials(ctx, cs, cfg, req, ns, true)
	if err != nil {
		return fail("%v", err)
	}
	if err := deletePodWait(ctx, cs, ns, podGateway, ""); err != nil {
		return fail("%v", err)
	}
	resp, err := d.runGateway(ctx, cs, req, ns, ref, s, credVersion)
	if err != nil {
		return fail("%v", err)
	}
	resp.ID = string(cm.UID)
	d.log.Info("updated gateway", "addr", addr, "namespace", ns, "allow", len(s.Allow), "credentials", credVersion != "")
	return resp, nil
}

// startGateway makes the gateway's Pod again (a Pod deleted behind
// bottlefile's back), with the ConfigMap it has and its credentials.
func (d *Driver) startGateway(ctx context.Context, cs k8s.Interface, cfg settings, req drivers.ApplyRequest) (drivers.ApplyResponse, error) {
	ns, err := namespaceName(cfg.prefix, req.Lineage, req.NamedAddr(req.Object.Addr))
	if err != nil {
		return drivers.ApplyResponse{}, err
	}
	if p, err := cs.CoreV1().Pods(ns).Get(ctx, podGateway, metav1.GetOptions{}); err == nil && p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning && allRunning(p) {
		return drivers.ApplyResponse{ID: req.ID}, nil
	}
	s, err := decodeGateway(req.Object)
	if err != nil {
		return drivers.ApplyResponse{}, err
	}
	ref, _, err := d.gatewayRef(ctx, cfg)
	if err != nil {
		return drivers.ApplyResponse{}, err
	}
	// The Secret is written again from the object: a new Pod must
	// report a version, and the Secret may have gone with the Pod.
	credVersion, err := d.writeCredentials(ctx, cs, cfg, req, ns, true)
	if err != nil {
		return drivers.ApplyResponse{}, fmt.Errorf("starting gateway %s/%s for %s: %w", ns, podGateway, req.Object.Addr, err)
	}
	// A Pod that is there and not running is replaced by runGateway.
	resp, err := d.runGateway(ctx, cs, req, ns, ref, s, credVersion)
	if err != nil {
		return drivers.ApplyResponse{}, fmt.Errorf("starting gateway %s/%s for %s: %w", ns, podGateway, req.Object.Addr, err)
	}
	resp.ID = req.ID
	return resp, nil
}

// deleteGateway removes the gateway's Pod, ConfigMap and Secret.
func (d *Driver) deleteGateway(ctx context.Context, cs k8s.Interface, cfg settings, req drivers.ApplyRequest) (drivers.ApplyResponse, error) {
	ns, err := namespaceName(cfg.prefix, req.Lineage, req.NamedAddr(req.Object.Addr))
	if err != nil {
		return drivers.ApplyResponse{}, err
	}
	if err := deletePodNow(ctx, cs, ns, podGateway, ""); err != nil {
		return drivers.ApplyResponse{}, fmt.Errorf("deleting gateway %s/%s: %w", ns, podGateway, err)
	}
	opts := metav1.DeleteOptions{}
	if req.ID != "" {
		uid := types.UID(req.ID)
		opts.Preconditions = &metav1.Preconditions{UID: &uid}
	}
	if err := cs.CoreV1().ConfigMaps(ns).Delete(ctx, cmGateway, opts); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return drivers.ApplyResponse{}, fmt.Errorf("deleting gateway ConfigMap %s/%s: %w", ns, cmGateway, err)
	}
	if err := deleteCredentials(ctx, cs, ns); err != nil {
		return drivers.ApplyResponse{}, err
	}
	return drivers.ApplyResponse{}, nil
}
