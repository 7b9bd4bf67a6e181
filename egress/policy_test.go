package egress

import (
	"net/netip"
	"strings"
	"testing"
)

func TestCheckAddr(t *testing.T) {
	rules := mustRules(t, "10.1.2.3:443", "192.168.0.0/16", "127.0.0.1:8080", "169.254.169.254:80", "172.17.0.1:443", "[fd00::1]:443")
	prod := &Gateway{Forbidden: []netip.Prefix{netip.MustParsePrefix("172.17.0.0/16"), netip.MustParsePrefix("::ffff:172.18.0.0/112")}}
	test := &Gateway{loopbackByRule: true}
	tests := []struct {
		g    *Gateway
		addr string
		port int
		want string // "" allowed, else a substring of the reason
	}{
		{prod, "140.82.112.3", 443, ""},
		{prod, "2606:4700::1", 443, ""},
		{prod, "169.254.169.254", 80, "the link-local cloud metadata address, which the gateway never connects to"},
		{prod, "::ffff:169.254.169.254", 80, "cloud metadata"},
		{prod, "64:ff9b::a9fe:a9fe", 80, "a NAT64 form of 169.254.169.254, which is the link-local cloud metadata address"},
		{prod, "64:ff9b::8c52:7003", 443, ""}, // 140.82.112.3
		{prod, "169.254.1.1", 443, "a link-local address"},
		{prod, "fe80::1", 443, "a link-local address"},
		{prod, "127.0.0.1", 8080, "a loopback address, which the gateway never connects to"},
		{prod, "127.0.0.2", 443, "a loopback address"},
		{prod, "::1", 443, "a loopback address"},
		{prod, "0.0.0.0", 443, `a "this network" address`},
		{prod, "::", 443, "the unspecified address"},
		{prod, "224.0.0.1", 443, "a multicast address"},
		{prod, "ff02::1", 443, "a multicast address"},
		{prod, "255.255.255.255", 443, "a reserved address"},
		{prod, "::1.2.3.4", 443, "IPv4-compatible"},
		{prod, "2002:7f00:1::", 443, "6to4"},
		{prod, "172.17.0.1", 443, "a forbidden address (in 172.17.0.0/16)"}, // the rule does not override -forbid
		{prod, "172.18.0.5", 443, "a forbidden address (in 172.18.0.0/16)"},
		{prod, "10.1.2.3", 443, ""},
		{prod, "10.1.2.3", 80, "a private address, which only a rule naming the address (such as 10.1.2.3:80) allows"},
		{prod, "10.1.2.4", 443, "a private address"},
		{prod, "192.168.7.7", 80, ""},
		{prod, "192.168.7.7", 22, "a private address"},
		{prod, "172.20.0.1", 443, "a private address"},
		{prod, "100.64.0.1", 443, "carrier-grade NAT"},
		{prod, "fd00::1", 443, ""},
		{prod, "fd00::2", 443, "a unique local address, which only a rule naming the address (such as [fd00::2]:443) allows"},
		{test, "127.0.0.1", 8080, ""},
		{test, "127.0.0.1", 8081, "a loopback address, which only a rule naming the address (such as 127.0.0.1:8081) allows"},
		{test, "::1", 8080, "a loopback address, which only"},
		{test, "169.254.169.254", 80, "cloud metadata"},
	}
	for _, tt := range tests {
		got := tt.g.checkAddr(netip.MustParseAddr(tt.addr), tt.port, rules)
		if tt.want == "" && got != "" {
			t.Errorf("checkAddr(%s, %d) = %q, want allowed", tt.addr, tt.port, got)
		} else if tt.want != "" && !strings.Contains(got, tt.want) {
			t.Errorf("checkAddr(%s, %d) = %q, want %q", tt.addr, tt.port, got, tt.want)
		}
	}
}

func TestParsePrefixOrAddr(t *testing.T) {
	for in, want := range map[string]string{
		"172.17.0.1":          "172.17.0.1/32",
		"172.17.0.0/16":       "172.17.0.0/16",
		"172.17.5.5/16":       "172.17.0.0/16",
		"::ffff:172.17.0.1":   "172.17.0.1/32",
		"fd00::/8":            "fd00::/8",
		"::ffff:10.0.0.0/104": "10.0.0.0/8",
	} {
		p, err := ParsePrefixOrAddr(in)
		if err != nil || p.String() != want {
			t.Errorf("ParsePrefixOrAddr(%q) = %v, %v; want %s", in, p, err, want)
		}
	}
	for _, in := range []string{"", "host", "10.0.0.0/33", "fe80::1%eth0"} {
		if p, err := ParsePrefixOrAddr(in); err == nil {
			t.Errorf("ParsePrefixOrAddr(%q) = %v, want an error", in, p)
		}
	}
}
