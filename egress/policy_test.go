package egress

import (
	"net/http"
	"net/netip"
	"os"
	"strconv"
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

// TestAddressFixtures checks the address policy against
// testdata/addresses.txt: the IPv6 forms that embed an IPv4 address, the
// metadata endpoints and the special ranges (issue 17).
func TestAddressFixtures(t *testing.T) {
	data, err := os.ReadFile("testdata/addresses.txt")
	if err != nil {
		t.Fatal(err)
	}
	rules := mustRules(t, "10.1.2.3:443", "192.0.2.0/24:443", "[64:ff9b:1::/48]:443")
	g := &Gateway{}
	n := 0
	for i, line := range strings.Split(string(data), "\n") {
		if line = strings.TrimSpace(line); line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		addr, port, want := f[0], f[1], strings.Join(f[2:], " ")
		p, err := strconv.Atoi(port)
		if err != nil {
			t.Fatalf("line %d: port %q", i+1, port)
		}
		n++
		got := g.checkAddr(netip.MustParseAddr(addr), p, rules)
		switch {
		case want == "allowed" && got != "":
			t.Errorf("line %d: %s:%d refused: %q", i+1, addr, p, got)
		case want != "allowed" && !strings.Contains(got, want):
			t.Errorf("line %d: %s:%d = %q, want %q", i+1, addr, p, got, want)
		}
	}
	if n < 40 {
		t.Fatalf("only %d fixtures read", n)
	}
}

func TestEmbeddedAddressResolvedIsRefused(t *testing.T) {
	// An allowed name that resolves to an embedding form of loopback is
	// refused, and nothing is dialed.
	tg := startGateway(t, &Gateway{Agent: "agent.coder"}, newResolver("a.test", "64:ff9b:1::7f00:1", "b.test", "::ffff:0:a9fe:a9fe"), "a.test:443", "b.test:80")
	for _, target := range []string{"a.test:443", "b.test:80"} {
		_, _, resp, body := tg.connect(t, target)
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "form of") {
			t.Errorf("CONNECT %s: %s %q", target, resp.Status, body)
		}
		tg.log.decision(t)
	}
	if d := tg.dialer.Dials(); len(d) != 0 {
		t.Errorf("dialed %v", d)
	}
}
