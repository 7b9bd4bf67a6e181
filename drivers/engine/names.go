package engine

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/zclconf/go-cty/cty"

	"github.com/bottlefile/bottlefile/addrs"
	"github.com/bottlefile/bottlefile/drivers"
)

// How bottlefile names what it makes on a Docker engine, and the workload
// checks every Docker-engine driver makes, so that docker, swarm and a
// later driver name the same object alike.

// Kinds of the objects a Docker-engine driver names.
const (
	KindNetwork   = "network"
	KindImage     = "image"
	KindContainer = "container"
)

// NamePart is what the engine accepts after the "bf-<lineage>-" prefix of a
// container or network name.
var NamePart = regexp.MustCompile(`^[a-zA-Z0-9_.-]+$`)

// AddrPart turns an object address into the agent-specific part of its
// engine name: "agent.coder", "agent.coder.network" and "agent.coder.image"
// all give "coder" (a network or image is named after its owner,
// addrs.Addr.Owner); deeper addresses keep their path below the agent,
// joined by dashes; agent.coder["frontend"] gives "coder__frontend"
// (addrs.SafeName). The address is read with addrs.Parse, never cut by
// hand.
func AddrPart(addr, kind string) (string, error) {
	a, err := addrs.Parse(addr)
	if err != nil {
		return "", fmt.Errorf("address %q cannot name an engine object: %w", addr, err)
	}
	if a.Agent() == "" {
		return "", fmt.Errorf("address %q is not below %q", addr, "agent")
	}
	if (kind == KindNetwork && a.Kind() == addrs.NetworkKind) || (kind == KindImage && (a.Kind() == addrs.ImageKind || a.Kind() == addrs.SidecarImageKind)) {
		a = a.Owner()
	}
	part := strings.Join(append([]string{a.SafeAgent()}, a.Below()...), "-")
	if !NamePart.MatchString(part) {
		return "", fmt.Errorf("address %q gives the name part %q, which the engine does not accept (use letters, digits, '_', '.', '-')", addr, part)
	}
	return part, nil
}

// ObjectName is the engine name of a container or network (or a
// service) of kind KindContainer or KindNetwork:
// bf-<lineage[:8]>-<agent>.
func ObjectName(lineage, addr, kind string) (string, error) {
	prefix := drivers.LineagePrefix(lineage)
	if prefix == "" {
		return "", fmt.Errorf("no lineage to name %s by", addr)
	}
	part, err := AddrPart(addr, kind)
	if err != nil {
		return "", err
	}
	return "bf-" + prefix + "-" + part, nil
}

// ImageRepo is the repository a built image is tagged into. Repository
// names must be lower case with single separators, so the agent part is
// folded; when folding changed it, a short hash of the original keeps two
// agents ("Coder" and "coder") apart.
func ImageRepo(lineage, addr string) (string, error) {
	prefix := drivers.LineagePrefix(lineage)
	if prefix == "" {
		return "", fmt.Errorf("no lineage to name %s by", addr)
	}
	part, err := AddrPart(addr, KindImage)
	if err != nil {
		return "", err
	}
	return "bf-" + prefix + "-" + FoldLabel(part), nil
}

// ImageTag is the reference a built image is tagged with:
// bf-<lineage[:8]>-<agent>:<context_hash[:12]>.
func ImageTag(lineage, addr, contextHash string) (string, error) {
	repo, err := ImageRepo(lineage, addr)
	if err != nil {
		return "", err
	}
	if len(contextHash) < 12 {
		return "", fmt.Errorf("context hash %q of %s is too short", contextHash, addr)
	}
	return repo + ":" + contextHash[:12], nil
}

// CheckLabels rejects agent labels that would shadow bottlefile's own.
// Unknown values are left for apply.
func CheckLabels(v cty.Value) error {
	if v == cty.NilVal {
		return nil
	}
	m, err := drivers.StringMap(v)
	if err != nil {
		if !v.IsWhollyKnown() {
			return nil
		}
		return err
	}
	for k := range m {
		if strings.HasPrefix(k, drivers.LabelPrefix) {
			return fmt.Errorf("label %q is reserved: %s* labels are set by bottlefile", k, drivers.LabelPrefix)
		}
	}
	return nil
}

