package kubernetes

import (
	"fmt"
	"regexp"

	"github.com/bottlefile/bottlefile/addrs"
	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/engine"
	"github.com/bottlefile/bottlefile/drivers/gateway"
)

// Kinds of object the driver makes.
const (
	// kindNamespace is a bottle: its Namespace, the NetworkPolicies that
	// fence it and the Services its workloads reach each other by.
	kindNamespace = "namespace"
	// kindPod is an agent's or a sidecar's Pod.
	kindPod = "pod"
	// kindGateway is a bottle's egress gateway: its Pod, ConfigMap
	// (rules and forbid files) and, with credentials, Secret.
	kindGateway = gateway.Kind
)

// Labels and annotations of what the driver makes. Only what a label
// selector needs is a label (the lineage, the role of a Pod): an address
// (agent.coder["x"]) and a 64-digit configuration hash are not label
// values, so they are annotations, read back as labels are (live).
const (
	// labelRole says what a Pod is in its bottle ("agent", "sidecar",
	// "gateway"); labelName is a sidecar's name: the Services select by
	// them.
	labelRole = drivers.LabelPrefix + "role"
	labelName = drivers.LabelPrefix + "name"
	// annotSpec is a Pod's (or Namespace's) fingerprint of what
	// bottlefile set (drift.go).
	annotSpec = drivers.LabelPrefix + "spec"
)

// Roles of the Pods of a bottle.
const (
	roleAgent   = "agent"
	roleSidecar = "sidecar"
	roleGateway = "gateway"
)

// Names of the objects inside a bottle's namespace.
const (
	podAgent     = "agent"
	podGateway   = "gateway"
	svcGateway   = gateway.Alias
	cmGateway    = "gateway-rules"
	policyFence  = "bottle"
	policyEgress = "gateway-egress"
)

// sidecarPod is a sidecar's Pod name; its Service is the sidecar's name.
func sidecarPod(name string) string { return "sidecar-" + name }

// namespaceName is the namespace of the bottle an object at addr belongs
// to: prefix, the lineage's first eight letters and digits, '-', and the
// agent's name folded to a DNS label (lower case, runs of other
// characters as one '-'); when folding changed it, a short hash of the
// original keeps "Coder" and "coder" apart.
func namespaceName(prefix, lineage, addr string) (string, error) {
	lp := drivers.LineagePrefix(lineage)
	if lp == "" {
		return "", fmt.Errorf("no lineage to name %s by", addr)
	}
	a, err := addrs.Parse(addr)
	if err != nil {
		return "", fmt.Errorf("address %q cannot name a namespace: %w", addr, err)
	}
	if a.Agent() == "" {
		return "", fmt.Errorf("address %q is not below %q", addr, "agent")
	}
	part := a.SafeAgent()
	name := prefix + lp + "-" + engine.FoldLabel(part)
	if len(name) > 63 {
		return "", fmt.Errorf("the namespace name %s of %s is longer than 63 characters: shorten the agent's name or the runtime's namespace_prefix", name, addr)
	}
	return name, nil
}

// dnsLabel is what a Service name must be (RFC 1035 label).
var dnsLabel = regexp.MustCompile(`^[a-z]([-a-z0-9]*[a-z0-9])?$`)

// prefixRe is what a namespace_prefix must be.
var prefixRe = regexp.MustCompile(`^[a-z][-a-z0-9]*$`)

// checkSidecarName accepts a sidecar name that can name its Service,
// which the agent reaches it by.
func checkSidecarName(name string) error {
	switch {
	case !dnsLabel.MatchString(name) || len(name) > 55:
		return fmt.Errorf("the sidecar name %q cannot name a Kubernetes Service, which the agent reaches it by: use lower-case letters, digits and '-', starting with a letter, at most 55 characters", name)
	case name == gateway.Alias || name == "localhost" || name == "kubernetes":
		return fmt.Errorf("a sidecar cannot be named %q", name)
	}
	return nil
}

// sidecarName is the sidecar name of a sidecar address
// ("agent.coder.sidecar.web" → "web"), "" for any other.
func sidecarName(addr string) string {
	a, err := addrs.Parse(addr)
	if err != nil || a.Kind() != addrs.SidecarKind {
		return ""
	}
	return a.Name()
}
