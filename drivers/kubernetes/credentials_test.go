package kubernetes

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/zclconf/go-cty/cty"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/gateway"
	"github.com/bottlefile/bottlefile/egress"
)

const testKey = "sk-test-value-0123456789"

// credentialCoder is coder with one credential of value on its egress.
func credentialCoder(value string) drivers.AgentSpec {
	a := coder()
	a.Sidecars = nil
	attrs := map[string]cty.Value{}
	for it := a.Workload.ElementIterator(); it.Next(); {
		k, v := it.Element()
		attrs[k.AsString()] = v
	}
	attrs["egress"] = strs("api.anthropic.com:443")
	attrs["credentials"] = cty.ListVal([]cty.Value{cty.ObjectVal(map[string]cty.Value{
		"name":   cty.StringVal("anthropic"),
		"host":   cty.StringVal("api.anthropic.com"),
		"port":   cty.NumberIntVal(443),
		"header": cty.StringVal("x-api-key"),
		"prefix": cty.StringVal(""),
		"value":  cty.StringVal(value).Mark("sensitive"),
		"env":    cty.StringVal("ANTHROPIC_API_KEY"),
	})})
	a.Workload = workload(attrs)
	return a
}

// TestCredentials: the value reaches the gateway's Pod in a Secret that
// only it mounts (0400, its group through fsGroup) and reads with
// -credentials; the agent's Pod holds the placeholder and the trust
// variables and mounts the CA's ConfigMap, and no value is in the agent's
// Pod or any ConfigMap. A rotated value rewrites the Secret without
// touching the agent; deleting the gateway deletes the Secret. A
// sidecar's credential is refused at plan.
func TestCredentials(t *testing.T) {
	fakeGateway(t)
	f := newFakeCluster()
	d := testDriver(t, f, settings{registry: "r:5000"})
	d.stateDir = t.TempDir()
	if !Declaration().Capabilities.Egress.Credentials {
		t.Error("the driver does not declare credentials")
	}
	plan, err := d.Plan(t.Context(), drivers.PlanRequest{Agent: credentialCoder(testKey)})
	if err != nil {
		t.Fatal(err)
	}
	byAddr := map[string]drivers.Object{}
	for _, o := range plan.Objects {
		byAddr[o.Addr] = o
	}
	if got := byAddr["agent.coder"].Attrs["credential_env"]; got == cty.NilVal || !got.RawEquals(cty.MapVal(map[string]cty.Value{"anthropic": cty.StringVal("ANTHROPIC_API_KEY")})) {
		t.Errorf("agent credential_env %#v", got)
	}
	if !strings.Contains(strings.Join(byAddr["agent.coder.gateway"].InPlace, ","), "credentials") {
		t.Errorf("gateway InPlace %v lacks credentials", byAddr["agent.coder.gateway"].InPlace)
	}
	applyAll(t, d, lineage, plan.Objects)
	ctx := t.Context()
	const ns = "bf-0f3a9c2e-coder"

	readSecret := func() egress.CredentialsFile {
		t.Helper()
		sec, err := f.CoreV1().Secrets(ns).Get(ctx, secretCredentials, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var cf egress.CredentialsFile
		if err := json.Unmarshal(sec.Data[gateway.CredentialsName], &cf); err != nil {
			t.Fatal(err)
		}
		return cf
	}
	cf := readSecret()
	ph := gateway.Placeholder(lineage, "agent.coder", "anthropic")
	if len(cf.Credentials) != 1 || cf.Credentials[0].Value != testKey || cf.Credentials[0].Placeholder != ph || cf.CAKey == "" || cf.Version == "" {
		t.Fatalf("the Secret's credentials file: %+v", cf)
	}

	gw, err := f.CoreV1().Pods(ns).Get(ctx, podGateway, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(gw.Spec.Containers[0].Args, " "), "-credentials "+credentialsDir+"/"+gateway.CredentialsName) {
		t.Errorf("gateway args %q lack -credentials", gw.Spec.Containers[0].Args)
	}
	mounted := false
	for _, v := range gw.Spec.Volumes {
		if v.Secret != nil && v.Secret.SecretName == secretCredentials {
			mounted = v.Secret.DefaultMode != nil && *v.Secret.DefaultMode == 0o400
		}
	}
	if !mounted || gw.Spec.SecurityContext == nil || gw.Spec.SecurityContext.FSGroup == nil || *gw.Spec.SecurityContext.FSGroup != 65534 {
		t.Errorf("the gateway does not mount the Secret 0400 with fsGroup 65534: %+v %+v", gw.Spec.Volumes, gw.Spec.SecurityContext)
	}

	agent, err := f.CoreV1().Pods(ns).Get(ctx, podAgent, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(agent)
	if strings.Contains(string(raw), testKey) || strings.Contains(string(raw), secretCredentials) {
		t.Errorf("the agent's Pod holds the value or the Secret: %s", raw)
	}
	env := map[string]string{}
	for _, e := range agent.Spec.Containers[0].Env {
		env[e.Name] = e.Value
	}
	for k, want := range map[string]string{"ANTHROPIC_API_KEY": ph, "SSL_CERT_FILE": gateway.AgentCABundle, "NODE_EXTRA_CA_CERTS": gateway.AgentCAFile, "A": "b"} {
		if env[k] != want {
			t.Errorf("agent env %s=%q, want %q", k, env[k], want)
		}
	}
	caMounted := false
	for _, m := range agent.Spec.Containers[0].VolumeMounts {
		caMounted = caMounted || (m.MountPath == gateway.AgentCADir && m.ReadOnly)
	}
	if !caMounted {
		t.Errorf("the agent does not mount the CA at %s: %+v", gateway.AgentCADir, agent.Spec.Containers[0].VolumeMounts)
	}
	ca, err := f.CoreV1().ConfigMaps(ns).Get(ctx, cmBottleCA, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ca.Data["ca.pem"] != cf.CACert || !strings.HasSuffix(ca.Data["ca-bundle.pem"], cf.CACert) {
		t.Errorf("the CA ConfigMap does not hold the gateway's CA: %v", ca.Data)
	}
	cms, err := f.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, cm := range cms.Items {
		raw, _ := json.Marshal(cm)
		if strings.Contains(string(raw), testKey) || strings.Contains(string(raw), "PRIVATE KEY") {
			t.Errorf("ConfigMap %s holds the value or the CA's key", cm.Name)
		}
	}

	// A rotated value: the gateway's update rewrites the Secret (a new
	// version) and makes its Pod again; the agent's Pod stays.
	rotated, err := d.Plan(t.Context(), drivers.PlanRequest{Agent: credentialCoder("sk-rotated-9876")})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range rotated.Objects {
		if o.Addr != "agent.coder.gateway" {
			continue
		}
		if _, err := d.Apply(ctx, drivers.ApplyRequest{Op: drivers.OpUpdate, Lineage: lineage, Object: o, Hash: "hash2", ID: "x"}); err != nil {
			t.Fatalf("update: %v", err)
		}
	}
	if again := readSecret(); again.Credentials[0].Value != "sk-rotated-9876" || again.Version == cf.Version || again.CACert != cf.CACert {
		t.Errorf("after rotation the Secret holds %q version %q (was %q), same CA %v", again.Credentials[0].Value, again.Version, cf.Version, again.CACert == cf.CACert)
	}
	if p, err := f.CoreV1().Pods(ns).Get(ctx, podAgent, metav1.GetOptions{}); err != nil || p.UID != agent.UID {
		t.Errorf("the agent's Pod changed with the rotation: %v", err)
	}

	// A gateway's Pod deleted, with its Secret, behind bottlefile's back:
	// start makes both again.
	gwObj := byAddr["agent.coder.gateway"]
	if err := f.CoreV1().Pods(ns).Delete(ctx, podGateway, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := f.CoreV1().Secrets(ns).Delete(ctx, secretCredentials, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Apply(ctx, drivers.ApplyRequest{Op: drivers.OpStart, Lineage: lineage, Object: gwObj, ID: "x"}); err != nil {
		t.Fatalf("start: %v", err)
	}
	if again := readSecret(); again.Credentials[0].Value != testKey {
		t.Errorf("after start the Secret holds %q", again.Credentials[0].Value)
	}

	// Deleting the gateway deletes its Secret.
	if _, err := d.Apply(ctx, drivers.ApplyRequest{Op: drivers.OpDelete, Lineage: lineage, Object: gwObj}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.CoreV1().Secrets(ns).Get(ctx, secretCredentials, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the Secret stays after the gateway's delete: %v", err)
	}

	// A sidecar's credential block is refused.
	withSidecar := credentialCoder(testKey)
	withSidecar.Sidecars = []drivers.SidecarSpec{{Addr: "agent.coder.sidecar.web", Name: "web", Workload: withSidecar.Workload}}
	if _, err := d.Plan(t.Context(), drivers.PlanRequest{Agent: withSidecar}); err == nil || !strings.Contains(err.Error(), "credential blocks go in the agent's egress block") {
		t.Errorf("a sidecar's credential: %v", err)
	}
}
