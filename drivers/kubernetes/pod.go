package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	k8s "k8s.io/client-go/kubernetes"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/gateway"
)

// Bounds of what apply waits for.
var (
	// podReady bounds how long a create waits for a scheduled Pod's
	// container to run (an image pulled, a sandbox made).
	podReady = 2 * time.Minute
	// podGone bounds how long a delete waits for a Pod, or a namespace,
	// to be gone, so that one of the same name can be made again.
	podGone = 2 * time.Minute
	// poll is how often a wait asks the API server.
	poll = 200 * time.Millisecond
)

// gracePeriod is how long a Pod's processes have between SIGTERM and
// SIGKILL when it is deleted.
const gracePeriod int64 = 3

// podName is the Pod of a workload address: "agent", or "sidecar-NAME".
func podName(addr string) string {
	if n := sidecarName(addr); n != "" {
		return sidecarPod(n)
	}
	return podAgent
}

// podSpec is the Pod a workload object runs as, without its host
// aliases (which need the bottle's live addresses: aliases).
func podSpec(req drivers.ApplyRequest, ns string) (*corev1.Pod, error) {
	o := req.Object
	w, err := drivers.DecodeWorkload(drivers.ObjectAttrs(o))
	if err != nil {
		return nil, err
	}
	place, err := placementOf(o)
	if err != nil {
		return nil, err
	}
	proxy := false
	if v := o.Attr("proxy"); !v.IsNull() && v.IsKnown() {
		proxy = v.True()
	}
	sidecars, err := drivers.Strings(o.Attr("sidecars"))
	if err != nil {
		return nil, fmt.Errorf("sidecars: %w", err)
	}
	role, name := roleAgent, ""
	if n := sidecarName(o.Addr); n != "" {
		role, name = roleSidecar, n
	}
	labels := map[string]string{}
	maps.Copy(labels, w.Labels)
	maps.Copy(labels, objectLabels(req, role))
	if name != "" {
		labels[labelName] = name
	}
	c := corev1.Container{
		Name:            "main",
		Image:           w.Image,
		Command:         w.Entrypoint,
		Args:            w.Command,
		WorkingDir:      w.Workdir,
		ImagePullPolicy: corev1.PullIfNotPresent,
	}
	if req.BootImage != "" {
		// Resume, migration: the snapshot (snapshot.go), by digest.
		c.Image = req.BootImage
	}
	for _, k := range slices.Sorted(maps.Keys(w.Env)) {
		c.Env = append(c.Env, corev1.EnvVar{Name: k, Value: w.Env[k]})
	}
	if proxy {
		url := fmt.Sprintf("http://%s:%d", svcGateway, gateway.Port)
		for _, k := range gateway.ProxyVars {
			if _, set := w.Env[k]; !set {
				c.Env = append(c.Env, corev1.EnvVar{Name: k, Value: url})
			}
		}
		noProxy := strings.Join(append([]string{"localhost", "127.0.0.1"}, sidecars...), ",")
		for _, k := range gateway.NoProxyVars {
			if _, set := w.Env[k]; !set {
				c.Env = append(c.Env, corev1.EnvVar{Name: k, Value: noProxy})
			}
		}
	}
	if w.User != "" {
		uid, gid, err := parseUser(w.User)
		if err != nil {
			return nil, fmt.Errorf("user: %w", err)
		}
		c.SecurityContext = &corev1.SecurityContext{RunAsUser: &uid}
		if gid >= 0 {
			c.SecurityContext.RunAsGroup = &gid
		}
	}
	// cpus and memory are limits. Without a request Kubernetes makes the
	// request equal to the limit, and a node holds few bottles however
	// idle they are (an agent mostly waits on a model's API). So: memory
	// requests its limit (memory cannot be taken back from a container,
	// and a node that promised less than it holds kills someone), CPU a
	// tenth of its limit, at least 10m (CPU is shared by time, and a busy
	// agent still gets up to its limit where the node has it).
	if w.CPUs > 0 || w.Memory > 0 {
		c.Resources.Limits = corev1.ResourceList{}
		c.Resources.Requests = corev1.ResourceList{}
		if w.CPUs > 0 {
			limit := int64(w.CPUs*1000 + 0.5)
			c.Resources.Limits[corev1.ResourceCPU] = *resource.NewMilliQuantity(limit, resource.DecimalSI)
			c.Resources.Requests[corev1.ResourceCPU] = *resource.NewMilliQuantity(min(limit, max(limit/10, 10)), resource.DecimalSI)
		}
		if w.Memory > 0 {
			c.Resources.Limits[corev1.ResourceMemory] = *resource.NewQuantity(w.Memory, resource.BinarySI)
			c.Resources.Requests[corev1.ResourceMemory] = *resource.NewQuantity(w.Memory, resource.BinarySI)
		}
	}
	grace := gracePeriod
	no := false
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:        podName(o.Addr),
			Namespace:   ns,
			Labels:      labels,
			Annotations: objectAnnotations(req),
		},
		Spec: corev1.PodSpec{
			Containers:    []corev1.Container{c},
			RestartPolicy: corev1.RestartPolicyAlways,
			// The workload never talks to the cluster's API: no token,
			// no service environment of other namespaces.
			AutomountServiceAccountToken:  &no,
			EnableServiceLinks:            &no,
			TerminationGracePeriodSeconds: &grace,
			NodeSelector:                  place.NodeSelector,
			Tolerations:                   place.Tolerations,
		},
	}
	if _, err := wireCredentials(req, pod); err != nil {
		return nil, err
	}
	pod.Annotations[annotSpec] = podFingerprint(pod)
	return pod, nil
}

