package addrs

import (
	"fmt"
	"strconv"
	"strings"
)

// Kind is what an address names.
type Kind uint8

const (
	// Invalid is the zero Addr's kind.
	Invalid Kind = iota
	AgentKind
	NetworkKind
	ImageKind
	GatewayKind
	SidecarKind
	SidecarImageKind
	PolicySnapshotKind
	SnapshotKind
	RuntimeKind
	EgressNetworkKind
	// OwnedKind is an object of a kind a driver declares (RegisterOwned)
	// under an agent: agent.NAME.WORD.
	OwnedKind
)

// The words of the textual form.
const (
	agentWord    = "agent"
	snapshotWord = "snapshot"
	runtimeWord  = "runtime"
	sidecarWord  = "sidecar"
	networkWord  = "network"
	imageWord    = "image"
	gatewayWord  = "gateway"
	egressWord   = "egress"
)

// Addr is one address. The zero value is invalid and renders as "".
type Addr struct {
	kind Kind
	name string      // the agent's, snapshot block's or runtime's name
	key  InstanceKey // the agent's or snapshot block's instance key
	sub  string      // the sidecar's name; an owned object's word
	n    int         // the policy snapshot's number
}

// Agent is agent.NAME. name is an instance name (Addr.Agent): NAME, or
// NAME["KEY"] or NAME[N] for an instance of a block with for_each or count.
func Agent(name string) Addr {
	n, k := splitInstance(name)
	return AgentInstance(n, k)
}

// Sidecar is agent.AGENT.sidecar.NAME; agent is an instance name.
func Sidecar(agent, name string) Addr { return Agent(agent).Sidecar(name) }

// PolicySnapshot is agent.AGENT.snapshot.N; agent is an instance name.
func PolicySnapshot(agent string, n int) Addr { return Agent(agent).PolicySnapshot(n) }

// Snapshot is snapshot.NAME, a snapshot block; name is an instance name.
func Snapshot(name string) Addr {
	n, k := splitInstance(name)
	return SnapshotInstance(n, k)
}

// Runtime is runtime.NAME.
func Runtime(name string) Addr { return Addr{kind: RuntimeKind, name: name} }

// Network is the network of the agent a belongs to: agent.NAME.network.
func (a Addr) Network() Addr { return a.owned(NetworkKind) }

// Gateway is the egress gateway of the agent a belongs to:
// agent.NAME.gateway.
func (a Addr) Gateway() Addr { return a.owned(GatewayKind) }

// PolicySnapshot is the agent's policy snapshot N: agent.NAME.snapshot.N.
func (a Addr) PolicySnapshot(n int) Addr {
	b := a.owned(PolicySnapshotKind)
	b.n = n
	return b
}

// Sidecar is the agent's sidecar NAME: agent.AGENT.sidecar.NAME.
func (a Addr) Sidecar(name string) Addr {
	b := a.owned(SidecarKind)
	b.sub = name
	return b
}

// Image is the image a build block makes for the workload a:
// agent.NAME.image for an agent, agent.NAME.sidecar.S.image for a sidecar.
// It is the zero Addr for anything else.
func (a Addr) Image() Addr {
	switch a.kind {
	case AgentKind:
		return Addr{kind: ImageKind, name: a.name, key: a.key}
	case SidecarKind:
		return Addr{kind: SidecarImageKind, name: a.name, key: a.key, sub: a.sub}
	}
	return Addr{}
}

// Egress is the managed egress network of the runtime a:
// runtime.NAME.egress. It is the zero Addr for anything but a runtime.
func (a Addr) Egress() Addr {
	if a.kind != RuntimeKind && a.kind != EgressNetworkKind {
		return Addr{}
	}
	return Addr{kind: EgressNetworkKind, name: a.name}
}

// owned words are the object kinds drivers declared under an agent
// (RegisterOwned), by word.
var ownedWords = map[string]bool{}

// RegisterOwned lets a driver name objects of its own kind under an
// agent, agent.NAME.WORD (a host probe, a policy object), which Parse
// then accepts. Drivers call it from init, before any address is parsed.
// It panics on a word that is not one label or that is one of addrs' own
// (network, image, gateway, sidecar, snapshot): a programming error.
func RegisterOwned(word string) {
	switch {
	case word == "" || strings.ContainsAny(word, ". \t\n"):
		panic(fmt.Sprintf("addrs: owned kind %q is not one label", word))
	case word == networkWord || word == imageWord || word == gatewayWord || word == sidecarWord || word == snapshotWord:
		panic(fmt.Sprintf("addrs: owned kind %q is addrs' own", word))
	}
	ownedWords[word] = true
}

// Owned is the agent's object of a driver's own kind word (RegisterOwned):
// agent.NAME.WORD; the zero Addr when a is below no agent or word is not
// registered.
func (a Addr) Owned(word string) Addr {
	if !ownedWords[word] {
		return Addr{}
	}
	b := a.owned(OwnedKind)
	b.sub = word
	return b
}

