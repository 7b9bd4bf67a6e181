package kubernetes

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/zclconf/go-cty/cty"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8s "k8s.io/client-go/kubernetes"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/gateway"
)

const lineage = "0f3a9c2e-1111-4222-8333-444455556666"

// fakeGateway swaps the image push and the wait for the gateway's log,
// which need a registry and a kubelet, for the test's length.
func fakeGateway(t *testing.T) {
	push, wait := pushGatewayImage, waitGatewayRules
	pushGatewayImage = func(context.Context, string, gateway.Binary) (string, error) {
		return "r:5000/bottlefile-gateway@sha256:abc", nil
	}
	waitGatewayRules = func(context.Context, k8s.Interface, string, gateway.Want) error { return nil }
	t.Cleanup(func() { pushGatewayImage, waitGatewayRules = push, wait })
}

func coder() drivers.AgentSpec {
	return drivers.AgentSpec{Addr: "agent.coder", Name: "coder",
		Workload: workload(map[string]cty.Value{
			"image":   cty.StringVal("busybox"),
			"command": strs("sleep", "600"),
			"env":     cty.MapVal(map[string]cty.Value{"A": cty.StringVal("b")}),
			"user":    cty.StringVal("1000:1000"),
			"cpus":    cty.NumberFloatVal(0.5),
			"memory":  cty.NumberIntVal(64 << 20),
			"labels":  cty.MapVal(map[string]cty.Value{"team": cty.StringVal("x")}),
			"egress":  strs("github.com"),
		}),
		Sidecars: []drivers.SidecarSpec{{Addr: "agent.coder.sidecar.web", Name: "web", Workload: workload(map[string]cty.Value{"image": cty.StringVal("httpd")})}},
	}
}

// TestPlan: a bottle is its namespace, its agent's and sidecars' Pods
// and its gateway; the agent depends on its sidecars (its host aliases
// name their addresses), not on its gateway (whose Service is the
// namespace's). What a Pod cannot be is refused at plan.
func TestPlan(t *testing.T) {
	d := testDriver(t, newFakeCluster(), settings{registry: "r:5000"})
	plan, err := d.Plan(t.Context(), drivers.PlanRequest{Agent: coder()})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	byAddr := map[string]drivers.Object{}
	for _, o := range plan.Objects {
		got = append(got, o.Kind+" "+o.Addr+" <- "+strings.Join(o.DependsOn, ","))
		byAddr[o.Addr] = o
	}
	want := []string{
		"namespace agent.coder.network <- ",
		"pod agent.coder <- agent.coder.network,agent.coder.sidecar.web",
		"pod agent.coder.sidecar.web <- agent.coder.network",
		"gateway agent.coder.gateway <- agent.coder.network",
	}
	if !slices.Equal(got, want) {
		t.Errorf("plan:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if ns := byAddr["agent.coder.network"]; !ns.Attr("gateway").True() {
		t.Errorf("the namespace of a bottle with egress does not hold its gateway's Service: %v", ns.Attrs)
	}
	if p := byAddr["agent.coder"]; len(p.InPlace) != 0 {
		t.Errorf("a Pod changes in place: %v", p.InPlace)
	}

	for _, tt := range []struct {
		name string
		edit func(a *drivers.AgentSpec, s *settings)
		want string
	}{
		{"no registry", func(_ *drivers.AgentSpec, s *settings) { s.registry = "" }, "an egress block needs the runtime's registry"},
		{"sidecar name", func(a *drivers.AgentSpec, _ *settings) { a.Sidecars[0].Name = "Web_1" }, `the sidecar name "Web_1" cannot name a Kubernetes Service`},
		{"sidecar gateway", func(a *drivers.AgentSpec, _ *settings) { a.Sidecars[0].Name = "gateway" }, `a sidecar cannot be named "gateway"`},
		{"user name", func(a *drivers.AgentSpec, _ *settings) {
			a.Workload = drivers.WithWorkloadAttr(a.Workload, "user", cty.StringVal("nobody"))
		}, `user: "nobody" is not a numeric UID`},
		{"label", func(a *drivers.AgentSpec, _ *settings) {
			a.Workload = drivers.WithWorkloadAttr(a.Workload, "labels", cty.MapVal(map[string]cty.Value{"a b": cty.StringVal("x")}))
		}, `labels: "a b" is not a Kubernetes label name`},
		{"selector", func(a *drivers.AgentSpec, _ *settings) {
			a.Driver = placementValue(map[string]string{"pool": "a b"}, nil)
		}, `node_selector: "pool" = "a b" is not a node label value`},
		{"toleration", func(a *drivers.AgentSpec, _ *settings) {
			a.Driver = placementValue(nil, map[string]string{"key": "k", "operator": "Exists", "value": "v"})
		}, "tolerations: toleration 1: operator Exists takes no value"},
		{"long name", func(a *drivers.AgentSpec, _ *settings) {
			a.Addr, a.Name = "agent."+strings.Repeat("x", 60), strings.Repeat("x", 60)
			a.Sidecars = nil
		}, "is longer than 63 characters"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a, s := coder(), settings{registry: "r:5000"}
			tt.edit(&a, &s)
			d := testDriver(t, newFakeCluster(), s)
			_, err := d.Plan(t.Context(), drivers.PlanRequest{Agent: a})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("plan: %v, want an error with %q", err, tt.want)
			}
		})
	}
}

