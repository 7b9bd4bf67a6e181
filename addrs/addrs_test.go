package addrs

import (
	"errors"
	"strings"
	"testing"
)

func TestParseRoundTrip(t *testing.T) {
	tests := []struct {
		text     string
		built    Addr
		kind     Kind
		agent    string
		name     string
		workload bool
		snapshot bool
		policyN  int
	}{
		{"agent.coder", Agent("coder"), AgentKind, "coder", "coder", true, false, 0},
		{"agent.coder.network", Agent("coder").Network(), NetworkKind, "coder", "coder", false, false, 0},
		{"agent.coder.image", Agent("coder").Image(), ImageKind, "coder", "coder", false, false, 0},
		{"agent.coder.gateway", Agent("coder").Gateway(), GatewayKind, "coder", "coder", true, false, 0},
		{"agent.coder.sidecar.git", Sidecar("coder", "git"), SidecarKind, "coder", "git", true, false, 0},
		{"agent.coder.sidecar.git.image", Agent("coder").Sidecar("git").Image(), SidecarImageKind, "coder", "git", false, false, 0},
		{"agent.coder.snapshot.12", PolicySnapshot("coder", 12), PolicySnapshotKind, "coder", "coder", false, true, 12},
		{"snapshot.base", Snapshot("base"), SnapshotKind, "", "base", false, true, 0},
		{"runtime.local", Runtime("local"), RuntimeKind, "", "local", false, false, 0},
		{"runtime.local.egress", Runtime("local").Egress(), EgressNetworkKind, "", "local", false, false, 0},
		{"agent.my-agent_2", Agent("my-agent_2"), AgentKind, "my-agent_2", "my-agent_2", true, false, 0},
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
			if got := a.String(); got != tt.text {
				t.Errorf("String() = %q", got)
			}
			if got := tt.built.String(); got != tt.text {
				t.Errorf("constructed String() = %q", got)
			}
			if a.Kind() != tt.kind || a.Agent() != tt.agent || a.Name() != tt.name {
				t.Errorf("Kind, Agent, Name = %v, %q, %q; want %v, %q, %q", a.Kind(), a.Agent(), a.Name(), tt.kind, tt.agent, tt.name)
			}
			if a.IsWorkload() != tt.workload || a.IsSnapshot() != tt.snapshot {
				t.Errorf("IsWorkload, IsSnapshot = %v, %v", a.IsWorkload(), a.IsSnapshot())
			}
			n, ok := a.PolicySnapshotNumber()
			if n != tt.policyN || ok != (tt.policyN > 0) {
				t.Errorf("PolicySnapshotNumber() = %d, %v", n, ok)
			}
			if tt.agent != "" && a.AgentAddr() != Agent(tt.agent) {
				t.Errorf("AgentAddr() = %v", a.AgentAddr())
			}
			if tt.agent == "" && a.AgentAddr().IsValid() {
				t.Errorf("AgentAddr() = %v, want the zero Addr", a.AgentAddr())
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		text string
		want string // part of the reason
	}{
		{"", "it is empty"},
		{"agent", "names no agent"},
		{"agent.", "label 2 is empty"},
		{"agent..network", "label 2 is empty"},
		{"agent.coder.", "label 3 is empty"},
		{"agent.co der", "space"},
		{"agent.coder.volume", `"volume" is not something an agent owns`},
		{"agent.coder.sidecar", "names no sidecar"},
		{"agent.coder.sidecar.git.logs", `"sidecar.git.logs" is not something`},
		{"agent.coder.snapshot", "names no snapshot"},
		{"agent.coder.snapshot.0", "not a number from 1"},
		{"agent.coder.snapshot.03", "not a number from 1"},
		{"agent.coder.snapshot.x", "not a number from 1"},
		{"agent.coder.snapshot.+3", "not a number from 1"},
		{"agent.coder.snapshot.99999999999999999999999", "not a number from 1"},
		{"snapshot", "snapshot.NAME"},
		{"snapshot.a.b", "snapshot.NAME"},
		{"runtime.r.network", "runtime.NAME or runtime.NAME.egress"},
		{"coder", `starts with "coder"`},
		{"var.x", `starts with "var"`},
	}
	for _, tt := range tests {
		t.Run(tt.text, func(t *testing.T) {
			a, err := Parse(tt.text)
			if err == nil {
				t.Fatalf("Parse = %v, want an error", a)
			}
			var pe *ParseError
			if !errors.As(err, &pe) || pe.Text != tt.text {
				t.Fatalf("error %#v is not a *ParseError for %q", err, tt.text)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q lacks %q", err, tt.want)
			}
			if a.IsValid() {
				t.Errorf("Parse returned %v with its error", a)
			}
		})
	}
}

// TestOwnedOfNonAgent: asking a snapshot block or runtime for an agent's
// objects gives the zero Addr, never a made-up address.
func TestOwnedOfNonAgent(t *testing.T) {
	for _, a := range []Addr{Snapshot("s"), Runtime("r"), {}} {
		for _, b := range []Addr{a.Network(), a.Gateway(), a.Sidecar("x"), a.PolicySnapshot(1), a.Image()} {
			if b.IsValid() || b.String() != "" {
				t.Errorf("%v gave %v", a, b)
			}
		}
	}
	if Agent("a").Egress().IsValid() {
		t.Error("an agent has no egress network")
	}
	if got := Agent("a").Gateway().Network(); got != Agent("a").Network() {
		t.Errorf("a gateway's network = %v", got)
	}
}

func TestAgentOf(t *testing.T) {
	for _, tc := range []struct {
		text, want string
	}{
		{"agent.coder", "agent.coder"},
		{"agent.coder.sidecar.git", "agent.coder"},
		{"agent.coder.volume.data", "agent.coder"}, // a form Parse does not know
		{"agent.coder.snapshot.3", "agent.coder"},
		{"agent.", ""},
		{"agent", ""},
		{"agent..x", ""},
		{"snapshot.base", ""},
		{"runtime.local.egress", ""},
		{"agentx.coder", ""},
	} {
		a, ok := AgentOf(tc.text)
		if got := a.String(); got != tc.want || ok != (tc.want != "") {
			t.Errorf("AgentOf(%q) = %q, %v; want %q", tc.text, got, ok, tc.want)
		}
	}
}

func TestEditDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"", "", 0},
		{"clade", "claude", 1},
		{"agent.coder", "agent.codre", 2},
		{"", "abc", 3},
		{"héllo", "hello", 1}, // runes, not bytes
	} {
		if got := EditDistance(tc.a, tc.b); got != tc.want {
			t.Errorf("EditDistance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}

// TestBelow: the labels below an agent, the engine-safe agent name and
// the owner an engine object is named after.
func TestBelow(t *testing.T) {
	for _, tt := range []struct {
		addr, below, safe, owner string
	}{
		{`agent.coder`, ``, `coder`, `agent.coder`},
		{`agent.coder.network`, `network`, `coder`, `agent.coder`},
		{`agent.coder.image`, `image`, `coder`, `agent.coder`},
		{`agent.coder["a"].sidecar.db`, `sidecar.db`, `coder__a`, `agent.coder["a"].sidecar.db`},
		{`agent.coder[0].sidecar.db.image`, `sidecar.db.image`, `coder--0`, `agent.coder[0].sidecar.db`},
		{`agent.coder.gateway`, `gateway`, `coder`, `agent.coder.gateway`},
		{`snapshot.base`, ``, ``, `snapshot.base`},
	} {
		a := MustParse(tt.addr)
		if got := strings.Join(a.Below(), "."); got != tt.below || a.SafeAgent() != tt.safe || a.Owner().String() != tt.owner {
			t.Errorf("%s: Below %q, SafeAgent %q, Owner %s; want %q, %q, %s", tt.addr, got, a.SafeAgent(), a.Owner(), tt.below, tt.safe, tt.owner)
		}
	}
}
