package lang

import (
	"fmt"

	"github.com/hashicorp/hcl/v2"
)

// ValidName reports whether s can name a block: letters, digits, '_' and
// '-', starting with a letter. Such a name is also a valid HCL identifier,
// so it can appear in a reference like agent.NAME.
func ValidName(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z':
		case i > 0 && (r >= '0' && r <= '9' || r == '_' || r == '-'):
		default:
			return false
		}
	}
	return true
}

// checkName is an error at rng when name is not a valid name for a kind of
// block ("agent", "sidecar", ...).
func checkName(kind, name string, rng hcl.Range) hcl.Diagnostics {
	if ValidName(name) {
		return nil
	}
	return hcl.Diagnostics{{
		Severity: hcl.DiagError,
		Summary:  fmt.Sprintf("Invalid %s name", kind),
		Detail:   fmt.Sprintf("%q is not a valid %s name. A name must start with a letter and may contain only letters, digits, underscores and dashes.", name, kind),
		Subject:  rng.Ptr(),
	}}
}
