package addrs

import (
	"fmt"
	"strconv"
	"strings"
)

// InstanceKey tells apart the instances of an agent or snapshot block with
// for_each (a string key: agent.coder["frontend"]) or count (a number:
// agent.coder[0]). The zero value, NoKey, is a block without either. It is
// comparable.
type InstanceKey struct {
	kind keyKind
	s    string
	n    int
}

type keyKind uint8

const (
	noKey keyKind = iota
	stringKey
	intKey
)

// NoKey is the key of a block without for_each or count.
var NoKey InstanceKey

// MaxKeyLen is the longest string key: the key ends up in engine names,
// which a DNS label (63 characters) bounds on some runtimes.
const MaxKeyLen = 40

// StringKey is the key ["s"] of a for_each instance. It does not check s;
// CheckStringKey does.
func StringKey(s string) InstanceKey { return InstanceKey{kind: stringKey, s: s} }

// IntKey is the key [n] of a count instance.
func IntKey(n int) InstanceKey { return InstanceKey{kind: intKey, n: n} }

// CheckStringKey is why s cannot be a for_each key, "" when it can: a key
// is part of addresses on command lines and of engine object names, so it
// is 1 to MaxKeyLen letters, digits, '_' and '-'.
func CheckStringKey(s string) string {
	switch {
	case s == "":
		return "it is empty"
	case len(s) > MaxKeyLen:
		return fmt.Sprintf("it is longer than %d characters", MaxKeyLen)
	case strings.ContainsFunc(s, func(r rune) bool { return !isKeyRune(r) }):
		return "a key may contain only letters, digits, '_' and '-'"
	}
	return ""
}

func isKeyRune(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-'
}

// IsNone reports whether k is NoKey.
func (k InstanceKey) IsNone() bool { return k.kind == noKey }

// IsString reports whether k is a for_each key.
func (k InstanceKey) IsString() bool { return k.kind == stringKey }

// IsInt reports whether k is a count index.
func (k InstanceKey) IsInt() bool { return k.kind == intKey }

// Str is a for_each key's string ("" for others).
func (k InstanceKey) Str() string { return k.s }

// Int is a count index (0 for others).
func (k InstanceKey) Int() int { return k.n }

// String is the key as an address writes it: ["s"], [n], or "" for NoKey.
func (k InstanceKey) String() string {
	switch k.kind {
	case stringKey:
		return `["` + k.s + `"]`
	case intKey:
		return "[" + strconv.Itoa(k.n) + "]"
	}
	return ""
}

// ParseInstanceName splits an instance name, NAME, NAME["KEY"] or NAME[N],
// into the block's name and the key. The reason is "" when s is one.
func ParseInstanceName(s string) (name string, key InstanceKey, reason string) {
	open := strings.IndexByte(s, '[')
	if open < 0 {
		if strings.ContainsAny(s, `]"`) {
			return "", NoKey, fmt.Sprintf("%q has a ']' or '\"' outside an instance key", s)
		}
		return s, NoKey, ""
	}
	name, rest := s[:open], s[open:]
	if name == "" {
		return "", NoKey, fmt.Sprintf("%q names no block before its instance key", s)
	}
	if strings.ContainsAny(name, `]"`) {
		return "", NoKey, fmt.Sprintf("%q has a ']' or '\"' outside an instance key", s)
	}
	if !strings.HasSuffix(rest, "]") || len(rest) < 3 {
		return "", NoKey, fmt.Sprintf("instance key %s is not [\"KEY\"] or [N]", rest)
	}
	inner := rest[1 : len(rest)-1]
	if q, ok := strings.CutPrefix(inner, `"`); ok {
		k, ok := strings.CutSuffix(q, `"`)
		if !ok {
			return "", NoKey, fmt.Sprintf("instance key %s lacks its closing quote", rest)
		}
		if why := CheckStringKey(k); why != "" {
			return "", NoKey, fmt.Sprintf("instance key %s: %s", rest, why)
		}
		return name, StringKey(k), ""
	}
	n, err := strconv.Atoi(inner)
	if err != nil || n < 0 || strconv.Itoa(n) != inner {
		return "", NoKey, fmt.Sprintf("instance key %s is not [\"KEY\"] (for_each) or a number from 0 without leading zeros (count)", rest)
	}
	return name, IntKey(n), ""
}

