package command

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/bottlefile/bottlefile/operations"
)

// TestRenderDenials: a destination no rule allows gets the rule that
// would; one refused for another reason (here an https:// URL sent as a
// plain request, for a destination the allowlist has) says that no rule
// changes it, without claiming no rule allows it or repeating its reason.
func TestRenderDenials(t *testing.T) {
	at := time.Date(2026, 11, 25, 16, 32, 55, 0, time.UTC)
	bad := "the client must use CONNECT for https:// URLs: it sent GET https://api.anthropic.com as a plain request to the proxy"
	var buf bytes.Buffer
	renderDenials(&buf, []operations.Denial{
		{Agent: "agent.claude", Destination: "example.com:80", Count: 2, Last: at, Reason: "example.com:80 is not in the allowlist of agent.claude", Outcome: "denied", Rule: "example.com:80"},
		{Agent: "agent.claude", Destination: "api.anthropic.com:443", Count: 1, Last: at, Reason: bad, Outcome: "bad-request"},
	}, 24*time.Hour, at)
	out := buf.String()
	for _, want := range []string{
		"agent.claude (denials in the last 24h0m0s)\n",
		"  example.com:80         2 times  last 2026-11-25 16:32:55 UTC  example.com:80 is not in the allowlist of agent.claude\n" +
			`    allow with:          egress { allow = [..., "example.com:80"] }` + "\n",
		"  api.anthropic.com:443  1 time  last 2026-11-25 16:32:55 UTC  " + bad + "\n    no allow rule changes this\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("denials lack %q:\n%s", want, out)
		}
	}
	if strings.Count(out, bad) != 1 || strings.Contains(out, "no rule allows it") {
		t.Errorf("the refusal's reason is repeated, or called a missing rule:\n%s", out)
	}
}
