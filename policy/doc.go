// Package policy reads the operator's egress policy: a file outside the
// Bottlefile, which an agent author cannot widen from the configuration,
// that bounds the egress of every runtime (issue 25).
//
// The file is HCL (or JSON when its name ends in .json) with one
// attribute:
//
//	egress_ceiling = ["api.anthropic.com:443", "*.github.com:443"]
//
// Its rules use the grammar of an egress block's allow list. It is found
// at $BOTTLEFILE_POLICY when that is set, else at
// $XDG_CONFIG_HOME/bottlefile/policy.hcl (~/.config when unset), else at
// /etc/bottlefile/policy.hcl (Locate). No file means no operator ceiling.
//
// It imports only egress, for the rule grammar.
package policy
