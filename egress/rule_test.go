package egress

import (
	"encoding/json"
	"net/netip"
	"strings"
	"testing"
)

func TestParseRuleValid(t *testing.T) {
	pfx := netip.MustParsePrefix
	tests := []struct {
		in   string
		want Rule
		str  string // canonical form; "" means in
	}{
		{"github.com", Rule{Host: "github.com"}, ""},
		{"github.com:443", Rule{Host: "github.com", Port: 443}, ""},
		{"GitHub.COM.:443", Rule{Host: "github.com", Port: 443}, "github.com:443"},
		{"github.com.", Rule{Host: "github.com"}, "github.com"},
		{"api.anthropic.com:443", Rule{Host: "api.anthropic.com", Port: 443}, ""},
		{"localhost:8080", Rule{Host: "localhost", Port: 8080}, ""},
		{"outside-allowed", Rule{Host: "outside-allowed"}, ""},
		{"_acme.example.com:53", Rule{Host: "_acme.example.com", Port: 53}, ""},
		{"xn--bcher-kva.example:443", Rule{Host: "xn--bcher-kva.example", Port: 443}, ""},
		{"*.pythonhosted.org:443", Rule{Host: "pythonhosted.org", Wildcard: true, Port: 443}, ""},
		{"*.Example.com", Rule{Host: "example.com", Wildcard: true}, "*.example.com"},
		{"*.internal", Rule{Host: "internal", Wildcard: true}, ""},
		{"github.com:0443", Rule{Host: "github.com", Port: 443}, "github.com:443"},
		{"github.com:65535", Rule{Host: "github.com", Port: 65535}, ""},
		{"github.com:1", Rule{Host: "github.com", Port: 1}, ""},
		{"140.82.112.3", Rule{Prefix: pfx("140.82.112.3/32")}, ""},
		{"140.82.112.3:443", Rule{Prefix: pfx("140.82.112.3/32"), Port: 443}, ""},
		{"10.0.0.0/8", Rule{Prefix: pfx("10.0.0.0/8")}, ""},
		{"10.0.0.0/8:443", Rule{Prefix: pfx("10.0.0.0/8"), Port: 443}, ""},
		{"10.1.2.3/32:22", Rule{Prefix: pfx("10.1.2.3/32"), Port: 22}, "10.1.2.3:22"},
		{"::ffff:10.1.2.3", Rule{Prefix: pfx("10.1.2.3/32")}, "10.1.2.3"},
		{"2001:db8::1", Rule{Prefix: pfx("2001:db8::1/128")}, "[2001:db8::1]"},
		{"[2001:DB8::1]", Rule{Prefix: pfx("2001:db8::1/128")}, "[2001:db8::1]"},
		{"[2001:db8::1]:443", Rule{Prefix: pfx("2001:db8::1/128"), Port: 443}, ""},
		{"2001:db8::/32", Rule{Prefix: pfx("2001:db8::/32")}, "[2001:db8::/32]"},
		{"[2001:db8::/32]:443", Rule{Prefix: pfx("2001:db8::/32"), Port: 443}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseRule(tt.in)
			if err != nil {
				t.Fatalf("ParseRule(%q): %v", tt.in, err)
			}
			if got != tt.want {
				t.Fatalf("ParseRule(%q) = %#v, want %#v", tt.in, got, tt.want)
			}
			want := tt.str
			if want == "" {
				want = tt.in
			}
			if got.String() != want {
				t.Fatalf("String() = %q, want %q", got.String(), want)
			}
			again, err := ParseRule(got.String())
			if err != nil || again != got {
				t.Fatalf("ParseRule(String()) = %#v, %v; want %#v", again, err, got)
			}
		})
	}
}

