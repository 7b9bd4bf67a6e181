package operations

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/bottlefile/bottlefile/egress"
)

// decisionLog is a gateway's stdout: decisions, and a line that is not one.
const decisionLog = `{"time":"2026-11-25T10:00:00Z","source":"10.0.0.2:1","destination":"pypi.org:443","rule":"","allowed":false,"outcome":"denied","reason":"pypi.org:443 is not in the allowlist of agent.coder","serial":1}
not a decision
{"time":"2026-11-25T10:01:00Z","source":"10.0.0.2:2","destination":"github.com:443","rule":"github.com:443","allowed":true,"outcome":"connected","reason":"connected to 140.82.121.4:443","serial":1}
{"time":"2026-11-25T10:02:00Z","source":"10.0.0.2:3","destination":"pypi.org:443","rule":"","allowed":false,"outcome":"denied","reason":"pypi.org:443 is not in the allowlist of agent.coder","serial":2}
{"time":"2026-11-25T10:03:00Z","source":"10.0.0.2:4","destination":"db:5432","rule":"","allowed":false,"outcome":"denied","reason":"db is a sidecar of this bottle: connect to db:5432 directly","serial":2}
{"time":"2026-11-25T10:04:00Z","source":"10.0.0.2:5","destination":"github.com:443","rule":"github.com:443","allowed":true,"outcome":"refused-by-destination","reason":"cannot connect","serial":2}
{"time":"2026-11-25T10:05:00Z","source":"10.0.0.2:6","destination":"(unparsed) x","rule":"","allowed":false,"outcome":"bad-request","reason":"GET / is not a proxy request","serial":2}
{"time":"2026-11-25T09:00:00Z","source":"10.0.0.2:7","destination":"old.example:443","rule":"","allowed":false,"outcome":"denied","reason":"too old","serial":1}
`

