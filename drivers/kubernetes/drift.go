package kubernetes

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/bottlefile/bottlefile/drivers"
)

// A Pod's spec is immutable but for its containers' images, its
// tolerations (added to) and its activeDeadlineSeconds; its labels can
// change. bottlefile annotates each Pod with a fingerprint of what it set
// (annotSpec) and reads the Pod's drift from it, as swarm does a
// service's.

// specParts are the parts of a Pod the fingerprint covers, in its order,
// and how each is named in a plan's reason.
var specParts = []struct{ key, words string }{
	{"image", "image"},
	{"command", "entrypoint"},
	{"args", "command"},
	{"env", "environment"},
	{"dir", "working directory"},
	{"tolerations", "tolerations"},
	{"deadline", "deadline"},
	{"labels", "labels"},
}

// podFingerprint is "image=H,command=H,...": a short hash of each part.
// Env is a hash too: no value of it is ever in an annotation.
func podFingerprint(p *corev1.Pod) string {
	var c corev1.Container
	if len(p.Spec.Containers) > 0 {
		c = p.Spec.Containers[0]
	}
	env := make([]string, 0, len(c.Env))
	for _, e := range c.Env {
		env = append(env, e.Name+"="+e.Value)
	}
	slices.Sort(env)
	tols := make([]string, 0, len(p.Spec.Tolerations))
	for _, t := range p.Spec.Tolerations {
		tols = append(tols, fmt.Sprintf("%s|%s|%s|%s", t.Key, t.Operator, t.Value, t.Effect))
	}
	slices.Sort(tols)
	var labels []string
	for _, k := range slices.Sorted(maps.Keys(p.Labels)) {
		labels = append(labels, k+"="+p.Labels[k])
	}
	var deadline int64
	if p.Spec.ActiveDeadlineSeconds != nil {
		deadline = *p.Spec.ActiveDeadlineSeconds
	}
	values := map[string]any{
		"image": c.Image, "command": c.Command, "args": c.Args, "env": env, "dir": c.WorkingDir,
		"tolerations": tols, "deadline": deadline, "labels": labels,
	}
	parts := make([]string, 0, len(specParts))
	for _, part := range specParts {
		data, _ := json.Marshal(values[part.key])
		sum := sha256.Sum256(data)
		parts = append(parts, part.key+"="+hex.EncodeToString(sum[:4]))
	}
	return strings.Join(parts, ",")
}

// podDrift says how a live Pod differs from the fingerprint bottlefile
// annotated it with: "" when it does not (or has no such annotation).
func podDrift(p *corev1.Pod) string {
	made := parseFingerprint(p.Annotations[annotSpec])
	if len(made) == 0 {
		return ""
	}
	// The fingerprint was taken before the API server added its
	// defaults: tolerations it adds (not-ready, unreachable) are not
	// changes.
	q := p.DeepCopy()
	q.Spec.Tolerations = slices.DeleteFunc(q.Spec.Tolerations, func(t corev1.Toleration) bool {
		return t.Key == corev1.TaintNodeNotReady || t.Key == corev1.TaintNodeUnreachable
	})
	now := parseFingerprint(podFingerprint(q))
	var changed []string
	for _, part := range specParts {
		if made[part.key] != now[part.key] {
			changed = append(changed, part.words)
		}
	}
	if len(changed) == 0 {
		return ""
	}
	return fmt.Sprintf("its Pod's %s changed outside bottlefile", joinWords(changed))
}

func parseFingerprint(s string) map[string]string {
	out := map[string]string{}
	for _, kv := range strings.Split(s, ",") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			out[k] = v
		}
	}
	return out
}

// joinWords joins "a", "b" and "c" as "a, b and c".
func joinWords(words []string) string {
	if len(words) < 2 {
		return strings.Join(words, "")
	}
	return strings.Join(words[:len(words)-1], ", ") + " and " + words[len(words)-1]
}

// policyDrift says which of a bottle's NetworkPolicies are missing, or
// were changed outside bottlefile (their generation moved past the one
// they were made with, 1).
func policyDrift(have map[string]int64) string {
	var why []string
	for _, name := range []string{policyFence, policyEgress} {
		gen, ok := have[name]
		switch {
		case !ok:
			why = append(why, fmt.Sprintf("its NetworkPolicy %s was deleted outside bottlefile", name))
		case gen > 1:
			why = append(why, fmt.Sprintf("its NetworkPolicy %s was changed outside bottlefile", name))
		}
	}
	return strings.Join(why, ", and ")
}

var _ = drivers.LabelPrefix