// Separators of the engine-safe form of an instance name (SafeName): a
// for_each key after "__", a count index after "--".
const (
	safeStringSep = "__"
	safeIntSep    = "--"
)

// SafeName is the instance name NAME with key k in a form every engine
// takes as part of an object name (letters, digits, '_' and '-'):
// NAME__KEY for ["KEY"], NAME--N for [N], NAME for NoKey. A block with
// for_each needs a name CheckInstancedName accepts, so that
// ParseSafeName reads it back.
func SafeName(name string, k InstanceKey) string {
	switch k.kind {
	case stringKey:
		return name + safeStringSep + k.s
	case intKey:
		return name + safeIntSep + strconv.Itoa(k.n)
	}
	return name
}

// CheckInstancedName is why a block named name cannot have instances, ""
// when it can: "__" in it, or a '_' at its end, would make its instances'
// safe names (NAME__KEY) read back wrong.
func CheckInstancedName(name string) string {
	if strings.Contains(name, safeStringSep) || strings.HasSuffix(name, "_") {
		return "the name of a block with for_each or count must not contain \"__\" or end with '_', which would blur its instances' engine names (NAME__KEY)"
	}
	return ""
}

// ParseSafeName reads what SafeName wrote: the first "__" starts a
// for_each key; else a trailing "--N" is a count index; else it is a
// plain name. A plain block name with "__" or ending in "--N" reads as an
// instance: lang refuses configurations where that collides.
func ParseSafeName(s string) (string, InstanceKey) {
	if i := strings.Index(s, safeStringSep); i > 0 && i+len(safeStringSep) < len(s) {
		return s[:i], StringKey(s[i+len(safeStringSep):])
	}
	if i := strings.LastIndex(s, safeIntSep); i > 0 {
		digits := s[i+len(safeIntSep):]
		if n, err := strconv.Atoi(digits); err == nil && n >= 0 && strconv.Itoa(n) == digits {
			return s[:i], IntKey(n)
		}
	}
	return s, NoKey
}

// Key is the instance key of the agent or snapshot block a is (or is
// below); NoKey for others.
func (a Addr) Key() InstanceKey { return a.key }

// BlockName is the name of the block a's agent or snapshot block (or
// runtime) is declared by, without the instance key: "coder" for
// agent.coder["a"].sidecar.git.
func (a Addr) BlockName() string { return a.name }

// SafeName is SafeName of the instance a is (or is below): what engine
// object names hold for it.
func (a Addr) SafeName() string { return SafeName(a.name, a.key) }

// AgentInstance is agent.NAME[KEY].
func AgentInstance(name string, k InstanceKey) Addr {
	return Addr{kind: AgentKind, name: name, key: k}
}

// SnapshotInstance is snapshot.NAME[KEY].
func SnapshotInstance(name string, k InstanceKey) Addr {
	return Addr{kind: SnapshotKind, name: name, key: k}
}

// splitInstance is name and key of an instance name for the constructors:
// s whole, with NoKey, when it is not one (the label is then refused by
// Parse, never silently changed).
func splitInstance(s string) (string, InstanceKey) {
	if name, k, why := ParseInstanceName(s); why == "" {
		return name, k
	}
	return s, NoKey
}

// Safe is the textual address s with its instance name (the label after
// agent. or snapshot.) spelled as SafeName: agent.coder["a"].sidecar.git
// gives agent.coder__a.sidecar.git. Drivers derive engine names from it.
// s is returned as it is when it has no instance key, and an error when
// its instance key is malformed.
func Safe(s string) (string, error) {
	word, rest, ok := strings.Cut(s, ".")
	if !ok || (word != agentWord && word != snapshotWord) || !strings.Contains(rest, "[") {
		return s, nil
	}
	label, below, _ := strings.Cut(rest, ".")
	name, key, why := ParseInstanceName(label)
	if why != "" {
		return "", &ParseError{Text: s, Reason: why}
	}
	out := word + "." + SafeName(name, key)
	if below != "" {
		out += "." + below
	}
	return out, nil
}