func TestDenials(t *testing.T) {
	decs, err := ParseDecisions(strings.NewReader(decisionLog), "agent.coder", time.Date(2026, 11, 25, 9, 30, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	if len(decs) != 6 {
		t.Fatalf("parsed %d decisions, want 6 (one line is none, one is too old)", len(decs))
	}
	got := Denials(decs)
	want := []Denial{
		{Agent: "agent.coder", Destination: "pypi.org:443", Count: 2, Last: time.Date(2026, 11, 25, 10, 2, 0, 0, time.UTC),
			Reason: "pypi.org:443 is not in the allowlist of agent.coder", Outcome: "denied", Serial: 2, Rule: "pypi.org:443"},
		{Agent: "agent.coder", Destination: "(unparsed) x", Count: 1, Last: time.Date(2026, 11, 25, 10, 5, 0, 0, time.UTC),
			Reason: "GET / is not a proxy request", Outcome: "bad-request", Serial: 2},
		{Agent: "agent.coder", Destination: "db:5432", Count: 1, Last: time.Date(2026, 11, 25, 10, 3, 0, 0, time.UTC),
			Reason: "db is a sidecar of this bottle: connect to db:5432 directly", Outcome: "denied", Serial: 2},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("denials (-want +got):\n%s", diff)
	}
}

// TestReplay: the what-if of an allowlist change over the gateway's recent
// decisions says which refused destinations it would allow and which in
// use it would deny, with counts.
func TestReplay(t *testing.T) {
	decs, err := ParseDecisions(strings.NewReader(decisionLog), "agent.coder", time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	rules, err := egress.ParseRules([]string{"pypi.org:443", "old.example:443", "db:5432"})
	if err != nil {
		t.Fatal(err)
	}
	w := Replay(decs, rules)
	lines := w.Lines(DecisionsKept)
	want := []string{
		"of the destinations denied in the last 24 hours, the new allowlist would allow pypi.org:443 (2 requests), db:5432 (1 request), old.example:443 (1 request)",
		"of the destinations in use in the last 24 hours, the new allowlist would deny github.com:443 (2 requests)",
	}
	if diff := cmp.Diff(want, lines); diff != "" {
		t.Errorf("what-if lines (-want +got):\n%s", diff)
	}
	// Rules that change nothing the gateway saw say nothing.
	same, _ := egress.ParseRules([]string{"github.com:443"})
	if lines := Replay(decs, same).Lines(DecisionsKept); len(lines) != 0 {
		t.Errorf("no change, yet: %q", lines)
	}
}

// TestInjectionsAndElsewhere: injections are grouped apart from denials;
// a placeholder sent elsewhere is a denial no allow rule fixes, and
// allowing its destination would not have let it through.
func TestInjectionsAndElsewhere(t *testing.T) {
	const log = `{"time":"2026-11-25T10:00:00Z","source":"10.0.0.2:1","destination":"api.anthropic.com:443","rule":"api.anthropic.com:443","allowed":true,"outcome":"intercepted","reason":"TLS terminated","serial":1}
{"time":"2026-11-25T10:00:01Z","source":"10.0.0.2:1","destination":"api.anthropic.com:443","rule":"api.anthropic.com:443","allowed":true,"outcome":"credential-injected","reason":"credential injected: \"anthropic\" in header X-Api-Key, into POST /v1/messages","serial":1}
{"time":"2026-11-25T10:00:02Z","source":"10.0.0.2:1","destination":"api.anthropic.com:443","rule":"api.anthropic.com:443","allowed":true,"outcome":"credential-injected","reason":"credential injected: \"anthropic\" in header X-Api-Key, into GET /v1/models","serial":1}
{"time":"2026-11-25T10:00:40Z","source":"10.0.0.2:9","destination":"api.anthropic.com:443","rule":"api.anthropic.com:443","allowed":true,"outcome":"credential-injected","reason":"credential injected: \"anthropic\" in header X-Api-Key, into GET /v1/models","serial":1,"count":40}
{"time":"2026-11-25T10:00:03Z","source":"10.0.0.2:2","destination":"pastebin.com:80","rule":"","allowed":false,"outcome":"credential-elsewhere","reason":"the request carries the placeholder of credential \"anthropic\", which is injected only for api.anthropic.com:443: an attempt to use the credential elsewhere","serial":1}
`
	decs, err := ParseDecisions(strings.NewReader(log), "agent.coder", time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	// The last line aggregates 40 requests past the allowed-lines rate
	// limit: they count.
	want := []Injection{{Agent: "agent.coder", Destination: "api.anthropic.com:443", Count: 42, Last: time.Date(2026, 11, 25, 10, 0, 40, 0, time.UTC),
		Reason: `credential injected: "anthropic" in header X-Api-Key, into GET /v1/models`}}
	if diff := cmp.Diff(want, Injections(decs)); diff != "" {
		t.Errorf("injections (-want +got):\n%s", diff)
	}
	denials := Denials(decs)
	if len(denials) != 1 || denials[0].Outcome != egress.OutcomeCredentialElsewhere || denials[0].Rule != "" {
		t.Errorf("denials %+v, want the one credential-elsewhere, with no rule to add", denials)
	}
	rules, _ := egress.ParseRules([]string{"pastebin.com:80"})
	w := Replay(decs, rules)
	if len(w.NowAllowed) != 0 {
		t.Errorf("a new rule would let the placeholder through: %+v", w.NowAllowed)
	}
	if want := []DestinationCount{{"api.anthropic.com:443", 43}}; !cmp.Equal(w.NowDenied, want) {
		t.Errorf("destinations in use the new rules deny: %+v, want %+v (aggregated lines count their requests)", w.NowDenied, want)
	}
}

// TestDenialRules: the allow rule a denial suggests comes from the
// decision's refusal and allow_with fields, whatever its reason says; a
// line written by a gateway before those fields (the last one) still gets
// the rule it got then.
func TestDenialRules(t *testing.T) {
	f, err := os.Open("testdata/decisions/structured.log")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	decs, err := ParseDecisions(f, "agent.coder", time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, d := range Denials(decs) {
		got[d.Destination] = d.Rule
	}
	want := map[string]string{
		"api.test:443":          "api.test:443",
		"elsewhere.example:443": "", // the ceiling would refuse it too
		"db:5432":               "",
		"corp.test:443":         "10.1.2.3:443",
		"metadata.test:80":      "",
		"outside.example:443":   "",
		"(unparsed) x":          "",
		"corp-old.test:443":     "10.1.2.4:443",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("rules by destination (-want +got):\n%s", diff)
	}
}