// parseUser reads UID or UID:GID; gid is -1 when not given.
func parseUser(s string) (uid, gid int64, err error) {
	u, g, hasG := strings.Cut(s, ":")
	uid, err = strconv.ParseInt(u, 10, 64)
	if err != nil || uid < 0 {
		return 0, 0, fmt.Errorf("%q is not a numeric UID or UID:GID, and a Pod cannot name a user of its image (give the number, such as %q)", s, "1000:1000")
	}
	gid = -1
	if hasG {
		if gid, err = strconv.ParseInt(g, 10, 64); err != nil || gid < 0 {
			return 0, 0, fmt.Errorf("%q is not a numeric UID:GID", s)
		}
	}
	return uid, gid, nil
}

// objectLabels are the labels of what a create makes: the lineage (what
// Read selects by) and the role in its bottle.
func objectLabels(req drivers.ApplyRequest, role string) map[string]string {
	l := map[string]string{drivers.LabelLineage: req.Lineage}
	if role != "" {
		l[labelRole] = role
	}
	return l
}

// objectAnnotations are the address, configuration hash and runtime of
// what a create makes: annotations, since an address and a hash are not
// label values.
func objectAnnotations(req drivers.ApplyRequest) map[string]string {
	a := map[string]string{
		drivers.LabelAddress:    req.Object.Addr,
		drivers.LabelConfigHash: req.Hash,
	}
	if req.Runtime != "" {
		a[drivers.LabelRuntime] = req.Runtime
	}
	return a
}

