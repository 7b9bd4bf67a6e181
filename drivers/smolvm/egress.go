package smolvm

import (
	"fmt"
	"net/netip"

	"github.com/zclconf/go-cty/cty"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/egress"
)

// checkEgress checks an allowlist value (a list of rules, or null for no
// egress block) at plan time. A list not yet wholly known is checked at
// apply.
func checkEgress(v cty.Value) error {
	if v == cty.NilVal || !v.IsWhollyKnown() {
		return nil
	}
	rules, err := drivers.Strings(v)
	if err != nil {
		return fmt.Errorf("egress: %w", err)
	}
	_, err = egressArgs(rules)
	return err
}

// egressArgs maps an agent's egress allowlist onto smolvm's own: a name
// becomes --allow-host (resolved by smolvm at create and again at every
// start, and used for its DNS filter), an address or CIDR block becomes
// --allow-cidr. nil (no egress block) gives no flags at all, so the
// machine has no network; an empty list does too, since nothing is
// allowed.
//
// Rules are parsed with the gateway's grammar (egress.ParseRule), so a
// rule means the same text on every runtime; what smolvm cannot enforce
// is an error that names the rule, which the planner shows before
// anything is created:
//   - a port ("github.com:22") or a wildcard ("*.pythonhosted.org"):
//     smolvm allows destinations by name or address only, which its
//     Declaration says, so the generic capability check refuses them;
//   - an address block that reaches the host itself or link-local
//     metadata (127.0.0.0/8, 169.254.0.0/16, ...), which the gateway
//     never dials either.
//
// A rule without a port allows every port of that host on smolvm, where
// the docker gateway allows 80 and 443 only: smolvm cannot narrow it.
func egressArgs(allow []string) ([]string, error) {
	var args []string
	for i, s := range allow {
		flag, value, err := egressRule(s)
		if err != nil {
			return nil, &drivers.RuleError{Index: i, Rule: s, Err: err}
		}
		args = append(args, flag, value)
	}
	return args, nil
}

// neverAllowed are address blocks no rule may open on smolvm: the host's
// own loopback, link-local (cloud metadata), unspecified and multicast
// addresses.
var neverAllowed = []struct {
	prefix netip.Prefix
	what   string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), `"this network" addresses`},
	{netip.MustParsePrefix("127.0.0.0/8"), "the host's loopback addresses"},
	{netip.MustParsePrefix("169.254.0.0/16"), "link-local addresses (cloud metadata)"},
	{netip.MustParsePrefix("224.0.0.0/4"), "multicast addresses"},
	{netip.MustParsePrefix("::/128"), "the unspecified address"},
	{netip.MustParsePrefix("::1/128"), "the host's loopback address"},
	{netip.MustParsePrefix("fe80::/10"), "link-local addresses"},
	{netip.MustParsePrefix("ff00::/8"), "multicast addresses"},
}

func egressRule(s string) (flag, value string, err error) {
	r, err := egress.ParseRule(s)
	if err != nil {
		return "", "", err
	}
	if err := Declaration().Capabilities.Egress.CheckRule("smolvm", s); err != nil {
		return "", "", err // a wildcard or a port
	}
	switch {
	case r.Prefix.IsValid():
		p := r.Prefix.Masked()
		for _, n := range neverAllowed {
			if n.prefix.Overlaps(p) {
				return "", "", fmt.Errorf("%s includes %s, which an agent may never reach", p, n.what)
			}
		}
		return "--allow-cidr", p.String(), nil
	}
	return "--allow-host", r.Host, nil
}
