package gateway

import (
	"net/netip"

	"github.com/bottlefile/bottlefile/egress"
)

// RulesData is the content of a gateway's rules file (RulesFile): the
// agent's allowlist and its bottle's sidecar names.
func RulesData(agent string, allow, sidecars []string) ([]byte, error) {
	rules, err := egress.ParseRules(allow)
	if err != nil {
		return nil, err
	}
	f := egress.NewRulesFile(agent, rules)
	f.Sidecars = sidecars
	return f.Marshal()
}

// ForbidData is the content of a gateway's forbid file (ForbidFile): the
// networks it must never connect to, besides egress's built-in ones.
func ForbidData(forbid []netip.Prefix) ([]byte, error) {
	return egress.NewForbidFile(forbid).Marshal()
}