// createPod makes a workload's Pod, with host aliases for its bottle's
// names (the gateway's Service address, each sidecar's Pod address),
// and, for a sidecar, its headless Service. It waits until the Pod's
// container runs; a Pod the scheduler cannot place fails at once, with
// the scheduler's reason.
func (d *Driver) createPod(ctx context.Context, cs k8s.Interface, cfg settings, req drivers.ApplyRequest) (drivers.ApplyResponse, error) {
	addr := req.Object.Addr
	ns, err := namespaceName(cfg.prefix, req.Lineage, req.NamedAddr(addr))
	if err != nil {
		return drivers.ApplyResponse{}, err
	}
	pod, err := podSpec(req, ns)
	if err != nil {
		return drivers.ApplyResponse{}, fmt.Errorf("%s: %w", addr, err)
	}
	fail := func(format string, args ...any) (drivers.ApplyResponse, error) {
		return drivers.ApplyResponse{}, fmt.Errorf("creating Pod %s/%s for %s: %s", ns, pod.Name, addr, fmt.Sprintf(format, args...))
	}
	if err := d.aliases(ctx, cs, ns, req.Object, pod); err != nil {
		return fail("%v", err)
	}
	if !req.Object.Attr("credential_env").IsNull() {
		if err := d.putBottleCA(ctx, cs, req, ns); err != nil {
			return fail("the bottle's CA: %v", err)
		}
	}
	if name := sidecarName(addr); name != "" {
		if err := ensureHeadless(ctx, cs, ns, name, req); err != nil {
			return fail("its Service: %v", err)
		}
	}
	created, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		// What an earlier, cut-off apply left under the name goes, then
		// the Pod is made again (only then: a delete first would be a
		// wasted request on every create).
		if err := deletePodWait(ctx, cs, ns, pod.Name, ""); err != nil {
			return fail("removing what an earlier apply left: %v", err)
		}
		created, err = cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	}
	if err != nil {
		return fail("%v", err)
	}
	running, err := waitRunning(ctx, cs, ns, created.Name, created.UID)
	if err != nil {
		_ = cs.CoreV1().Pods(ns).Delete(context.WithoutCancel(ctx), created.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &created.UID}})
		return fail("%v", err)
	}
	d.log.Info("created pod", "addr", addr, "namespace", ns, "pod", pod.Name, "node", running.Spec.NodeName)
	return podResponse(running), nil
}

func podResponse(p *corev1.Pod) drivers.ApplyResponse {
	return drivers.ApplyResponse{ID: string(p.UID), Computed: map[string]string{
		"namespace":          p.Namespace,
		"pod":                p.Name,
		"address":            p.Status.PodIP,
		drivers.ComputedNode: p.Spec.NodeName,
	}}
}

// aliases gives a Pod the names of its bottle: "gateway" for the
// gateway's Service (when it is proxied), each sidecar's name for its
// Pod's address (the agent's). A cluster may have no DNS, and an
// address works for every port a sidecar listens on.
func (d *Driver) aliases(ctx context.Context, cs k8s.Interface, ns string, o drivers.Object, pod *corev1.Pod) error {
	ips := map[string][]string{}
	if v := o.Attr("proxy"); !v.IsNull() && v.IsKnown() && v.True() {
		svc, err := cs.CoreV1().Services(ns).Get(ctx, svcGateway, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("the gateway's Service: %w", err)
		}
		ips[svc.Spec.ClusterIP] = append(ips[svc.Spec.ClusterIP], svcGateway)
	}
	if sidecarName(o.Addr) == "" {
		sidecars, err := drivers.Strings(o.Attr("sidecars"))
		if err != nil {
			return err
		}
		if len(sidecars) > 0 {
			pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: labelRole + "=" + roleSidecar})
			if err != nil {
				return fmt.Errorf("listing the sidecars: %w", err)
			}
			have := map[string]string{}
			for _, p := range pods.Items {
				if p.DeletionTimestamp == nil && p.Status.PodIP != "" {
					have[p.Labels[labelName]] = p.Status.PodIP
				}
			}
			for _, n := range sidecars {
				ip, ok := have[n]
				if !ok {
					return fmt.Errorf("sidecar %q has no running Pod to name", n)
				}
				ips[ip] = append(ips[ip], n)
			}
		}
	}
	for _, ip := range slices.Sorted(maps.Keys(ips)) {
		pod.Spec.HostAliases = append(pod.Spec.HostAliases, corev1.HostAlias{IP: ip, Hostnames: ips[ip]})
	}
	return nil
}