// NetworkOf is the textual address of the network of the agent the
// textual address s is below ("" when it is below none): what drivers
// use instead of appending ".network".
func NetworkOf(s string) string {
	a, ok := AgentOf(s)
	if !ok {
		return ""
	}
	return a.Network().String()
}

// ImageOf is the textual address of the image a build block makes for
// the workload s (agent.NAME or agent.NAME.sidecar.S); "" for anything
// else.
func ImageOf(s string) string {
	a, err := Parse(s)
	if err != nil {
		return ""
	}
	return a.Image().String()
}

// SidecarOf is the textual address of sidecar name of the agent the
// textual address s is below; "" when it is below none.
func SidecarOf(s, name string) string {
	a, ok := AgentOf(s)
	if !ok {
		return ""
	}
	return a.Sidecar(name).String()
}

// owned is the object of the given kind owned by a's agent, or the zero
// Addr when a is not below an agent.
func (a Addr) owned(k Kind) Addr {
	if a.Agent() == "" {
		return Addr{}
	}
	return Addr{kind: k, name: a.name, key: a.key}
}

// Kind is what a names.
func (a Addr) Kind() Kind { return a.kind }

// IsValid reports whether a is an address, not the zero Addr.
func (a Addr) IsValid() bool { return a.kind != Invalid }

// Agent is the instance name of the agent a belongs to (agent.NAME and
// everything below it): NAME, or NAME["KEY"] / NAME[N] for an instance of
// a block with for_each / count; "" for what belongs to no agent.
func (a Addr) Agent() string {
	switch a.kind {
	case AgentKind, NetworkKind, ImageKind, GatewayKind, SidecarKind, SidecarImageKind, PolicySnapshotKind, OwnedKind:
		return a.instanceName()
	}
	return ""
}

// instanceName is the name with its instance key.
func (a Addr) instanceName() string { return a.name + a.key.String() }

// AgentAddr is agent.NAME for anything below that agent, a itself for an
// agent, and the zero Addr for what belongs to no agent.
func (a Addr) AgentAddr() Addr {
	if a.Agent() != "" {
		return AgentInstance(a.name, a.key)
	}
	return Addr{}
}

// Name is the name a's last label gives: the agent's for an agent, the
// sidecar's for a sidecar, the block's for a snapshot block or a runtime.
// Owned objects (network, image, gateway, egress network, policy snapshot)
// give their owner's name.
func (a Addr) Name() string {
	if a.kind == SidecarKind || a.kind == SidecarImageKind {
		return a.sub
	}
	return a.instanceName()
}

// IsAgent reports whether a is agent.NAME itself.
func (a Addr) IsAgent() bool { return a.kind == AgentKind }

// IsWorkload reports whether a is something that runs: an agent, a sidecar
// or a gateway.
func (a Addr) IsWorkload() bool {
	return a.kind == AgentKind || a.kind == SidecarKind || a.kind == GatewayKind
}

// IsSnapshot reports whether a is a snapshot: a policy snapshot or a
// snapshot block.
func (a Addr) IsSnapshot() bool { return a.kind == PolicySnapshotKind || a.kind == SnapshotKind }

// IsPolicySnapshot reports whether a is agent.NAME.snapshot.N.
func (a Addr) IsPolicySnapshot() bool { return a.kind == PolicySnapshotKind }

// IsSnapshotBlock reports whether a is snapshot.NAME.
func (a Addr) IsSnapshotBlock() bool { return a.kind == SnapshotKind }

// PolicySnapshotNumber is N of agent.NAME.snapshot.N, with false for any
// other address.
func (a Addr) PolicySnapshotNumber() (int, bool) {
	if a.kind != PolicySnapshotKind {
		return 0, false
	}
	return a.n, true
}

// String is the textual form, the one state, plans and labels hold; "" for
// the zero Addr.
func (a Addr) String() string {
	switch a.kind {
	case AgentKind:
		return agentWord + "." + a.instanceName()
	case NetworkKind:
		return agentWord + "." + a.instanceName() + "." + networkWord
	case ImageKind:
		return agentWord + "." + a.instanceName() + "." + imageWord
	case GatewayKind:
		return agentWord + "." + a.instanceName() + "." + gatewayWord
	case SidecarKind:
		return agentWord + "." + a.instanceName() + "." + sidecarWord + "." + a.sub
	case SidecarImageKind:
		return agentWord + "." + a.instanceName() + "." + sidecarWord + "." + a.sub + "." + imageWord
	case PolicySnapshotKind:
		return agentWord + "." + a.instanceName() + "." + snapshotWord + "." + strconv.Itoa(a.n)
	case SnapshotKind:
		return snapshotWord + "." + a.instanceName()
	case RuntimeKind:
		return runtimeWord + "." + a.instanceName()
	case EgressNetworkKind:
		return runtimeWord + "." + a.instanceName() + "." + egressWord
	case OwnedKind:
		return agentWord + "." + a.instanceName() + "." + a.sub
	}
	return ""
}

