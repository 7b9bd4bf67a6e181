package egress

import (
	"fmt"
	"net/netip"
	"strconv"
)

// prefixClass names what an address in a prefix is, for refusal messages.
type prefixClass struct {
	prefix netip.Prefix
	what   string
}

var metadataAddr = netip.MustParseAddr("169.254.169.254")

// alwaysForbidden are never dialed, whatever the rules say. Order matters: the
// first prefix that contains an address names it.
var alwaysForbidden = []prefixClass{
	{netip.MustParsePrefix("0.0.0.0/8"), `a "this network" address`},
	{netip.MustParsePrefix("127.0.0.0/8"), "a loopback address"},
	{netip.MustParsePrefix("169.254.0.0/16"), "a link-local address"},
	{netip.MustParsePrefix("224.0.0.0/4"), "a multicast address"},
	{netip.MustParsePrefix("240.0.0.0/4"), "a reserved address"},
	{netip.MustParsePrefix("::/128"), "the unspecified address"},
	{netip.MustParsePrefix("::1/128"), "a loopback address"},
	{netip.MustParsePrefix("::/96"), "an IPv4-compatible IPv6 address"},
	{netip.MustParsePrefix("fe80::/10"), "a link-local address"},
	{netip.MustParsePrefix("ff00::/8"), "a multicast address"},
	{netip.MustParsePrefix("2002::/16"), "a 6to4 address (it embeds an IPv4 address)"},
	{netip.MustParsePrefix("2001::/32"), "a Teredo address (it embeds an IPv4 address)"},
}

// privateRanges are dialed only when a rule names the address itself.
var privateRanges = []prefixClass{
	{netip.MustParsePrefix("10.0.0.0/8"), "a private address"},
	{netip.MustParsePrefix("172.16.0.0/12"), "a private address"},
	{netip.MustParsePrefix("192.168.0.0/16"), "a private address"},
	{netip.MustParsePrefix("100.64.0.0/10"), "a shared (carrier-grade NAT) address"},
	{netip.MustParsePrefix("fc00::/7"), "a unique local address"},
	{netip.MustParsePrefix("fec0::/10"), "a site-local address"},
}

var nat64 = netip.MustParsePrefix("64:ff9b::/96")

// checkAddr applies the address policy to a, the address the gateway would dial
// for port, under rules. It returns "" when a may be dialed, or what a is and
// why it may not, to follow "10.1.2.3 is " ("a private address, which ...").
func (g *Gateway) checkAddr(a netip.Addr, port int, rules []Rule) string {
	a = a.Unmap().WithZone("")
	if nat64.Contains(a) {
		b := a.As16()
		v4 := netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]})
		if why := g.checkAddr(v4, port, rules); why != "" {
			return fmt.Sprintf("a NAT64 form of %s, which is %s", v4, why)
		}
		return ""
	}
	loopbackByRule := g.loopbackByRule && a.IsLoopback()
	for _, c := range alwaysForbidden {
		if c.prefix.Contains(a) && !loopbackByRule {
			what := c.what
			if a == metadataAddr {
				what = "the link-local cloud metadata address"
			}
			return fmt.Sprintf("%s, which the gateway never connects to", what)
		}
	}
	for _, p := range g.Forbidden {
		if p = unmapPrefix(p); p.Contains(a) {
			return fmt.Sprintf("a forbidden address (in %s), which the gateway never connects to", p)
		}
	}
	private := privateRanges
	if loopbackByRule {
		// Tests only: loopback is where their servers listen. In a bottle,
		// loopback is the gateway itself, never a destination.
		private = []prefixClass{{netip.PrefixFrom(a, a.BitLen()), "a loopback address"}}
	}
	for _, c := range private {
		if !c.prefix.Contains(a) {
			continue
		}
		if namedByRule(rules, a, port) {
			return ""
		}
		return fmt.Sprintf("%s, which only a rule naming the address (such as %s) allows",
			c.what, Rule{Prefix: netip.PrefixFrom(a, a.BitLen()), Port: port})
	}
	return ""
}

// namedByRule reports whether an address rule contains a and allows port.
func namedByRule(rules []Rule, a netip.Addr, port int) bool {
	for _, r := range rules {
		if r.Prefix.IsValid() && r.Prefix.Contains(a) && r.allowsPort(port) {
			return true
		}
	}
	return false
}

// unmapPrefix turns an IPv4-mapped IPv6 prefix into the IPv4 prefix.
func unmapPrefix(p netip.Prefix) netip.Prefix {
	if p.Addr().Is4In6() && p.Bits() >= 96 {
		return netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
	}
	return p
}

// ParsePrefixOrAddr parses a CIDR ("172.17.0.0/16") or a single address
// ("172.17.0.1", a full-length prefix), as the -forbid flag takes them.
func ParsePrefixOrAddr(s string) (netip.Prefix, error) {
	if a, err := netip.ParseAddr(s); err == nil {
		if a.Zone() != "" {
			return netip.Prefix{}, fmt.Errorf("%q: an IPv6 zone is not allowed", s)
		}
		a = a.Unmap()
		return netip.PrefixFrom(a, a.BitLen()), nil
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%q is neither an IP address nor a CIDR", s)
	}
	return unmapPrefix(p).Masked(), nil
}

func portsString(ports []int) string {
	s := ""
	for i, p := range ports {
		if i > 0 {
			s += ", "
		}
		s += strconv.Itoa(p)
	}
	return s
}