// CheckLimits rejects negative or fractional limits that are known.
func CheckLimits(cpus, memory cty.Value) error {
	if cpus != cty.NilVal && cpus.IsWhollyKnown() {
		f, err := drivers.Float(cpus)
		if err != nil {
			return fmt.Errorf("cpus: %w", err)
		}
		if f < 0 {
			return fmt.Errorf("cpus: must not be negative, got %g", f)
		}
	}
	if memory != cty.NilVal && memory.IsWhollyKnown() {
		m, err := drivers.Int(memory)
		if err != nil {
			return fmt.Errorf("memory: %w", err)
		}
		if m < 0 {
			return fmt.Errorf("memory: must not be negative, got %d", m)
		}
	}
	return nil
}

// LabelSnapshotOf is the label of a snapshot image that names the agent it
// is a snapshot of (its address).
const LabelSnapshotOf = drivers.LabelPrefix + "snapshot-of"

// validTag is what the engine accepts as an image tag.
var validTag = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`)

var allDigits = regexp.MustCompile(`^[0-9]+$`)

// snapshotRepo is the repository snapshots of an agent are tagged into.
func snapshotRepo(lineage, agentAddr string) (string, error) {
	repo, err := ImageRepo(lineage, agentAddr)
	if err != nil {
		return "", err
	}
	return repo + "-snap", nil
}

// snapshotTag is the tag of one snapshot: N for agent.X.snapshot.N, NAME
// for snapshot.NAME, else (or when NAME is no valid tag, or all digits and
// so could be taken for a policy snapshot) a short hash of the address.
func snapshotTag(addr, agentAddr string) string {
	a, err := addrs.Parse(addr)
	if n, ok := a.PolicySnapshotNumber(); err == nil && ok && a.AgentAddr().String() == agentAddr {
		return strconv.Itoa(n)
	}
	if err == nil && a.IsSnapshotBlock() && validTag.MatchString(a.Name()) && !allDigits.MatchString(a.Name()) {
		return a.Name()
	}
	sum := sha256.Sum256([]byte(addr))
	return "s-" + hex.EncodeToString(sum[:6])
}

// SnapshotRef is the reference of a snapshot image:
// bf-<lineage[:8]>-<agent>-snap:<tag>.
func SnapshotRef(lineage, addr, agentAddr string) (string, error) {
	repo, err := snapshotRepo(lineage, agentAddr)
	if err != nil {
		return "", err
	}
	return repo + ":" + snapshotTag(addr, agentAddr), nil
}

// AgentOfName is the address of the agent whose container (or network)
// ObjectName named name for the lineage: what AddrPart did, read back for
// an agent, agent.coder["frontend"] from bf-<lineage[:8]>-coder__frontend.
// False when name is no such name of that lineage. The bf.address label
// stays the truth; this is for reading names by eye and for checking that
// names keep instances apart.
func AgentOfName(lineage, name string) (string, bool) {
	prefix := drivers.LineagePrefix(lineage)
	part, ok := strings.CutPrefix(name, "bf-"+prefix+"-")
	if prefix == "" || !ok || part == "" || !NamePart.MatchString(part) || strings.Contains(part, ".") {
		return "", false
	}
	block, key := addrs.ParseSafeName(part)
	return addrs.AgentInstance(block, key).String(), true
}

// FoldLabel makes s a DNS label part (an image repository's, a Kubernetes
// object's name): lower-case letters and digits, other runs one '-', with
// a short hash of s when that changed it, so names that differ only in
// case or punctuation stay apart.
func FoldLabel(s string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(s) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
			dash = false
			continue
		}
		if !dash && b.Len() > 0 {
			b.WriteByte('-')
			dash = true
		}
	}
	folded := strings.TrimSuffix(b.String(), "-")
	if folded != s {
		sum := sha256.Sum256([]byte(s))
		if folded != "" {
			folded += "-"
		}
		folded += hex.EncodeToString(sum[:3])
	}
	return folded
}