func TestParseRuleInvalid(t *testing.T) {
	tests := []struct{ in, err string }{
		{"", "empty rule"},
		{"github.com :443", "contains whitespace"},
		{" github.com", "contains whitespace"},
		{"github.com\t", "contains whitespace"},
		{"git\x00hub.com", "control character"},
		{"github.com:0", "port 0 is out of range 1-65535"},
		{"github.com:65536", "port 65536 is out of range 1-65535"},
		{"github.com:99999999999999999999", "out of range 1-65535"},
		{"github.com:https", `port "https" is not a number`},
		{"github.com:-1", `port "-1" is not a number`},
		{"github.com:+443", `port "+443" is not a number`},
		{"github.com:", `missing port after ":"`},
		{"github.com:*", `port "*" is not supported`},
		{":443", "missing host"},
		{"*", `"*" alone would allow every host`},
		{"*:443", `"*" alone would allow every host`},
		{"*.", `"*" alone would allow every host`},
		{"*.:443", `"*" alone would allow every host`},
		{"*..", `missing domain after "*."`},
		{"api.*.com", "a wildcard is only allowed as the whole first label"},
		{"*example.com", "a wildcard is only allowed as the whole first label"},
		{"*.*.example.com", "a wildcard is only allowed as the whole first label"},
		{"github.*", "a wildcard is only allowed as the whole first label"},
		{"https://github.com", `has a URL scheme (https://); write host or host:port, e.g. "github.com:443"`},
		{"http://github.com:8080/x", `e.g. "github.com:8080"`},
		{"http://example.com", `e.g. "example.com:80"`},
		{"github.com/path", "has a path"},
		{"github.com:443/path", "has a path"},
		{"github.com/", "has a path"},
		{"user@github.com", "looks like a URL"},
		{"github.com?x=1", "looks like a URL"},
		{"github.com#frag", "looks like a URL"},
		{"git_hub!.com", `invalid character '!'`},
		{"-github.com", "starts or ends with '-'"},
		{"github..com", "has an empty label"},
		{".github.com", "has an empty label"},
		{"github.com..", "has an empty label"},
		{strings.Repeat("a", 64) + ".com", "longer than 63 characters"},
		{strings.Repeat("abcdefghi.", 26) + "com", "longer than 253 characters"},
		{"bücher.example", "not ASCII; write it in punycode"},
		{"1.2.3", "neither a valid IP address nor a host name"},
		{"999.1.1.1:443", "neither a valid IP address nor a host name"},
		{"010.0.0.1", "neither a valid IP address nor a host name"},
		{"10.0.0.0/33", `invalid CIDR "10.0.0.0/33"`},
		{"10.0.0.0/x:443", `invalid CIDR "10.0.0.0/x"`},
		{"10.1.2.3/8", "did you mean 10.0.0.0/8?"},
		{"::ffff:10.0.0.0/104", "in dotted form"},
		{"fe80::1%eth0", "zone"},
		{"2001:db8::1:443:x", "is not a valid IPv6 address"},
		{"[2001:db8::1", `missing "]"`},
		{"[2001:db8::1]x", `unexpected "x" after the IPv6 address`},
		{"[2001:db8::1]/path", "has a path"},
		{"github.com]", "misplaced brackets"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			r, err := ParseRule(tt.in)
			if err == nil {
				t.Fatalf("ParseRule(%q) = %v, want an error containing %q", tt.in, r, tt.err)
			}
			if !strings.Contains(err.Error(), tt.err) {
				t.Fatalf("ParseRule(%q) error = %q, want it to contain %q", tt.in, err, tt.err)
			}
			if !strings.HasPrefix(err.Error(), "invalid egress rule ") {
				t.Fatalf("error %q does not say which rule", err)
			}
		})
	}
}

