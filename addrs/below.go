package addrs

import "strings"

// Below is the labels of a below its agent, in order: none for
// agent.NAME, ["network"] for its network, ["sidecar", "db"] for a
// sidecar, ["sidecar", "db", "image"] for a sidecar's image; nil for what
// belongs to no agent. Drivers derive engine names from it instead of
// cutting the textual form.
func (a Addr) Below() []string {
	if a.Agent() == "" {
		return nil
	}
	rest := strings.TrimPrefix(a.String(), a.AgentAddr().String())
	if rest == "" {
		return []string{}
	}
	return strings.Split(strings.TrimPrefix(rest, "."), ".")
}

// SafeAgent is the name of the agent a belongs to with its instance key
// in the engine-safe spelling (SafeName): coder, coder__frontend,
// coder--0; "" for what belongs to no agent.
func (a Addr) SafeAgent() string {
	if a.Agent() == "" {
		return ""
	}
	return SafeName(a.name, a.key)
}

// Owner is what a names an engine object after when the object is of
// the kind a itself is: the agent for its network or image, the sidecar
// for a sidecar's image; a itself otherwise.
func (a Addr) Owner() Addr {
	switch a.kind {
	case NetworkKind, ImageKind:
		return a.AgentAddr()
	case SidecarImageKind:
		return a.AgentAddr().Sidecar(a.sub)
	}
	return a
}
