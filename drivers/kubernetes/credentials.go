package kubernetes

import (
	"context"
	"fmt"
	"path"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8s "k8s.io/client-go/kubernetes"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/gateway"
	"github.com/bottlefile/bottlefile/egress"
)

// Credentials (issue 18) on a cluster, as docker does them
// (drivers/gateway/credentials.go), but for how the files travel:
//
//   - The gateway's credentials file (the values, the bottle's CA key) is
//     the Secret gateway-credentials, which only the gateway's Pod mounts
//     (read-only, 0400, group 65534 through the Pod's fsGroup so that the
//     gateway's user reads it), at credentialsDir; the gateway reads it
//     with -credentials. A rotated value rewrites the Secret and makes the
//     gateway's Pod again, as a new allowlist does (the kubelet refreshes
//     a mounted Secret only within its sync period), and apply waits until
//     the gateway's log reports the new file's version. The agent's Pod
//     never mounts it; no value is in an env, argument, label, annotation
//     or ConfigMap.
//   - The agent gets the placeholders and the trust variables in its env,
//     and the ConfigMap bottle-ca mounted at /etc/bottlefile: the CA and a
//     bundle. The image's own bundle cannot be read before its Pod runs:
//     the bundle is that of the machine running bottlefile (what the
//     gateway verifies the credential hosts against) followed by the CA.

// Names of the credentials' objects in a bottle's namespace.
const (
	secretCredentials = "gateway-credentials"
	cmBottleCA        = "bottle-ca"
	// credentialsDir is where the gateway's Pod mounts the Secret: beside
	// the rules ConfigMap's directory, since two volumes cannot share one.
	credentialsDir = "/etc/bottlefile-credentials"
	// roleCredentials, roleCA label them: Read ignores them.
	roleCredentials = "gateway-credentials"
	roleCA          = "bottle-ca"
)

// ForgetBottle removes the bottle's CA from the state directory once the
// state records nothing of the bottle (gateway.ForgetCA).
func (d *Driver) ForgetBottle(lineage, agent string) error {
	d.mu.RLock()
	stateDir := d.stateDir
	d.mu.RUnlock()
	return gateway.ForgetCA(d.log, stateDir, lineage, agent)
}

// credentialsFile is the gateway object's credentials file, with a fresh
// version; ok is false when it has no credentials (the gateway then runs
// without the Secret). It holds the values: never log it.
func (d *Driver) credentialsFile(cfg settings, req drivers.ApplyRequest) (f egress.CredentialsFile, ok bool, err error) {
	d.mu.RLock()
	stateDir := d.stateDir
	d.mu.RUnlock()
	agent := req.NamedAddr(gateway.AgentOf(req.Object.Addr))
	f, err = gateway.NewCredentialsFile(d.log, stateDir, req.Lineage, agent, req.Object, cfg.caFile)
	return f, err == nil && len(f.Credentials) > 0, err
}

// putCredentials writes the credentials file into the gateway's Secret,
// making it or replacing its data.
func putCredentials(ctx context.Context, cs k8s.Interface, req drivers.ApplyRequest, ns string, f egress.CredentialsFile) error {
	data, err := f.Marshal()
	if err != nil {
		return err
	}
	want := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: secretCredentials, Namespace: ns, Labels: objectLabels(req, roleCredentials), Annotations: objectAnnotations(req)},
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{gateway.CredentialsName: data},
	}
	_, err = cs.CoreV1().Secrets(ns).Create(ctx, want, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		return err
	}
	have, err := cs.CoreV1().Secrets(ns).Get(ctx, secretCredentials, metav1.GetOptions{})
	if err != nil {
		return err
	}
	have.Data, have.StringData, have.Labels, have.Annotations = want.Data, nil, want.Labels, want.Annotations
	_, err = cs.CoreV1().Secrets(ns).Update(ctx, have, metav1.UpdateOptions{})
	return err
}

// deleteCredentials removes the gateway's Secret, if there is one.
func deleteCredentials(ctx context.Context, cs k8s.Interface, ns string) error {
	err := cs.CoreV1().Secrets(ns).Delete(ctx, secretCredentials, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting the gateway's Secret %s/%s: %w", ns, secretCredentials, err)
	}
	return nil
}

// mountCredentials gives the gateway's Pod the Secret and the
// -credentials argument. fsGroup makes the files the gateway's group's,
// which the kubelet adds read to (0440): 65534 reads them, no other user
// of the Pod exists.
func mountCredentials(pod *corev1.Pod) {
	mode, gid := int32(0o400), int64(65534)
	c := &pod.Spec.Containers[0]
	c.Args = append(c.Args, "-credentials", credentialsDir+"/"+gateway.CredentialsName)
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "credentials", MountPath: credentialsDir, ReadOnly: true})
	pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: "credentials", VolumeSource: corev1.VolumeSource{
		Secret: &corev1.SecretVolumeSource{SecretName: secretCredentials, DefaultMode: &mode},
	}})
	if pod.Spec.SecurityContext == nil {
		pod.Spec.SecurityContext = &corev1.PodSecurityContext{}
	}
	pod.Spec.SecurityContext.FSGroup = &gid
}

// wireCredentials gives an agent's Pod with credentials its placeholders
// and the trust variables (but those its configuration sets) and mounts
// the bottle's CA ConfigMap; it reports whether the Pod has credentials.
func wireCredentials(req drivers.ApplyRequest, pod *corev1.Pod) (bool, error) {
	c := &pod.Spec.Containers[0]
	set := map[string]bool{}
	for _, e := range c.Env {
		set[e.Name] = true
	}
	env, err := gateway.AgentCredentialEnv(req.Object, req.Lineage, req.NamedAddr(gateway.AgentOf(req.Object.Addr)), func(k string) bool { return set[k] })
	if err != nil || env == nil {
		return false, err
	}
	for _, kv := range env {
		c.Env = append(c.Env, corev1.EnvVar{Name: kv[0], Value: kv[1]})
	}
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "bottle-ca", MountPath: gateway.AgentCADir, ReadOnly: true})
	pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: "bottle-ca", VolumeSource: corev1.VolumeSource{
		ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: cmBottleCA}},
	}})
	return true, nil
}

// putBottleCA writes the bottle's CA certificate and the bundle the
// agent trusts into the ConfigMap its Pod mounts. The CA's key is never
// in it.
func (d *Driver) putBottleCA(ctx context.Context, cs k8s.Interface, req drivers.ApplyRequest, ns string) error {
	hosts, err := gateway.AgentCAHosts(req.Object)
	if err != nil {
		return err
	}
	d.mu.RLock()
	stateDir := d.stateDir
	d.mu.RUnlock()
	cert, _, err := gateway.BottleCA(d.log, stateDir, req.Lineage, req.NamedAddr(gateway.AgentOf(req.Object.Addr)), hosts)
	if err != nil {
		return err
	}
	want := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: cmBottleCA, Namespace: ns, Labels: objectLabels(req, roleCA), Annotations: objectAnnotations(req)},
		Data: map[string]string{
			path.Base(gateway.AgentCAFile):   string(cert),
			path.Base(gateway.AgentCABundle): string(gateway.CABundle(gateway.HostCABundle(), cert)),
		},
	}
	_, err = cs.CoreV1().ConfigMaps(ns).Create(ctx, want, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		return err
	}
	have, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, cmBottleCA, metav1.GetOptions{})
	if err != nil {
		return err
	}
	have.Data, have.Labels, have.Annotations = want.Data, want.Labels, want.Annotations
	_, err = cs.CoreV1().ConfigMaps(ns).Update(ctx, have, metav1.UpdateOptions{})
	return err
}
