package addrs

import (
	"strings"
	"testing"
)

// TestInstanceAddrs: instance addresses parse into the constructors'
// values, render back to the same text, and keep their key below the
// agent (sidecars, network, policy snapshots).
func TestInstanceAddrs(t *testing.T) {
	fe := AgentInstance("coder", StringKey("frontend"))
	tests := []struct {
		text  string
		built Addr
		agent string // Agent()
		block string // BlockName()
		key   InstanceKey
		safe  string // SafeName()
	}{
		{`agent.coder["frontend"]`, fe, `coder["frontend"]`, "coder", StringKey("frontend"), "coder__frontend"},
		{`agent.coder[0]`, AgentInstance("coder", IntKey(0)), "coder[0]", "coder", IntKey(0), "coder--0"},
		{`agent.coder[12]`, Agent("coder[12]"), "coder[12]", "coder", IntKey(12), "coder--12"},
		{`agent.coder["frontend"].network`, fe.Network(), `coder["frontend"]`, "coder", StringKey("frontend"), "coder__frontend"},
		{`agent.coder["frontend"].image`, fe.Image(), `coder["frontend"]`, "coder", StringKey("frontend"), "coder__frontend"},
		{`agent.coder["frontend"].gateway`, fe.Gateway(), `coder["frontend"]`, "coder", StringKey("frontend"), "coder__frontend"},
		{`agent.coder["frontend"].sidecar.git`, Sidecar(`coder["frontend"]`, "git"), `coder["frontend"]`, "coder", StringKey("frontend"), "coder__frontend"},
		{`agent.coder["frontend"].sidecar.git.image`, fe.Sidecar("git").Image(), `coder["frontend"]`, "coder", StringKey("frontend"), "coder__frontend"},
		{`agent.coder["frontend"].snapshot.3`, PolicySnapshot(`coder["frontend"]`, 3), `coder["frontend"]`, "coder", StringKey("frontend"), "coder__frontend"},
		{`agent.coder["a_b-9"]`, AgentInstance("coder", StringKey("a_b-9")), `coder["a_b-9"]`, "coder", StringKey("a_b-9"), "coder__a_b-9"},
		{`agent.coder["0"]`, AgentInstance("coder", StringKey("0")), `coder["0"]`, "coder", StringKey("0"), "coder__0"},
		{`snapshot.nightly["b"]`, Snapshot(`nightly["b"]`), "", "nightly", StringKey("b"), "nightly__b"},
		{`snapshot.nightly[1]`, SnapshotInstance("nightly", IntKey(1)), "", "nightly", IntKey(1), "nightly--1"},
		{`agent.coder`, Agent("coder"), "coder", "coder", NoKey, "coder"},
	}
	for _, tt := range tests {
		t.Run(tt.text, func(t *testing.T) {
			a, err := Parse(tt.text)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if a != tt.built {
				t.Errorf("Parse = %#v, constructors give %#v", a, tt.built)
			}
			if a.String() != tt.text || tt.built.String() != tt.text {
				t.Errorf("String() = %q, constructed %q", a.String(), tt.built.String())
			}
			if a.Agent() != tt.agent || a.BlockName() != tt.block || a.Key() != tt.key || a.SafeName() != tt.safe {
				t.Errorf("Agent, BlockName, Key, SafeName = %q, %q, %v, %q", a.Agent(), a.BlockName(), a.Key(), a.SafeName())
			}
			if tt.agent != "" {
				if got, ok := AgentOf(tt.text); !ok || got != Agent(tt.agent) || got.Key() != tt.key {
					t.Errorf("AgentOf = %v, %v", got, ok)
				}
			}
			name, key := ParseSafeName(a.SafeName())
			if name != tt.block || key != tt.key {
				t.Errorf("ParseSafeName(%q) = %q, %v", a.SafeName(), name, key)
			}
		})
	}
}

func TestInstanceParseErrors(t *testing.T) {
	for _, tc := range []struct{ text, want string }{
		{`agent.coder["a b"]`, "space"},
		{`agent.coder["a`, `not ["KEY"] or [N]`},
		{`agent.coder["a]`, "closing quote"},
		{`agent.coder[""]`, "it is empty"},
		{`agent.coder["x/y"]`, "only letters, digits"},
		{`agent.coder[01]`, "leading zeros"},
		{`agent.coder[-1]`, "a number from 0"},
		{`agent.coder[a]`, `not ["KEY"]`},
		{`agent.["a"]`, "names no block"},
		{`agent.co"der`, "outside an instance key"},
		{`agent.coder["` + strings.Repeat("k", MaxKeyLen+1) + `"]`, "longer than"},
		{`runtime.r["a"]`, "takes no key"},
		{`snapshot.s[x]`, `not ["KEY"]`},
	} {
		if a, err := Parse(tc.text); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%q) = %v, %v; want an error with %q", tc.text, a, err, tc.want)
		}
	}
}

// TestSafeNamesUnique: the engine-safe names of a block's instances, of
// both kinds of key, and of the block itself are all different, and each
// reads back.
func TestSafeNamesUnique(t *testing.T) {
	seen := map[string]InstanceKey{}
	keys := []InstanceKey{NoKey, IntKey(0), IntKey(1), IntKey(10), StringKey("a"), StringKey("0"), StringKey("1"), StringKey("a--1"), StringKey("a__b"), StringKey("-"), StringKey("_")}
	for _, k := range keys {
		s := SafeName("my-agent_2", k)
		if prev, dup := seen[s]; dup {
			t.Errorf("keys %v and %v both give %q", prev, k, s)
		}
		seen[s] = k
		if strings.ContainsFunc(s, func(r rune) bool { return !isKeyRune(r) }) {
			t.Errorf("%q holds what engines refuse", s)
		}
		if name, got := ParseSafeName(s); name != "my-agent_2" || got != k {
			t.Errorf("ParseSafeName(%q) = %q, %v; want %v", s, name, got, k)
		}
	}
}

// FuzzInstanceRoundTrip: any instance address Parse accepts renders back to
// the same text, and its engine-safe name reads back to the same block and
// key when CheckInstancedName accepts the block's name (lang refuses
// for_each and count on others).
func FuzzInstanceRoundTrip(f *testing.F) {
	for _, s := range []string{`agent.coder["frontend"]`, `agent.coder[0]`, `agent.a--b[3].sidecar.x`, `snapshot.s["0"]`, `agent.x["a__b"]`, `agent.x["-"].network`, `agent.a_["_"]`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := Parse(s)
		if err != nil {
			return
		}
		if a.String() != s {
			t.Fatalf("Parse(%q).String() = %q", s, a.String())
		}
		if a.Key().IsNone() || CheckInstancedName(a.BlockName()) != "" {
			return
		}
		if name, key := ParseSafeName(a.SafeName()); name != a.BlockName() || key != a.Key() {
			t.Fatalf("ParseSafeName(%q) = %q, %v; want %q, %v", a.SafeName(), name, key, a.BlockName(), a.Key())
		}
	})
}
