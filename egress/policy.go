package egress

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
)

// prefixClass names what an address in a prefix is, for refusal messages.
type prefixClass struct {
	prefix netip.Prefix
	what   string
}

// metadata are the cloud providers' instance endpoints: never dialed, even
// where an address rule would open the range they sit in. Checked first.
var metadata = []prefixClass{
	{netip.MustParsePrefix("169.254.169.254/32"), "the link-local cloud metadata address"},
	{netip.MustParsePrefix("169.254.170.2/32"), "the container metadata address (AWS ECS)"},
	{netip.MustParsePrefix("100.100.100.200/32"), "the cloud metadata address of Alibaba Cloud"},
	{netip.MustParsePrefix("168.63.129.16/32"), "the host endpoint of Azure (WireServer)"},
	{netip.MustParsePrefix("192.0.0.192/32"), "the cloud metadata address of Oracle Cloud"},
	{netip.MustParsePrefix("fd00:ec2::/32"), "an instance service address of AWS (metadata at fd00:ec2::254)"},
}

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

// privateRanges are dialed only when a rule names the address itself: the
// private ranges, and the special-purpose ranges that no public destination
// uses (documentation, benchmarking, protocol assignments, discard).
var privateRanges = []prefixClass{
	{netip.MustParsePrefix("10.0.0.0/8"), "a private address"},
	{netip.MustParsePrefix("172.16.0.0/12"), "a private address"},
	{netip.MustParsePrefix("192.168.0.0/16"), "a private address"},
	{netip.MustParsePrefix("100.64.0.0/10"), "a shared (carrier-grade NAT) address"},
	{netip.MustParsePrefix("fc00::/7"), "a unique local address"},
	{netip.MustParsePrefix("fec0::/10"), "a site-local address"},
	{netip.MustParsePrefix("192.0.0.0/24"), "an IETF protocol assignment address"},
	{netip.MustParsePrefix("192.0.2.0/24"), "a documentation address"},
	{netip.MustParsePrefix("198.51.100.0/24"), "a documentation address"},
	{netip.MustParsePrefix("203.0.113.0/24"), "a documentation address"},
	{netip.MustParsePrefix("198.18.0.0/15"), "a benchmarking address"},
	{netip.MustParsePrefix("192.88.99.0/24"), "a 6to4 relay address"},
	{netip.MustParsePrefix("2001:db8::/32"), "a documentation address"},
	{netip.MustParsePrefix("3fff::/20"), "a documentation address"},
	{netip.MustParsePrefix("100::/64"), "a discard-only address"},
	{netip.MustParsePrefix("2001::/23"), "an IETF protocol assignment address"},
	{netip.MustParsePrefix("64:ff9b:1::/48"), "a local-use NAT64 address"},
}

// embedded are the IPv6 forms that carry an IPv4 address a translator or
// tunnel delivers to: each is checked as that IPv4 address too. The IPv4
// forms 6to4, Teredo and IPv4-compatible are refused outright (above).
var embedded = []struct {
	prefix netip.Prefix
	what   string
	at     int // byte offset of the IPv4 address
}{
	{netip.MustParsePrefix("64:ff9b::/96"), "a NAT64", 12},
	{netip.MustParsePrefix("64:ff9b:1::/48"), "a local-use NAT64", 12},
	{netip.MustParsePrefix("::ffff:0:0:0/96"), "a SIIT (IPv4-translated)", 12},
}

// embeddedIPv4 returns the IPv4 addresses a may stand for, with the form's
// name: the translation forms above, and an ISATAP interface identifier
// (::5efe:a.b.c.d, ::200:5efe:a.b.c.d) under any prefix.
func embeddedIPv4(a netip.Addr) (netip.Addr, string, bool) {
	if !a.Is6() {
		return netip.Addr{}, "", false
	}
	b := a.As16()
	for _, e := range embedded {
		if e.prefix.Contains(a) {
			return netip.AddrFrom4([4]byte(b[e.at : e.at+4])), e.what, true
		}
	}
	if (b[8]|0x02) == 0x02 && b[9] == 0 && b[10] == 0x5e && b[11] == 0xfe {
		return netip.AddrFrom4([4]byte(b[12:16])), "an ISATAP", true
	}
	return netip.Addr{}, "", false
}

// checkAddr applies the address policy to a, the address the gateway would dial
// for port, under rules. It returns "" when a may be dialed, or what a is and
// why it may not, to follow "10.1.2.3 is " ("a private address, which ...").
func (g *Gateway) checkAddr(a netip.Addr, port int, rules []Rule) string {
	a = a.Unmap().WithZone("")
	for _, c := range metadata {
		if c.prefix.Contains(a) {
			return c.what + ", which the gateway never connects to"
		}
	}
	if v4, form, ok := embeddedIPv4(a); ok {
		if why := g.checkAddr(v4, port, rules); why != "" {
			return fmt.Sprintf("%s form of %s, which is %s", form, v4, why)
		}
		// The IPv4 address passed; the IPv6 address itself is checked below.
	}
	loopbackByRule := g.loopbackByRule && a.IsLoopback()
	for _, c := range alwaysForbidden {
		if c.prefix.Contains(a) && !loopbackByRule {
			return fmt.Sprintf("%s, which the gateway never connects to", c.what)
		}
	}
	forbidden := g.Forbidden
	if dyn := g.forbidden.Load(); dyn != nil {
		forbidden = append(slices.Clip(forbidden), *dyn...)
	}
	for _, p := range forbidden {
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
