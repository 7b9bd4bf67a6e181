package egress

import (
	"net/http"
	"testing"
)

// TestRefusalRecord: every refusal's decision line says, as fields and not
// in words, why it was refused and the allow rule that would let it
// through, so that `egress denials` needs no reading of the reason.
func TestRefusalRecord(t *testing.T) {
	res := newResolver(
		"corp.test", "10.1.2.3",
		"metadata.test", "169.254.169.254",
		"wide.test", "192.0.2.10",
	)
	g := &Gateway{Agent: "agent.coder", Ceiling: mustRules(t, "*.test", "corp.test:443", "metadata.test:80", "api.test:443", "db:5432", "10.0.0.0/8:443")}
	tg := startGateway(t, g, res, "corp.test:443", "metadata.test:80", "outside.example:443")
	f, err := UnmarshalRulesFile([]byte(`{"agent": "agent.coder", "allow": ["corp.test:443", "metadata.test:80", "outside.example:443"], "sidecars": ["db"]}`))
	if err != nil {
		t.Fatal(err)
	}
	rules, _ := f.Rules()
	tg.setRuleset(f.Agent, rules, f.Sidecars)
	for _, tc := range []struct {
		target, refusal, allowWith string
	}{
		{"api.test:443", RefusalNotAllowed, "api.test:443"},
		{"10.9.9.9:443", RefusalNotAllowed, "10.9.9.9:443"},
		{"elsewhere.example:443", RefusalNotAllowed, ""}, // the ceiling would refuse it too
		{"db:5432", RefusalSidecar, ""},
		{"outside.example:443", RefusalCeiling, ""},
		{"corp.test:443", RefusalAddress, "10.1.2.3:443"},
		{"metadata.test:80", RefusalAddress, ""}, // never dialed
	} {
		_, _, resp, body := tg.connect(t, tc.target)
		if resp.StatusCode != http.StatusForbidden {
			t.Fatalf("CONNECT %s: %s %q, want 403", tc.target, resp.Status, body)
		}
		d := tg.log.decision(t)
		if d.Allowed || d.Refusal != tc.refusal || d.AllowWith != tc.allowWith {
			t.Errorf("CONNECT %s: refusal %q, allow_with %q; want %q, %q (reason %q)", tc.target, d.Refusal, d.AllowWith, tc.refusal, tc.allowWith, d.Reason)
		}
	}
	resp, body := tg.raw(t, "GET / HTTP/1.1\r\nHost: gateway\r\n\r\n")
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("%s %q", resp.Status, body)
	}
	if d := tg.log.decision(t); d.Refusal != RefusalRequest || d.AllowWith != "" {
		t.Errorf("a malformed request: refusal %q, allow_with %q", d.Refusal, d.AllowWith)
	}
	// An allowed line carries neither.
	tg2 := startGateway(t, nil, newResolver(), "gone.test:443")
	tg2.connect(t, "gone.test:443")
	if d := tg2.log.decision(t); d.Refusal != "" || d.AllowWith != "" {
		t.Errorf("an allowed request: refusal %q, allow_with %q", d.Refusal, d.AllowWith)
	}
}