// AgentOf is the agent a textual address is below: agent.NAME for
// agent.NAME and for anything under it. It reads only the first two labels,
// so an object a driver keeps under an agent in a form Parse does not know
// still belongs to that agent; false for an address below no agent.
func AgentOf(s string) (Addr, bool) {
	rest, ok := strings.CutPrefix(s, agentWord+".")
	label, _, _ := strings.Cut(rest, ".")
	if !ok || label == "" || strings.ContainsFunc(label, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		return Addr{}, false
	}
	name, key, why := ParseInstanceName(label)
	if why != "" {
		return Addr{}, false
	}
	return AgentInstance(name, key), true
}

// ParseError is the error Parse returns: the text, and what is wrong
// with it.
type ParseError struct {
	Text   string
	Reason string
}

func (e *ParseError) Error() string {
	return fmt.Sprintf("%q is not an address: %s", e.Text, e.Reason)
}

// forms lists the accepted forms, for error messages.
const forms = "agent.NAME, agent.NAME.network, agent.NAME.image, agent.NAME.gateway, agent.NAME.sidecar.NAME, agent.NAME.sidecar.NAME.image, agent.NAME.snapshot.N, snapshot.NAME, runtime.NAME or runtime.NAME.egress"

// Parse reads an address in its textual form. Every label must be a
// non-empty name without spaces, and N of a policy snapshot a number from 1
// without leading zeros, so that Parse(s).String() == s. The error is a
// *ParseError that says what is wrong.
func Parse(s string) (Addr, error) {
	fail := func(format string, args ...any) (Addr, error) {
		return Addr{}, &ParseError{Text: s, Reason: fmt.Sprintf(format, args...)}
	}
	if s == "" {
		return fail("it is empty; an address is one of %s", forms)
	}
	parts := strings.Split(s, ".")
	for i, p := range parts {
		if p == "" {
			return fail("label %d is empty", i+1)
		}
		if strings.ContainsFunc(p, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
			return fail("label %q holds a space or a control character", p)
		}
	}
	switch parts[0] {
	case agentWord:
		if len(parts) == 1 {
			return fail("it names no agent; write agent.NAME")
		}
		name, key, why := ParseInstanceName(parts[1])
		if why != "" {
			return fail("%s", why)
		}
		a := AgentInstance(name, key)
		switch {
		case len(parts) == 2:
			return a, nil
		case len(parts) == 3 && parts[2] == networkWord:
			return a.Network(), nil
		case len(parts) == 3 && parts[2] == imageWord:
			return a.Image(), nil
		case len(parts) == 3 && parts[2] == gatewayWord:
			return a.Gateway(), nil
		case parts[2] == sidecarWord && len(parts) == 4:
			return a.Sidecar(parts[3]), nil
		case parts[2] == sidecarWord && len(parts) == 5 && parts[4] == imageWord:
			return a.Sidecar(parts[3]).Image(), nil
		case parts[2] == sidecarWord && len(parts) == 3:
			return fail("it names no sidecar; write agent.%s.sidecar.NAME", parts[1])
		case parts[2] == snapshotWord && len(parts) == 4:
			n, err := strconv.Atoi(parts[3])
			if err != nil || n < 1 || strconv.Itoa(n) != parts[3] {
				return fail("policy snapshot number %q is not a number from 1 (agent.%s.snapshot.N)", parts[3], parts[1])
			}
			return a.PolicySnapshot(n), nil
		case parts[2] == snapshotWord && len(parts) == 3:
			return fail("it names no snapshot; write agent.%s.snapshot.N", parts[1])
		case len(parts) == 3 && ownedWords[parts[2]]:
			return a.Owned(parts[2]), nil
		}
		return fail("%q is not something an agent owns; below agent.%s come .network, .image, .gateway, .sidecar.NAME, .sidecar.NAME.image and .snapshot.N", strings.Join(parts[2:], "."), parts[1])
	case snapshotWord:
		if len(parts) != 2 {
			return fail("a snapshot block's address is snapshot.NAME")
		}
		name, key, why := ParseInstanceName(parts[1])
		if why != "" {
			return fail("%s", why)
		}
		return SnapshotInstance(name, key), nil
	case runtimeWord:
		switch {
		case strings.ContainsAny(parts[1], `[]"`):
			return fail("a runtime has no instances; runtime.NAME takes no key")
		case len(parts) == 2:
			return Runtime(parts[1]), nil
		case len(parts) == 3 && parts[2] == egressWord:
			return Runtime(parts[1]).Egress(), nil
		}
		return fail("a runtime's address is runtime.NAME or runtime.NAME.egress")
	}
	return fail("it starts with %q; an address is one of %s", parts[0], forms)
}

// MustParse is Parse for addresses known to be valid, as in tests; it
// panics on an error.
func MustParse(s string) Addr {
	a, err := Parse(s)
	if err != nil {
		panic(err)
	}
	return a
}
