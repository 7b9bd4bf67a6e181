package swarm

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/distribution/reference"
	"github.com/docker/docker/api/types/swarm"

	"github.com/bottlefile/bottlefile/drivers"
)

// labelSpec is on every service: a fingerprint of the parts of its spec
// bottlefile set (specFingerprint), so that Read tells a service changed
// or scaled outside bottlefile (docker service update, scale) from one as
// bottlefile made it. The labels of the service itself, not of its task's
// container, which is made again by any change.
const labelSpec = drivers.LabelPrefix + "spec"

// specParts are the parts of a service's spec the fingerprint covers, in
// its order, and how each is named in a plan's reason.
var specParts = []struct{ key, words string }{
	{"image", "image"},
	{"command", "entrypoint"},
	{"args", "command"},
	{"env", "environment"},
	{"dir", "working directory"},
	{"user", "user"},
	{"placement", "placement"},
	{"limits", "resource limits"},
}

// specFingerprint is "image=H,command=H,...,replicas=N": a short hash of
// each part of the spec bottlefile sets, and the replica count. Env is a
// hash too: no value of it is ever in a label.
func specFingerprint(spec swarm.ServiceSpec) string {
	cs := spec.TaskTemplate.ContainerSpec
	if cs == nil {
		cs = &swarm.ContainerSpec{}
	}
	var constraints []string
	if p := spec.TaskTemplate.Placement; p != nil {
		constraints = slices.Sorted(slices.Values(p.Constraints))
	}
	limits := []int64{0, 0}
	if r := spec.TaskTemplate.Resources; r != nil && r.Limits != nil {
		limits = []int64{r.Limits.NanoCPUs, r.Limits.MemoryBytes}
		if r.Limits.Pids != 0 {
			// Only when set: the fingerprint of a service without one
			// stays what it was before pids existed.
			limits = append(limits, r.Limits.Pids)
		}
	}
	values := map[string]any{
		"image": cs.Image, "command": cs.Command, "args": cs.Args,
		"env": slices.Sorted(slices.Values(cs.Env)), "dir": cs.Dir, "user": cs.User,
		"placement": constraints, "limits": limits,
	}
	parts := make([]string, 0, len(specParts)+1)
	for _, p := range specParts {
		data, _ := json.Marshal(values[p.key])
		sum := sha256.Sum256(data)
		parts = append(parts, p.key+"="+hex.EncodeToString(sum[:4]))
	}
	parts = append(parts, "replicas="+strconv.FormatUint(replicas(spec), 10))
	return strings.Join(parts, ",")
}

func replicas(spec swarm.ServiceSpec) uint64 {
	if r := spec.Mode.Replicated; r != nil && r.Replicas != nil {
		return *r.Replicas
	}
	return 0
}

// drift says how a live service differs from the fingerprint bottlefile
// labelled it with: "" when it does not (or has no such label). A service
// scaled to no replicas is stopped, not drifted (serviceFacts).
func drift(spec swarm.ServiceSpec) string {
	made := parseFingerprint(spec.Labels[labelSpec])
	if len(made) == 0 {
		return ""
	}
	now := parseFingerprint(specFingerprint(spec))
	var changed []string
	for _, p := range specParts {
		if made[p.key] != now[p.key] {
			changed = append(changed, p.words)
		}
	}
	var why []string
	if len(changed) > 0 {
		why = append(why, fmt.Sprintf("its %s changed outside bottlefile", joinWords(changed)))
	}
	if n := replicas(spec); n > 1 && now["replicas"] != made["replicas"] {
		why = append(why, fmt.Sprintf("it was scaled to %d replicas outside bottlefile (a bottle's workload is one task)", n))
	}
	return strings.Join(why, ", and ")
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

// tagged is an image reference as the client sends it to the cluster
// (a name without a tag gets :latest), so the fingerprint of what is sent
// is the fingerprint of what is read back.
func tagged(image string) string {
	ref, err := reference.ParseAnyReference(image)
	if err != nil {
		return image
	}
	named, ok := ref.(reference.Named)
	if !ok {
		return image
	}
	if _, digested := named.(reference.Digested); digested {
		return image
	}
	return reference.FamiliarString(reference.TagNameOnly(named))
}
