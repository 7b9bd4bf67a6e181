package smolvm

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/zclconf/go-cty/cty"

	"github.com/bottlefile/bottlefile/drivers"
)

func TestEgressArgs(t *testing.T) {
	t.Parallel()
	for _, none := range [][]string{nil, {}} {
		if args, err := egressArgs(none); err != nil || args != nil {
			t.Errorf("egressArgs(%#v) = %q, %v; want no flags (no network)", none, args, err)
		}
	}
	args, err := egressArgs([]string{"api.anthropic.com", "GitHub.com.", "10.0.0.0/8", "192.0.2.7", "2001:db8::/32"})
	want := []string{
		"--allow-host", "api.anthropic.com",
		"--allow-host", "github.com",
		"--allow-cidr", "10.0.0.0/8",
		"--allow-cidr", "192.0.2.7/32",
		"--allow-cidr", "2001:db8::/32",
	}
	if err != nil || !slices.Equal(args, want) {
		t.Errorf("egressArgs = %q, %v\nwant %q", args, err, want)
	}

	for _, tc := range []struct {
		rules []string
		index int
		want  string
	}{
		{[]string{"github.com", "*.pythonhosted.org"}, 1, "wildcard"},
		{[]string{"*.pythonhosted.org:443"}, 0, "wildcard"},
		{[]string{"api.anthropic.com:443"}, 0, `per-port rules: it allows every port of a destination or none; write "api.anthropic.com"`},
		{[]string{"192.0.2.7:22"}, 0, `write "192.0.2.7"`},
		{[]string{"[2001:db8::1]:443"}, 0, "per-port rules"},
		{[]string{"a.com", "b.com", "https://c.com/x"}, 2, "URL scheme"},
		{[]string{"127.0.0.1"}, 0, "loopback"},
		{[]string{"0.0.0.0/0"}, 0, "may never reach"},
		{[]string{"169.254.169.254"}, 0, "cloud metadata"},
		{[]string{"::1"}, 0, "loopback"},
		{[]string{""}, 0, "empty"},
	} {
		_, err := egressArgs(tc.rules)
		var re *drivers.RuleError
		if !errors.As(err, &re) || re.Index != tc.index || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.rules[tc.index]) {
			t.Errorf("egressArgs(%q): %v; want a rule error at %d containing %q", tc.rules, err, tc.index, tc.want)
		}
	}
}

func TestCheckEgress(t *testing.T) {
	t.Parallel()
	for _, ok := range []cty.Value{cty.NilVal, cty.NullVal(cty.List(cty.String)), cty.ListValEmpty(cty.String),
		cty.ListVal([]cty.Value{cty.StringVal("github.com"), cty.UnknownVal(cty.String)}),
		cty.ListVal([]cty.Value{cty.StringVal("github.com")}).Mark(sensitive)} {
		if err := checkEgress(ok); err != nil {
			t.Errorf("checkEgress(%#v): %v", ok, err)
		}
	}
	err := checkEgress(cty.ListVal([]cty.Value{cty.StringVal("github.com"), cty.StringVal("github.com:22")}))
	var re *drivers.RuleError
	if !errors.As(err, &re) || re.Index != 1 {
		t.Errorf("checkEgress of a port rule: %v", err)
	}
}

// TestCreateWithEgress checks the create flags of an allowlist, carried in
// the "egress" attribute, and that an empty one still means no network.
func TestCreateWithEgress(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	d := f.driver(t)
	for _, tc := range []struct {
		egress  cty.Value
		flags   []string
		network bool
	}{
		{cty.NullVal(cty.List(cty.String)), nil, false},
		{cty.ListValEmpty(cty.String), nil, false},
		{cty.ListVal([]cty.Value{cty.StringVal("api.anthropic.com"), cty.StringVal("10.9.0.0/16")}),
			[]string{"--allow-host", "api.anthropic.com", "--allow-cidr", "10.9.0.0/16"}, true},
	} {
		obj := planOne(t, d, agentSpec("coder", "alpine:3"))
		obj.Attrs["egress"] = tc.egress
		f.resetCalls(t)
		resp := create(t, d, newLineage(), obj)
		args := f.calls(t)[1]
		dash := slices.Index(args, "--")
		var got []string
		for i, a := range args[:dash] {
			if a == "--allow-host" || a == "--allow-cidr" || a == "--net" {
				got = append(got, a, args[i+1])
			}
		}
		if !slices.Equal(got, tc.flags) {
			t.Errorf("egress %#v: network flags %q, want %q", tc.egress, got, tc.flags)
		}
		for _, m := range f.machines(t) {
			if m.Name == resp.ID && m.Network != tc.network {
				t.Errorf("egress %#v: network %v, want %v", tc.egress, m.Network, tc.network)
			}
		}
		d.Apply(t.Context(), drivers.ApplyRequest{Op: drivers.OpDelete, Lineage: "x", ID: resp.ID, Object: obj})
	}
	obj := planOne(t, d, agentSpec("coder", "alpine:3"))
	obj.Attrs["egress"] = cty.ListVal([]cty.Value{cty.StringVal("*.pythonhosted.org:443")})
	f.resetCalls(t)
	_, err := d.Apply(t.Context(), drivers.ApplyRequest{Op: drivers.OpCreate, Lineage: newLineage(), Object: obj, Hash: "h"})
	if err == nil || !strings.Contains(err.Error(), `egress rule "*.pythonhosted.org:443"`) {
		t.Errorf("create with a wildcard rule: %v", err)
	}
	if calls := f.calls(t); len(calls) != 0 {
		t.Errorf("a create refused for its egress rules ran %q", calls)
	}
}
