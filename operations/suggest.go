package operations

import (
	"fmt"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"

	"github.com/bottlefile/bottlefile/addrs"
	"github.com/bottlefile/bottlefile/planner"
)

// This file is the one place where an address given on the command line
// that names nothing gets its "Did you mean": every command that takes an
// address (logs, status, exec, plan/apply/destroy -target and -replace,
// snapshot take/rm/export, state show/rm) reaches it through the
// operation it calls.

// unknownAddress is the error for an address that names nothing among
// known, with the closest known address suggested.
func unknownAddress(summary, detail, given string, known []string) *hcl.Diagnostic {
	return errorDiag(summary, detail+addressHint(given, known))
}

// withSuggestions adds the "Did you mean" to each diagnostic the planner
// marked as being about an unknown address.
func withSuggestions(diags hcl.Diagnostics) hcl.Diagnostics {
	for _, d := range diags {
		u, ok := d.Extra.(planner.UnknownAddress)
		if !ok {
			continue
		}
		d.Detail += addressHint(u.Given, u.Known)
		d.Extra = nil
	}
	return diags
}

// addressHint follows the error for an address that names nothing: the
// "Did you mean" when a known address is close, else, when given is no
// address at all, what is wrong with it (addrs.Parse's reason).
func addressHint(given string, known []string) string {
	if s := didYouMean(given, known); s != "" {
		return s
	}
	if _, err := addrs.Parse(given); err != nil {
		return " " + err.Error() + "."
	}
	return ""
}

// didYouMean is ` Did you mean "agent.claude"?` for the known address
// closest to given, or "" when none is close: at most 2 edits, or a third
// of the name after its kind (agent.clade is agent.claude), or the same
// words in another case.
func didYouMean(given string, known []string) string {
	if s := SuggestAddress(given, known); s != "" {
		return fmt.Sprintf(" Did you mean %q?", s)
	}
	return ""
}

// SuggestAddress is the address among known closest to given, or "".
func SuggestAddress(given string, known []string) string {
	known = slices.Clone(known)
	slices.Sort(known)
	best, bestDist := "", max(3, len(given)/6+1)
	for _, k := range slices.Compact(known) {
		if k == given {
			return ""
		}
		d := addrs.EditDistance(given, k)
		if strings.EqualFold(given, k) {
			d = 0
		}
		if d < bestDist {
			best, bestDist = k, d
		}
	}
	return best
}