// ensureHeadless makes a sidecar's headless Service, so that a cluster
// with DNS names it in the namespace too.
func ensureHeadless(ctx context.Context, cs k8s.Interface, ns, name string, req drivers.ApplyRequest) error {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: objectLabels(req, roleSidecar), Annotations: objectAnnotations(req)},
		Spec: corev1.ServiceSpec{
			ClusterIP: corev1.ClusterIPNone,
			Selector:  map[string]string{labelRole: roleSidecar, labelName: name},
		},
	}
	_, err := cs.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// waitRunning waits until the Pod's containers run. A Pod the scheduler
// cannot place, an image that cannot be pulled or a container that
// keeps failing ends the wait at once, saying why. It lists the Pod
// once and then watches it (a field selector on its name), listing
// again only when the watch ends: no polling.
func waitRunning(ctx context.Context, cs k8s.Interface, ns, name string, uid types.UID) (*corev1.Pod, error) {
	wctx, cancel := context.WithTimeout(ctx, podReady)
	defer cancel()
	sel := fields.OneTermEqualSelector("metadata.name", name).String()
	var last *corev1.Pod
	// check says whether the wait is over, and how.
	check := func(p *corev1.Pod) (bool, error) {
		last = p
		if p.UID != uid {
			return true, errors.New("the Pod was replaced while it started")
		}
		if err := podProblem(p); err != nil {
			return true, err
		}
		if p.Status.Phase == corev1.PodRunning && allRunning(p) {
			return true, nil
		}
		if p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded {
			return true, fmt.Errorf("the Pod ended (%s): %s", p.Status.Phase, p.Status.Message)
		}
		return false, nil
	}
	ended := func(err error) (*corev1.Pod, error) {
		if ctx.Err() == nil && wctx.Err() != nil {
			phase := corev1.PodPhase("unknown")
			if last != nil {
				phase = last.Status.Phase
			}
			return last, fmt.Errorf("its container did not run within %v (phase %s)", podReady, phase)
		}
		return last, err
	}
	for {
		list, err := cs.CoreV1().Pods(ns).List(wctx, metav1.ListOptions{FieldSelector: sel})
		if err != nil {
			return ended(err)
		}
		found := false
		for i := range list.Items {
			if list.Items[i].Name != name {
				continue
			}
			found = true
			if done, err := check(&list.Items[i]); done {
				return last, err
			}
		}
		if !found {
			return ended(errors.New("the Pod was deleted while it started"))
		}
		w, err := cs.CoreV1().Pods(ns).Watch(wctx, metav1.ListOptions{FieldSelector: sel, ResourceVersion: list.ResourceVersion})
		if err != nil {
			return ended(err)
		}
		done, werr := func() (bool, error) {
			defer w.Stop()
			for {
				select {
				case <-wctx.Done():
					return true, wctx.Err()
				case ev, ok := <-w.ResultChan():
					if !ok {
						return false, nil // the watch ended: list again
					}
					p, isPod := ev.Object.(*corev1.Pod)
					switch {
					case ev.Type == watch.Error || !isPod:
						return false, nil // e.g. a resource version too old: list again
					case p.Name != name:
						continue
					case ev.Type == watch.Deleted:
						last = p
						return true, errors.New("the Pod was deleted while it started")
					}
					if done, err := check(p); done {
						return true, err
					}
				}
			}
		}()
		if done {
			return ended(werr)
		}
	}
}

// podProblem says why a Pod will not run by itself: the scheduler found
// no node for it, or a container cannot start. nil while it may still.
func podProblem(p *corev1.Pod) error {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return fmt.Errorf("the Pod cannot be scheduled (%s): %s", c.Reason, c.Message)
		}
	}
	for _, s := range p.Status.ContainerStatuses {
		if w := s.State.Waiting; w != nil {
			switch w.Reason {
			case "ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull", "CreateContainerConfigError", "CreateContainerError", "RunContainerError":
				return fmt.Errorf("container %s: %s: %s", s.Name, w.Reason, w.Message)
			case "CrashLoopBackOff":
				msg := w.Message
				if t := s.LastTerminationState.Terminated; t != nil {
					msg = fmt.Sprintf("it exited with code %d (%s)", t.ExitCode, t.Reason)
				}
				return fmt.Errorf("container %s keeps exiting: %s", s.Name, msg)
			}
		}
	}
	return nil
}

