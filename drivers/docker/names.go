package docker

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/bottlefile/bottlefile/drivers"
)

// Kinds of object the driver makes.
const (
	kindNetwork   = "network"
	kindImage     = "image"
	kindContainer = "container"
)

// namePart is what the engine accepts after the "bf-<lineage>-" prefix of a
// container or network name.
var namePart = regexp.MustCompile(`^[a-zA-Z0-9_.-]+$`)

// addrPart turns an object address into the agent-specific part of its
// engine name: "agent.coder", "agent.coder.network" and "agent.coder.image"
// all give "coder"; deeper addresses keep their path, joined by dashes.
func addrPart(addr, kind string) (string, error) {
	rest, ok := strings.CutPrefix(addr, "agent.")
	if !ok || rest == "" {
		return "", fmt.Errorf("address %q is not below %q", addr, "agent")
	}
	switch kind {
	case kindNetwork:
		rest = strings.TrimSuffix(rest, ".network")
	case kindImage:
		rest = strings.TrimSuffix(rest, ".image")
	}
	part := strings.ReplaceAll(rest, ".", "-")
	if !namePart.MatchString(part) {
		return "", fmt.Errorf("address %q gives the name part %q, which the engine does not accept (use letters, digits, '_', '.', '-')", addr, part)
	}
	return part, nil
}

// objectName is the engine name of a container or network:
// bf-<lineage[:8]>-<agent>.
func objectName(lineage, addr, kind string) (string, error) {
	prefix := drivers.LineagePrefix(lineage)
	if prefix == "" {
		return "", fmt.Errorf("no lineage to name %s by", addr)
	}
	part, err := addrPart(addr, kind)
	if err != nil {
		return "", err
	}
	return "bf-" + prefix + "-" + part, nil
}

// imageRepo is the repository a built image is tagged into. Repository
// names must be lower case with single separators, so the agent part is
// folded; when folding changed it, a short hash of the original keeps two
// agents ("Coder" and "coder") apart.
func imageRepo(lineage, addr string) (string, error) {
	prefix := drivers.LineagePrefix(lineage)
	if prefix == "" {
		return "", fmt.Errorf("no lineage to name %s by", addr)
	}
	part, err := addrPart(addr, kindImage)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(part) {
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
	if folded != part {
		sum := sha256.Sum256([]byte(part))
		if folded != "" {
			folded += "-"
		}
		folded += hex.EncodeToString(sum[:3])
	}
	return "bf-" + prefix + "-" + folded, nil
}

// imageTag is the reference a built image is tagged with:
// bf-<lineage[:8]>-<agent>:<context_hash[:12]>.
func imageTag(lineage, addr, contextHash string) (string, error) {
	repo, err := imageRepo(lineage, addr)
	if err != nil {
		return "", err
	}
	if len(contextHash) < 12 {
		return "", fmt.Errorf("context hash %q of %s is too short", contextHash, addr)
	}
	return repo + ":" + contextHash[:12], nil
}

func trimSlash(name string) string {
	return strings.TrimPrefix(name, "/")
}

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }
