package egress

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode"
)

// Rule is one entry of an egress allowlist. Make one with [ParseRule]; the zero
// Rule matches nothing. Rules are comparable, so they can be map keys.
type Rule struct {
	// Host is the lower-case name without a trailing dot; for a wildcard rule,
	// the suffix after "*.". Empty for an address rule.
	Host string
	// Wildcard makes Host a suffix: the rule matches the names strictly below
	// it, not Host itself.
	Wildcard bool
	// Prefix is the address (a full-length prefix) or CIDR of an address rule;
	// the zero Prefix for a name rule.
	Prefix netip.Prefix
	// Port is the one port the rule allows, or 0 for the default ports 80 and 443.
	Port int
}

// defaultPorts are the ports of a rule written without one.
var defaultPorts = []int{80, 443}

// ParseRule parses one allowlist entry: host, host:port, *.suffix, *.suffix:port,
// an IP address, addr:port ([v6addr]:port), a CIDR or cidr:port. The error says
// what is wrong and how to write it instead.
func ParseRule(s string) (Rule, error) {
	r, err := parseRule(s)
	if err != nil {
		return Rule{}, fmt.Errorf("invalid egress rule %q: %w", s, err)
	}
	return r, nil
}

// ParseRules parses an allowlist. It keeps the order and drops repeated rules
// (by canonical form); the error reports every invalid entry.
func ParseRules(ss []string) ([]Rule, error) {
	rules := make([]Rule, 0, len(ss))
	seen := make(map[Rule]bool, len(ss))
	var errs []error
	for _, s := range ss {
		r, err := ParseRule(s)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !seen[r] {
			seen[r] = true
			rules = append(rules, r)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return rules, nil
}

// String is the canonical form of the rule, which [ParseRule] parses back to the
// same rule: "github.com", "github.com:443", "*.pythonhosted.org:443",
// "10.0.0.5:443", "10.0.0.0/8", "[2001:db8::/32]:443".
func (r Rule) String() string {
	var host string
	switch {
	case r.Prefix.IsValid():
		if r.Prefix.IsSingleIP() {
			host = r.Prefix.Addr().String()
		} else {
			host = r.Prefix.String()
		}
		if r.Prefix.Addr().Is6() {
			host = "[" + host + "]"
		}
	case r.Wildcard:
		host = "*." + r.Host
	default:
		host = r.Host
	}
	if r.Port == 0 {
		return host
	}
	return host + ":" + strconv.Itoa(r.Port)
}

// MarshalText returns the canonical form, so that a Rule is a JSON string.
func (r Rule) MarshalText() ([]byte, error) {
	if r == (Rule{}) {
		return nil, errors.New("egress: cannot marshal the zero Rule")
	}
	return []byte(r.String()), nil
}

// UnmarshalText parses a rule with [ParseRule].
func (r *Rule) UnmarshalText(b []byte) error {
	parsed, err := ParseRule(string(b))
	if err != nil {
		return err
	}
	*r = parsed
	return nil
}

// Match returns the first rule that allows host (a name, or an IP address with or
// without brackets) on port. Names are compared case-insensitively, without a
// trailing dot. Match only looks at the rules; the gateway also applies the
// address policy to what the name resolves to.
func Match(rules []Rule, host string, port int) (Rule, bool) {
	if port < 1 || port > 65535 {
		return Rule{}, false
	}
	return matchKey(rules, normalizeHost(host), port)
}

// hostKey is a destination host as rules see it: a lower-case name, or an address.
type hostKey struct {
	name string
	addr netip.Addr
}

func normalizeHost(host string) hostKey {
	if strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]") {
		host = host[1 : len(host)-1]
	}
	if a, err := netip.ParseAddr(host); err == nil && a.Zone() == "" {
		return hostKey{addr: a.Unmap()}
	}
	return hostKey{name: strings.TrimSuffix(asciiLower(host), ".")}
}

func (r Rule) matchesHost(t hostKey) bool {
	switch {
	case r.Prefix.IsValid():
		return t.addr.IsValid() && r.Prefix.Contains(t.addr)
	case r.Host == "" || t.addr.IsValid():
		return false
	case r.Wildcard:
		return strings.HasSuffix(t.name, "."+r.Host)
	default:
		return t.name == r.Host
	}
}

func (r Rule) allowsPort(port int) bool {
	if r.Port == 0 {
		return slices.Contains(defaultPorts, port)
	}
	return port == r.Port
}

// ports is the list of ports the rule allows.
func (r Rule) ports() []int {
	if r.Port == 0 {
		return defaultPorts
	}
	return []int{r.Port}
}

func parseRule(s string) (Rule, error) {
	if s == "" {
		return Rule{}, errors.New("empty rule")
	}
	for _, c := range s {
		if unicode.IsSpace(c) || unicode.IsControl(c) {
			return Rule{}, errors.New("contains whitespace or a control character")
		}
	}
	if i := strings.Index(s, "://"); i >= 0 {
		return Rule{}, fmt.Errorf("has a URL scheme (%s://); write host or host:port%s", s[:i], suggestion(s))
	}
	if strings.ContainsAny(s, "@?#\\") {
		return Rule{}, fmt.Errorf("looks like a URL (it has one of @ ? # \\); write host or host:port%s", suggestion(s))
	}
	host, port, hasPort, err := splitRule(s)
	if err != nil {
		return Rule{}, err
	}
	var r Rule
	if hasPort {
		if r.Port, err = parsePort(port); err != nil {
			return Rule{}, err
		}
	}
	if host == "" {
		return Rule{}, errors.New("missing host")
	}
	if strings.Contains(host, "/") {
		r.Prefix, err = parseCIDR(host)
		return r, err
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if a.Zone() != "" {
			return Rule{}, errors.New("an IPv6 zone (%...) is not allowed")
		}
		a = a.Unmap()
		r.Prefix = netip.PrefixFrom(a, a.BitLen())
		return r, nil
	}
	if strings.Contains(host, ":") {
		return Rule{}, fmt.Errorf("%q is not a valid IPv6 address (an IPv6 address with a port is written [addr]:port)", host)
	}
	for i := 0; i < len(host); i++ {
		if host[i] >= 0x80 {
			return Rule{}, errors.New("the name is not ASCII; write it in punycode (xn--...)")
		}
	}
	name := strings.TrimSuffix(asciiLower(host), ".")
	if name == "*" {
		return Rule{}, errors.New(`"*" alone would allow every host; list the hosts the agent needs`)
	}
	if rest, ok := strings.CutPrefix(name, "*."); ok {
		r.Wildcard = true
		name = rest
		if name == "" {
			return Rule{}, errors.New(`missing domain after "*."`)
		}
	}
	if strings.Contains(name, "*") {
		return Rule{}, errors.New(`a wildcard is only allowed as the whole first label, as in "*.example.com"`)
	}
	if err := checkName(name); err != nil {
		return Rule{}, err
	}
	r.Host = name
	return r, nil
}

// splitRule splits s into host and port. hasPort reports whether there was a
// ":" for a port, even an empty one.
func splitRule(s string) (host, port string, hasPort bool, err error) {
	if strings.HasPrefix(s, "[") {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return "", "", false, errors.New(`missing "]" after an IPv6 address`)
		}
		host, rest := s[1:end], s[end+1:]
		if strings.ContainsAny(host, "[]") {
			return "", "", false, errors.New("misplaced brackets")
		}
		switch {
		case rest == "":
			return host, "", false, nil
		case rest[0] == ':':
			return host, rest[1:], true, checkNoPath(rest[1:])
		case rest[0] == '/':
			return "", "", false, errors.New(`has a path; rules name a host and port, not a URL (a CIDR is written [2001:db8::/32]:443)`)
		default:
			return "", "", false, fmt.Errorf("unexpected %q after the IPv6 address", rest)
		}
	}
	if strings.ContainsAny(s, "[]") {
		return "", "", false, errors.New("misplaced brackets")
	}
	if strings.Count(s, ":") > 1 {
		return s, "", false, nil // IPv6 without brackets, so without a port
	}
	if i := strings.LastIndexByte(s, ':'); i >= 0 {
		return s[:i], s[i+1:], true, checkNoPath(s[i+1:])
	}
	return s, "", false, nil
}

func checkNoPath(port string) error {
	if strings.Contains(port, "/") {
		return errors.New("has a path; rules name a host and port, not a URL")
	}
	return nil
}

func parsePort(p string) (int, error) {
	if p == "" {
		return 0, errors.New(`missing port after ":"`)
	}
	if p == "*" {
		return 0, errors.New(`port "*" is not supported: omit the port for 80 and 443, or write one rule per port`)
	}
	for i := 0; i < len(p); i++ {
		if p[i] < '0' || p[i] > '9' {
			return 0, fmt.Errorf("port %q is not a number", p)
		}
	}
	n, err := strconv.Atoi(p)
	if err != nil || n < 1 || n > 65535 {
		return 0, fmt.Errorf("port %s is out of range 1-65535", p)
	}
	return n, nil
}

func parseCIDR(host string) (netip.Prefix, error) {
	slash := strings.IndexByte(host, '/')
	if _, err := netip.ParseAddr(host[:slash]); err != nil {
		return netip.Prefix{}, errors.New("has a path; rules name a host and port, not a URL")
	}
	p, err := netip.ParsePrefix(host)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("invalid CIDR %q: the prefix length must be a number from 0 to the address length", host)
	}
	if p.Addr().Is4In6() {
		return netip.Prefix{}, fmt.Errorf("write the IPv4 CIDR %q in dotted form", host)
	}
	if p != p.Masked() {
		return netip.Prefix{}, fmt.Errorf("CIDR %s has bits set after the prefix length; did you mean %s?", host, p.Masked())
	}
	return p, nil
}

// checkName validates a lower-case DNS name without a trailing dot.
func checkName(name string) error {
	if name == "" {
		return errors.New("missing host")
	}
	if len(name) > 253 {
		return errors.New("the name is longer than 253 characters")
	}
	labels := strings.Split(name, ".")
	for _, l := range labels {
		if l == "" {
			return fmt.Errorf("%q has an empty label", name)
		}
		if len(l) > 63 {
			return fmt.Errorf("label %q is longer than 63 characters", l)
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return fmt.Errorf("invalid character %q in name %q", c, name)
			}
		}
		if l[0] == '-' || l[len(l)-1] == '-' {
			return fmt.Errorf("label %q starts or ends with '-'", l)
		}
	}
	last := labels[len(labels)-1]
	if strings.Trim(last, "0123456789") == "" {
		return fmt.Errorf("%q is neither a valid IP address nor a host name", name)
	}
	return nil
}

// suggestion turns a URL-like rule into ` (e.g. "github.com:443")`, or "".
func suggestion(s string) string {
	if !strings.Contains(s, "://") {
		s = "//" + s
	}
	u, err := url.Parse(s)
	if err != nil || u.Hostname() == "" {
		return ""
	}
	port := u.Port()
	if port == "" {
		switch strings.ToLower(u.Scheme) {
		case "https", "wss":
			port = "443"
		case "http", "ws":
			port = "80"
		}
	}
	host := u.Hostname()
	if port == "" {
		if strings.Contains(host, ":") {
			host = "[" + host + "]"
		}
		return fmt.Sprintf(", e.g. %q", host)
	}
	return fmt.Sprintf(", e.g. %q", net.JoinHostPort(host, port))
}

func asciiLower(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 'A' && c <= 'Z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if b[j] >= 'A' && b[j] <= 'Z' {
					b[j] += 'a' - 'A'
				}
			}
			return string(b)
		}
	}
	return s
}

// hostPrefix is the full-length prefix of a, as an address rule holds it;
// the zero Prefix when a is not valid (a name).
func hostPrefix(a netip.Addr) netip.Prefix {
	if !a.IsValid() {
		return netip.Prefix{}
	}
	return netip.PrefixFrom(a, a.BitLen())
}