func allRunning(p *corev1.Pod) bool {
	if len(p.Status.ContainerStatuses) < len(p.Spec.Containers) {
		return false
	}
	for _, s := range p.Status.ContainerStatuses {
		if s.State.Running == nil {
			return false
		}
	}
	return true
}

// deletePodNow deletes a Pod (only the one of uid, when given) and does
// not wait for it to go: a Pod being deleted is gone to Read, a create
// of its name waits for it (deletePodWait), and a bottle destroyed
// whole waits once, for its namespace. One already gone is no error.
func deletePodNow(ctx context.Context, cs k8s.Interface, ns, name string, uid types.UID) error {
	opts := metav1.DeleteOptions{}
	if uid != "" {
		opts.Preconditions = &metav1.Preconditions{UID: &uid}
	}
	err := cs.CoreV1().Pods(ns).Delete(ctx, name, opts)
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case apierrors.IsConflict(err):
		return nil // another Pod of the name: not ours to delete
	}
	return err
}

// deletePodWait deletes a Pod (only the one of uid, when given) and waits
// until it is gone. One already gone is no error.
func deletePodWait(ctx context.Context, cs k8s.Interface, ns, name string, uid types.UID) error {
	opts := metav1.DeleteOptions{}
	if uid != "" {
		opts.Preconditions = &metav1.Preconditions{UID: &uid}
	}
	err := cs.CoreV1().Pods(ns).Delete(ctx, name, opts)
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case apierrors.IsConflict(err):
		return nil // another Pod of the name: not ours to delete
	case err != nil:
		return err
	}
	deadline := time.Now().Add(podGone)
	for {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) || (err == nil && uid != "" && p.UID != uid) {
			return nil
		}
		if err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the Pod %s/%s is still there %v after its delete", ns, name, podGone)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(poll):
		}
	}
}

// deletePod removes a workload's Pod, and a sidecar's Service. It does
// not wait for the Pod to go (deletePodNow).
func (d *Driver) deletePod(ctx context.Context, cs k8s.Interface, cfg settings, req drivers.ApplyRequest) (drivers.ApplyResponse, error) {
	addr := req.Object.Addr
	ns, err := namespaceName(cfg.prefix, req.Lineage, req.NamedAddr(addr))
	if err != nil {
		return drivers.ApplyResponse{}, err
	}
	name := podName(addr)
	if err := deletePodNow(ctx, cs, ns, name, types.UID(req.ID)); err != nil {
		return drivers.ApplyResponse{}, fmt.Errorf("deleting Pod %s/%s of %s: %w", ns, name, addr, err)
	}
	if sc := sidecarName(addr); sc != "" {
		err := cs.CoreV1().Services(ns).Delete(ctx, sc, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return drivers.ApplyResponse{}, fmt.Errorf("deleting the Service %s/%s of %s: %w", ns, sc, addr, err)
		}
	}
	d.log.Info("deleted pod", "addr", addr, "namespace", ns, "pod", name)
	return drivers.ApplyResponse{}, nil
}

// startPod runs a workload whose Pod is not running (it ended, or was
// deleted behind bottlefile's back): a Pod cannot be started again, so
// it is made again from the object.
func (d *Driver) startPod(ctx context.Context, cs k8s.Interface, cfg settings, req drivers.ApplyRequest) (drivers.ApplyResponse, error) {
	ns, err := namespaceName(cfg.prefix, req.Lineage, req.NamedAddr(req.Object.Addr))
	if err != nil {
		return drivers.ApplyResponse{}, err
	}
	if p, err := cs.CoreV1().Pods(ns).Get(ctx, podName(req.Object.Addr), metav1.GetOptions{}); err == nil && string(p.UID) == req.ID && p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning && allRunning(p) {
		return podResponse(p), nil
	}
	return d.createPod(ctx, cs, cfg, req)
}