func TestParseRules(t *testing.T) {
	rules, err := ParseRules([]string{"github.com:443", "GITHUB.com:443", "*.pythonhosted.org:443", "github.com"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rules {
		got = append(got, r.String())
	}
	if want := "github.com:443 *.pythonhosted.org:443 github.com"; strings.Join(got, " ") != want {
		t.Fatalf("rules = %q, want %q (order kept, duplicate dropped)", got, want)
	}

	_, err = ParseRules([]string{"ok.com", "https://a.com", "b.com:0"})
	if err == nil {
		t.Fatal("no error for two invalid rules")
	}
	for _, want := range []string{`"https://a.com"`, `"b.com:0"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}

	if rules, err := ParseRules(nil); err != nil || len(rules) != 0 {
		t.Fatalf("ParseRules(nil) = %v, %v", rules, err)
	}
}

func TestRuleJSON(t *testing.T) {
	var rules []Rule
	if err := json.Unmarshal([]byte(`["GitHub.com:443","10.0.0.0/8"]`), &rules); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(rules)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != `["github.com:443","10.0.0.0/8"]` {
		t.Fatalf("JSON = %s", b)
	}
	if err := json.Unmarshal([]byte(`["*"]`), &rules); err == nil {
		t.Fatal("no error for *")
	}
	if _, err := json.Marshal(Rule{}); err == nil {
		t.Fatal("the zero Rule marshaled")
	}
}

func mustRules(t testing.TB, ss ...string) []Rule {
	t.Helper()
	rules, err := ParseRules(ss)
	if err != nil {
		t.Fatal(err)
	}
	return rules
}

func TestMatch(t *testing.T) {
	rules := mustRules(t,
		"github.com",
		"ssh.github.com:22",
		"*.pythonhosted.org:443",
		"*.example.net",
		"api.anthropic.com:443",
		"10.0.0.0/8:443",
		"192.168.1.10",
		"[2001:db8::/32]:443",
	)
	tests := []struct {
		host string
		port int
		rule string // "" for no match
	}{
		{"github.com", 443, "github.com"},
		{"github.com", 80, "github.com"},
		{"github.com", 22, ""},
		{"github.com", 8080, ""},
		{"GITHUB.COM.", 443, "github.com"},
		{"api.github.com", 443, ""},
		{"evilgithub.com", 443, ""},
		{"github.com.evil.com", 443, ""},
		{"ssh.github.com", 22, "ssh.github.com:22"},
		{"ssh.github.com", 443, ""},
		{"files.pythonhosted.org", 443, "*.pythonhosted.org:443"},
		{"a.b.pythonhosted.org", 443, "*.pythonhosted.org:443"},
		{"Files.PythonHosted.org.", 443, "*.pythonhosted.org:443"},
		{"pythonhosted.org", 443, ""},
		{"files.pythonhosted.org", 80, ""},
		{"xpythonhosted.org", 443, ""},
		{"www.example.net", 80, "*.example.net"},
		{"www.example.net", 443, "*.example.net"},
		{"www.example.net", 22, ""},
		{"api.anthropic.com", 443, "api.anthropic.com:443"},
		{"api.anthropic.com", 80, ""},
		{"10.1.2.3", 443, "10.0.0.0/8:443"},
		{"10.1.2.3", 80, ""},
		{"11.1.2.3", 443, ""},
		{"::ffff:10.1.2.3", 443, "10.0.0.0/8:443"},
		{"192.168.1.10", 80, "192.168.1.10"},
		{"192.168.1.11", 80, ""},
		{"2001:db8::5", 443, "[2001:db8::/32]:443"},
		{"[2001:db8::5]", 443, "[2001:db8::/32]:443"},
		{"2001:db9::5", 443, ""},
		{"github.com", 0, ""},
		{"github.com", 65536, ""},
		{"", 443, ""},
	}
	for _, tt := range tests {
		r, ok := Match(rules, tt.host, tt.port)
		got := ""
		if ok {
			got = r.String()
		}
		if got != tt.rule {
			t.Errorf("Match(%q, %d) = %q, want %q", tt.host, tt.port, got, tt.rule)
		}
	}
	// A name rule never matches an address, and the other way round.
	if _, ok := Match(mustRules(t, "140.82.112.3:443"), "github.com", 443); ok {
		t.Error("an address rule matched a name")
	}
	if _, ok := Match(mustRules(t, "github.com:443"), "140.82.112.3", 443); ok {
		t.Error("a name rule matched an address")
	}
	if _, ok := Match([]Rule{{}}, "", 80); ok {
		t.Error("the zero Rule matched")
	}
	// The first matching rule wins.
	if r, _ := Match(mustRules(t, "*.github.com:443", "api.github.com:443"), "api.github.com", 443); r.String() != "*.github.com:443" {
		t.Errorf("first match = %s", r)
	}
}

func FuzzParseRule(f *testing.F) {
	for _, s := range []string{
		"github.com", "github.com:443", "*.pythonhosted.org:443", "10.0.0.0/8:443", "[2001:db8::1]:443",
		"2001:db8::/32", "https://github.com/x", "*", "a.*.b", "github.com:99999", "::ffff:1.2.3.4", "[::1]:0",
		"1.2.3.4/32", "GitHub.COM.", "xn--bcher-kva.example", "]:[", "[]", "*.:1",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRule(s)
		if err != nil {
			if r != (Rule{}) {
				t.Fatalf("ParseRule(%q) returned %#v with error %v", s, r, err)
			}
			return
		}
		canon := r.String()
		again, err := ParseRule(canon)
		if err != nil {
			t.Fatalf("ParseRule(%q) = %q, which does not parse: %v", s, canon, err)
		}
		if again != r || again.String() != canon {
			t.Fatalf("ParseRule(%q) = %#v (%q), reparsed %#v (%q)", s, r, canon, again, again.String())
		}
		if r.Port < 0 || r.Port > 65535 || (r.Host == "") == !r.Prefix.IsValid() {
			t.Fatalf("ParseRule(%q) = %#v: inconsistent", s, r)
		}
		Match([]Rule{r}, s, 443)
	})
}
