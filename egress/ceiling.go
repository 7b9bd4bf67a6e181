package egress

import (
	"net/netip"
	"strings"
)

// Covered reports whether every destination rule r can allow is allowed by
// some rule of ceiling: an egress ceiling (a runtime's egress_ceiling)
// admits an allow rule only when it is Covered.
//
// Each port of r (its one port, or 80 and 443 for a rule without one) is
// checked on its own, against the ceiling rules that allow that port:
//
//   - a name is covered by the same name, or by a wildcard above it
//     (*.anthropic.com covers api.anthropic.com and *.eu.anthropic.com);
//   - a wildcard is covered by a wildcard at or above its suffix only,
//     never by names, however many are listed;
//   - an address or CIDR is covered by CIDRs that contain it, together
//     (10.0.0.0/8 is covered by 10.0.0.0/9 and 10.128.0.0/9);
//   - names and addresses never cover each other, as they never match each
//     other's destinations (a name rule does not allow a CONNECT to an
//     address, nor an address rule one to a name).
func Covered(ceiling []Rule, r Rule) bool {
	for _, port := range r.ports() {
		var same []Rule // the ceiling rules of the same kind allowing port
		for _, c := range ceiling {
			if c.allowsPort(port) && c.Prefix.IsValid() == r.Prefix.IsValid() {
				same = append(same, c)
			}
		}
		var ok bool
		if r.Prefix.IsValid() {
			ok = prefixCovered(same, unmapPrefix(r.Prefix).Masked())
		} else {
			ok = nameCovered(same, r)
		}
		if !ok {
			return false
		}
	}
	return true
}

// Uncovered is the rules of allow that ceiling does not cover (Covered), in
// their order.
func Uncovered(ceiling, allow []Rule) []Rule {
	var out []Rule
	for _, r := range allow {
		if !Covered(ceiling, r) {
			out = append(out, r)
		}
	}
	return out
}

// nameCovered reports whether one of the name rules cs covers the name
// rule r's names.
func nameCovered(cs []Rule, r Rule) bool {
	for _, c := range cs {
		switch {
		case !c.Wildcard:
			if !r.Wildcard && r.Host == c.Host {
				return true
			}
		case strings.HasSuffix(r.Host, "."+c.Host):
			// *.anthropic.com covers api.anthropic.com and *.eu.anthropic.com.
			return true
		case r.Wildcard && r.Host == c.Host:
			return true
		}
	}
	return false
}

// prefixCovered reports whether the address rules cs cover every address
// of p, together. A prefix no single rule contains is split in two halves
// while some rule lies strictly inside it; each split is forced by a rule,
// so the recursion ends within the prefixes' lengths.
func prefixCovered(cs []Rule, p netip.Prefix) bool {
	inside := false
	for _, c := range cs {
		cp := unmapPrefix(c.Prefix).Masked()
		if cp.Addr().BitLen() != p.Addr().BitLen() {
			continue
		}
		if cp.Bits() <= p.Bits() && cp.Contains(p.Addr()) {
			return true
		}
		if cp.Bits() > p.Bits() && p.Contains(cp.Addr()) {
			inside = true
		}
	}
	if !inside || p.Bits() >= p.Addr().BitLen() {
		return false
	}
	lo, hi := halves(p)
	return prefixCovered(cs, lo) && prefixCovered(cs, hi)
}

// halves splits p into its two halves, one bit longer.
func halves(p netip.Prefix) (netip.Prefix, netip.Prefix) {
	bits := p.Bits() + 1
	lo := netip.PrefixFrom(p.Addr(), bits).Masked()
	b := lo.Addr().AsSlice()
	i := (bits - 1) / 8
	b[i] |= 0x80 >> ((bits - 1) % 8)
	a, _ := netip.AddrFromSlice(b)
	return lo, netip.PrefixFrom(a, bits)
}
