package egress

import (
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// TestDecisionOutcomes: the decision log keeps the policy's decision
// (allowed) apart from what happened (outcome), for each way a request
// ends, and every decision carries the serial of the allowlist that made
// it.
func TestDecisionOutcomes(t *testing.T) {
	_, port := echoServer(t)
	p := strconv.Itoa(port)
	// A loopback port nothing listens on: the destination refuses.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedPort := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	l.Close()
	tg := startGateway(t, nil, newResolver("echo.test", "127.0.0.1"),
		"echo.test:"+p, "127.0.0.1:"+p, "echo.test:"+closedPort, "127.0.0.1:"+closedPort, "gone.test:443")

	for _, tc := range []struct {
		target  string
		status  int
		allowed bool
		outcome string
	}{
		{"echo.test:" + p, http.StatusOK, true, OutcomeConnected},
		{"denied.test:443", http.StatusForbidden, false, OutcomeDenied},
		{"gone.test:443", http.StatusBadGateway, true, OutcomeDNSFailed},
		{"echo.test:" + closedPort, http.StatusBadGateway, true, OutcomeRefused},
		{"github.com", http.StatusBadRequest, false, OutcomeBadRequest},
	} {
		c, _, resp, body := tg.connect(t, tc.target)
		if resp.StatusCode != tc.status {
			t.Errorf("CONNECT %s: %s %q, want %d", tc.target, resp.Status, body, tc.status)
		}
		d := tg.log.decision(t)
		if d.Allowed != tc.allowed || d.Outcome != tc.outcome || d.Serial != 1 {
			t.Errorf("CONNECT %s: decision allowed=%t outcome=%q serial=%d, want allowed=%t outcome=%q serial 1 (%+v)",
				tc.target, d.Allowed, d.Outcome, d.Serial, tc.allowed, tc.outcome, d)
		}
		c.Close()
	}

	// A new allowlist: the next decisions carry serial 2.
	if tg.Serial() != 1 {
		t.Fatalf("serial after the first rules = %d, want 1", tg.Serial())
	}
	tg.SetRules(mustRules(t, "denied.test:443"))
	_, _, resp, _ := tg.connect(t, "echo.test:"+p)
	if d := tg.log.decision(t); resp.StatusCode != http.StatusForbidden || d.Serial != 2 || d.Outcome != OutcomeDenied {
		t.Errorf("after SetRules: %s, decision %+v, want 403 denied with serial 2", resp.Status, d)
	}
}

// TestSidecarThroughProxy: a request for a sidecar of the same bottle is
// refused with advice to connect to it directly, which is what a client
// that ignored NO_PROXY needs to hear; the name is never looked up.
func TestSidecarThroughProxy(t *testing.T) {
	tg := startGateway(t, nil, newResolver())
	f, err := UnmarshalRulesFile([]byte(`{"agent": "agent.coder", "allow": [], "sidecars": ["db", "web"]}`))
	if err != nil {
		t.Fatal(err)
	}
	rules, _ := f.Rules()
	tg.setRuleset(f.Agent, rules, f.Sidecars)
	_, _, resp, body := tg.connect(t, "db:5432")
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "db is a sidecar of this bottle: connect to db:5432 directly") || !strings.Contains(body, "NO_PROXY") {
		t.Fatalf("%s %q", resp.Status, body)
	}
	if d := tg.log.decision(t); d.Allowed || d.Outcome != OutcomeDenied || d.Serial != 2 {
		t.Errorf("decision %+v", d)
	}
	// Not a sidecar: the usual refusal.
	if _, _, _, body := tg.connect(t, "dbx:5432"); !strings.Contains(body, "not in the allowlist") {
		t.Errorf("a name that is no sidecar: %q", body)
	}
	if got := tg.resolver.Lookups(); len(got) != 0 {
		t.Errorf("lookups = %q", got)
	}
}