// placementValue is an agent's driver block.
func placementValue(sel map[string]string, tol map[string]string) cty.Value {
	s := cty.NullVal(cty.Map(cty.String))
	if sel != nil {
		m := map[string]cty.Value{}
		for k, v := range sel {
			m[k] = cty.StringVal(v)
		}
		s = cty.MapVal(m)
	}
	tl := cty.NullVal(cty.List(tolerationType))
	if tol != nil {
		m := map[string]cty.Value{}
		for _, k := range []string{"key", "operator", "value", "effect"} {
			m[k] = cty.NullVal(cty.String)
			if v, ok := tol[k]; ok {
				m[k] = cty.StringVal(v)
			}
		}
		tl = cty.ListVal([]cty.Value{cty.ObjectVal(m)})
	}
	return cty.ObjectVal(map[string]cty.Value{attrNodeSelector: s, attrTolerations: tl})
}

// TestApplyBottle: what a bottle is on the cluster. Its namespace carries
// the lineage label and the address as an annotation; its policies fence
// it; the agent's Pod runs the workload with no API token, its proxy the
// gateway's Service, its host aliases the gateway's Service and the
// sidecar's Pod addresses; the gateway mounts its rules and runs
// unprivileged. Read finds them all with one list call per kind.
func TestApplyBottle(t *testing.T) {
	fakeGateway(t)
	f := newFakeCluster()
	d := testDriver(t, f, settings{registry: "r:5000"})
	a := coder()
	a.Driver = placementValue(map[string]string{"pool": "agents"}, map[string]string{"key": "dedicated", "operator": "Equal", "value": "agents", "effect": "NoSchedule"})
	plan, err := d.Plan(t.Context(), drivers.PlanRequest{Agent: a})
	if err != nil {
		t.Fatal(err)
	}
	f.ClearActions()
	resps := applyAll(t, d, lineage, plan.Objects)
	ctx := t.Context()
	const ns = "bf-0f3a9c2e-coder"
	for _, a := range f.Actions() {
		if a.GetVerb() == "delete" {
			t.Errorf("applying a new bottle deletes %s: only what is needed", a.GetResource().Resource)
		}
	}

	nsObj, err := f.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if nsObj.Labels[drivers.LabelLineage] != lineage || nsObj.Annotations[drivers.LabelAddress] != "agent.coder.network" {
		t.Errorf("namespace labels %v, annotations %v", nsObj.Labels, nsObj.Annotations)
	}
	pols, _ := f.NetworkingV1().NetworkPolicies(ns).List(ctx, metav1.ListOptions{})
	var polNames []string
	for _, p := range pols.Items {
		polNames = append(polNames, p.Name)
		if p.Name == policyFence {
			if len(p.Spec.Ingress) != 1 || len(p.Spec.Ingress[0].From) != 1 || p.Spec.Ingress[0].From[0].NamespaceSelector != nil {
				t.Errorf("the fence lets in more than the namespace's own Pods: %+v", p.Spec.Ingress)
			}
		}
	}
	slices.Sort(polNames)
	if !slices.Equal(polNames, []string{policyFence, policyEgress}) {
		t.Errorf("policies %v", polNames)
	}
	gwSvc, err := f.CoreV1().Services(ns).Get(ctx, svcGateway, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	agent, err := f.CoreV1().Pods(ns).Get(ctx, podAgent, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	web, _ := f.CoreV1().Pods(ns).Get(ctx, sidecarPod("web"), metav1.GetOptions{})
	c := agent.Spec.Containers[0]
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	switch {
	case c.Image != "busybox" || !slices.Equal(c.Args, []string{"sleep", "600"}) || c.ImagePullPolicy != corev1.PullIfNotPresent:
		t.Errorf("agent container %+v", c)
	case env["A"] != "b" || env["HTTPS_PROXY"] != "http://gateway:3128" || env["NO_PROXY"] != "localhost,127.0.0.1,web":
		t.Errorf("agent env %v", env)
	case *c.SecurityContext.RunAsUser != 1000 || *c.SecurityContext.RunAsGroup != 1000:
		t.Errorf("agent user %+v", c.SecurityContext)
	case c.Resources.Limits.Cpu().MilliValue() != 500 || c.Resources.Limits.Memory().Value() != 64<<20:
		t.Errorf("agent limits %v", c.Resources.Limits)
	case c.Resources.Requests.Cpu().MilliValue() != 50 || c.Resources.Requests.Memory().Value() != 64<<20:
		t.Errorf("agent requests %v, want a tenth of its CPU limit and its memory limit", c.Resources.Requests)
	case *agent.Spec.AutomountServiceAccountToken:
		t.Error("the agent's Pod mounts an API token")
	case agent.Labels["team"] != "x" || agent.Labels[labelRole] != roleAgent:
		t.Errorf("agent labels %v", agent.Labels)
	case agent.Spec.NodeSelector["pool"] != "agents" || len(agent.Spec.Tolerations) != 1 || agent.Spec.Tolerations[0].Key != "dedicated":
		t.Errorf("agent placement %v %v", agent.Spec.NodeSelector, agent.Spec.Tolerations)
	}
	wantAliases := map[string]string{"gateway": gwSvc.Spec.ClusterIP, "web": web.Status.PodIP}
	gotAliases := map[string]string{}
	for _, h := range agent.Spec.HostAliases {
		for _, n := range h.Hostnames {
			gotAliases[n] = h.IP
		}
	}
	if len(gotAliases) != 2 || gotAliases["gateway"] != wantAliases["gateway"] || gotAliases["web"] != wantAliases["web"] {
		t.Errorf("agent host aliases %v, want %v", gotAliases, wantAliases)
	}
	if _, err := f.CoreV1().Services(ns).Get(ctx, "web", metav1.GetOptions{}); err != nil {
		t.Errorf("the sidecar's Service: %v", err)
	}

	gw, err := f.CoreV1().Pods(ns).Get(ctx, podGateway, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	gc := gw.Spec.Containers[0]
	if gc.Image != "r:5000/bottlefile-gateway@sha256:abc" || *gc.SecurityContext.RunAsUser != 65534 || len(gc.VolumeMounts) != 1 || gc.VolumeMounts[0].MountPath != gateway.RulesDir || gw.Labels[labelRole] != roleGateway {
		t.Errorf("gateway Pod %+v", gw)
	}
	if r, l := gc.Resources.Requests, gc.Resources.Limits; r.Cpu().MilliValue() != 10 || r.Memory().Value() != 32<<20 || l.Cpu().Cmp(*r.Cpu()) <= 0 || l.Memory().Cmp(*r.Memory()) <= 0 {
		t.Errorf("gateway requests %v under limits %v, want 10m and 32Mi under them", r, l)
	}
	if gw.Spec.NodeSelector["pool"] != "agents" {
		t.Errorf("the gateway is not placed with its bottle: %v", gw.Spec.NodeSelector)
	}
	cm, err := f.CoreV1().ConfigMaps(ns).Get(ctx, cmGateway, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(cm.Data[gateway.RulesFile], "github.com") || !strings.Contains(cm.Data[gateway.RulesFile], `"web"`) {
		t.Errorf("gateway rules %s", cm.Data[gateway.RulesFile])
	}

	f.ClearActions()
	read, err := d.Read(ctx, drivers.ReadRequest{Lineage: lineage})
	if err != nil {
		t.Fatal(err)
	}
	if l := lists(f); len(l) != 4 || l["namespaces"] != 1 || l["pods"] != 1 || l["configmaps"] != 1 || l["networkpolicies"] != 1 {
		t.Errorf("Read's list calls %v, want one per kind", l)
	}
	var live []string
	for _, o := range read.Objects {
		live = append(live, o.Kind+" "+o.Addr)
		if o.ID != resps[o.Addr].ID || o.Hash != "hash-"+o.Addr || o.Drift != "" || o.Runtime != "k" {
			t.Errorf("%s reads as id %q hash %q drift %q runtime %q; applied %q", o.Addr, o.ID, o.Hash, o.Drift, o.Runtime, resps[o.Addr].ID)
		}
		if o.Kind != kindNamespace && (!o.Running || o.Node != "node-1") {
			t.Errorf("%s reads as not running on node-1: %+v", o.Addr, o)
		}
	}
	wantLive := []string{"pod agent.coder", "gateway agent.coder.gateway", "namespace agent.coder.network", "pod agent.coder.sidecar.web"}
	if !slices.Equal(live, wantLive) {
		t.Errorf("read %v, want %v", live, wantLive)
	}

	other, err := d.Read(ctx, drivers.ReadRequest{Lineage: "9f3a9c2e-0000-4222-8333-444455556666"})
	if err != nil || len(other.Objects) != 0 {
		t.Errorf("another lineage reads %v, %v", other.Objects, err)
	}
}

// TestDrift: a Pod whose image was changed outside bottlefile, a policy
// deleted or changed, read as drifted, saying what; a Pod deleted reads
// as gone, and a gateway's as not running.
func TestDrift(t *testing.T) {
	fakeGateway(t)
	f := newFakeCluster()
	d := testDriver(t, f, settings{registry: "r:5000"})
	plan, err := d.Plan(t.Context(), drivers.PlanRequest{Agent: coder()})
	if err != nil {
		t.Fatal(err)
	}
	applyAll(t, d, lineage, plan.Objects)
	ctx := t.Context()
	const ns = "bf-0f3a9c2e-coder"

	p, _ := f.CoreV1().Pods(ns).Get(ctx, podAgent, metav1.GetOptions{})
	p.Spec.Containers[0].Image = "evil"
	p.Labels["extra"] = "1"
	if _, err := f.CoreV1().Pods(ns).Update(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := f.NetworkingV1().NetworkPolicies(ns).Delete(ctx, policyFence, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := f.CoreV1().Pods(ns).Delete(ctx, sidecarPod("web"), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := f.CoreV1().Pods(ns).Delete(ctx, podGateway, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	read, err := d.Read(ctx, drivers.ReadRequest{Lineage: lineage})
	if err != nil {
		t.Fatal(err)
	}
	live := map[string]drivers.LiveObject{}
	for _, o := range read.Objects {
		live[o.Addr] = o
	}
	if got := live["agent.coder"].Drift; got != "its Pod's image and labels changed outside bottlefile" {
		t.Errorf("agent drift %q", got)
	}
	if got := live["agent.coder.network"].Drift; got != "its NetworkPolicy bottle was deleted outside bottlefile" {
		t.Errorf("namespace drift %q", got)
	}
	if _, ok := live["agent.coder.sidecar.web"]; ok {
		t.Error("a deleted sidecar Pod still reads")
	}
	if gw := live["agent.coder.gateway"]; gw.Running || gw.Exit == nil || !strings.Contains(gw.Exit.Error, "deleted") {
		t.Errorf("a gateway whose Pod was deleted reads as %+v", gw)
	}
}

// TestUnschedulable: a Pod the scheduler cannot place fails the apply at
// once, with the scheduler's reason and message, and is removed.
func TestUnschedulable(t *testing.T) {
	f := newFakeCluster()
	d := testDriver(t, f, settings{})
	a := drivers.AgentSpec{Addr: "agent.p", Name: "p", Workload: workload(map[string]cty.Value{"image": cty.StringVal("busybox")}),
		Driver: placementValue(map[string]string{"pool": "none"}, nil)}
	plan, err := d.Plan(t.Context(), drivers.PlanRequest{Agent: a})
	if err != nil {
		t.Fatal(err)
	}
	var nsObj, pod drivers.Object
	for _, o := range plan.Objects {
		switch o.Kind {
		case kindNamespace:
			nsObj = o
		case kindPod:
			pod = o
		}
	}
	if _, err := d.Apply(t.Context(), drivers.ApplyRequest{Op: drivers.OpCreate, Lineage: lineage, Object: nsObj, Hash: "h"}); err != nil {
		t.Fatal(err)
	}
	f.unschedulable = "0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector."
	_, err = d.Apply(t.Context(), drivers.ApplyRequest{Op: drivers.OpCreate, Lineage: lineage, Object: pod, Hash: "h"})
	if err == nil || !strings.Contains(err.Error(), "cannot be scheduled (Unschedulable)") || !strings.Contains(err.Error(), "didn't match Pod's node affinity/selector") {
		t.Fatalf("apply of an unschedulable Pod: %v", err)
	}
	if pods, _ := f.CoreV1().Pods("bf-0f3a9c2e-p").List(t.Context(), metav1.ListOptions{}); len(pods.Items) != 0 {
		t.Errorf("the unschedulable Pod was left: %v", pods.Items)
	}
}

// TestDeleteBottle: deleting in reverse order removes every object, and
// deleting again succeeds. (The fake has no namespace controller: what
// a namespace holds goes with it on a cluster, not here.)
func TestDeleteBottle(t *testing.T) {
	fakeGateway(t)
	f := newFakeCluster()
	d := testDriver(t, f, settings{registry: "r:5000"})
	plan, err := d.Plan(t.Context(), drivers.PlanRequest{Agent: coder()})
	if err != nil {
		t.Fatal(err)
	}
	resps := applyAll(t, d, lineage, plan.Objects)
	for range 2 {
		for i := len(plan.Objects) - 1; i >= 0; i-- {
			o := plan.Objects[i]
			if _, err := d.Apply(t.Context(), drivers.ApplyRequest{Op: drivers.OpDelete, Lineage: lineage, Object: drivers.Object{Addr: o.Addr, Kind: o.Kind}, ID: resps[o.Addr].ID}); err != nil {
				t.Fatalf("delete %s: %v", o.Addr, err)
			}
		}
	}
	read, err := d.Read(t.Context(), drivers.ReadRequest{Lineage: lineage})
	if err != nil {
		t.Fatal(err)
	}
	if len(read.Objects) != 0 {
		t.Errorf("after deleting the bottle: %v", read.Objects)
	}
}
