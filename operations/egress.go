package operations

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/egress"
	"github.com/bottlefile/bottlefile/planner"
)

// KindGateway is the kind of an agent's egress gateway (docker's).
const KindGateway = "gateway"

// DecisionsKept is how far back the gateways' decisions are replayed
// against a new allowlist in a plan (the what-if).
const DecisionsKept = 24 * time.Hour

// GatewayDecision is one decision of the gateway of Agent.
type GatewayDecision struct {
	Agent string
	egress.Decision
}

// ParseDecisions reads a gateway's decision log (one egress.Decision JSON
// line each, as `logs agent.NAME.gateway` prints it on standard output),
// keeping those at or after since. Lines that are not decisions are
// skipped. This is the one reader of the decision log.
func ParseDecisions(r io.Reader, agent string, since time.Time) ([]GatewayDecision, error) {
	var out []GatewayDecision
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4<<10), 1<<20) // grows for a long line, up to 1 MiB
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 || line[0] != '{' {
			continue
		}
		var d egress.Decision
		if json.Unmarshal(line, &d) != nil || d.Destination == "" || d.Time.IsZero() {
			continue
		}
		if d.Time.Before(since) {
			continue
		}
		out = append(out, GatewayDecision{Agent: agent, Decision: d})
	}
	return out, sc.Err()
}

// Decisions reads the decision logs of the gateways of agent (agent.NAME;
// every agent when ""), keeping those at or after since, in time order.
func (op *Operation) Decisions(ctx context.Context, agent string, since time.Time) ([]GatewayDecision, hcl.Diagnostics) {
	objs, diags := op.LiveObjects(ctx, agent)
	if diags.HasErrors() {
		return nil, diags
	}
	var out []GatewayDecision
	for _, l := range objs {
		if l.Kind != KindGateway {
			continue
		}
		decs, err := l.decisions(ctx, since)
		if err != nil {
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagWarning, Summary: "Cannot read a gateway's decisions", Detail: fmt.Sprintf("%s: %v", l.Addr, err)})
			continue
		}
		out = append(out, decs...)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Time.Before(out[j].Time) })
	return out, diags
}

// decisions reads the decision log of a gateway through its driver.
func (l Live) decisions(ctx context.Context, since time.Time) ([]GatewayDecision, error) {
	lr, ok := drivers.As[drivers.LogReader](l.driver)
	if !ok {
		return nil, fmt.Errorf("the %s driver of runtime %q keeps no logs", l.Driver, l.Runtime)
	}
	var buf bytes.Buffer
	// Only what the decisions asked for: the log's own Since filter.
	if err := lr.Logs(ctx, l.lineage, l.obj, drivers.LogOptions{Since: since}, &buf, io.Discard); err != nil {
		return nil, err
	}
	return ParseDecisions(&buf, strings.TrimSuffix(l.Addr, "."+KindGateway), since)
}

// Denial is one destination a gateway refused, grouped.
type Denial struct {
	Agent       string
	Destination string // host:port, or "(unparsed) ..." for a malformed request
	Count       int
	Last        time.Time
	Reason      string // the last refusal's
	Outcome     string // the last refusal's (denied, bad-request)
	// Refusal is the last refusal's code (an egress.Refusal constant); ""
	// for a line of a gateway older than the field.
	Refusal string
	Serial  uint64 // of the allowlist that made the last refusal
	// Rule is the exact allow rule that would let it through, as it goes
	// in the egress block's allow list ("api.example.com:443"); "" when no
	// rule would (a malformed request, a sidecar asked through the proxy).
	Rule string
}

// Denials groups the refusals among decs by agent and destination, most
// refused first.
func Denials(decs []GatewayDecision) []Denial {
	byKey := map[[2]string]*Denial{}
	var out []*Denial
	for _, d := range decs {
		if d.Allowed {
			continue
		}
		k := [2]string{d.Agent, d.Destination}
		g := byKey[k]
		if g == nil {
			g = &Denial{Agent: d.Agent, Destination: d.Destination}
			byKey[k] = g
			out = append(out, g)
		}
		g.Count++
		if !d.Time.Before(g.Last) {
			g.Last, g.Reason, g.Outcome, g.Serial, g.Refusal = d.Time, d.Reason, d.Outcome, d.Serial, d.Refusal
			g.Rule = ruleFor(d.Decision)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Agent != b.Agent {
			return a.Agent < b.Agent
		}
		if a.Count != b.Count {
			return a.Count > b.Count
		}
		return a.Destination < b.Destination
	})
	res := make([]Denial, len(out))
	for i, g := range out {
		res[i] = *g
	}
	return res
}

// Injection is the requests into which a gateway injected credentials,
// grouped by agent and destination.
type Injection struct {
	Agent       string
	Destination string // host:port
	Count       int
	Last        time.Time
	Reason      string // the last one's: which credentials, in which headers
}

// Injections groups the credential-injected decisions among decs by agent
// and destination, in order of agent, then most first.
func Injections(decs []GatewayDecision) []Injection {
	byKey := map[[2]string]*Injection{}
	var out []*Injection
	for _, d := range decs {
		if d.Outcome != egress.OutcomeCredentialInjected {
			continue
		}
		k := [2]string{d.Agent, d.Destination}
		g := byKey[k]
		if g == nil {
			g = &Injection{Agent: d.Agent, Destination: d.Destination}
			byKey[k] = g
			out = append(out, g)
		}
		g.Count += d.Requests() // an aggregated line stands for several
		if !d.Time.Before(g.Last) {
			g.Last, g.Reason = d.Time, d.Reason
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Agent != b.Agent {
			return a.Agent < b.Agent
		}
		if a.Count != b.Count {
			return a.Count > b.Count
		}
		return a.Destination < b.Destination
	})
	res := make([]Injection, len(out))
	for i, g := range out {
		res[i] = *g
	}
	return res
}

// ruleFor is the allow rule that would let a refused destination through,
// as the gateway recorded it (Decision.AllowWith); none when its refusal
// says no allow rule would. A line of a gateway older than these fields
// gets the rule legacyRuleFor finds.
func ruleFor(d egress.Decision) string {
	if d.Refusal != "" {
		return d.AllowWith
	}
	return legacyRuleFor(d)
}

// legacyRuleFor is the allow rule for a refusal logged by a gateway of a
// bottlefile before Decision.Refusal and AllowWith (its lines stay in the
// log for DecisionsKept, until the gateway's object is replaced with the
// new image). Such a line says the rest only in words: this is the one
// reader of them, kept for those lines only. The destination itself,
// unless the request was malformed, carried a credential elsewhere or named
// a sidecar; the address rule the reason names when the address policy
// refused an allowed name; none for another refusal of the address policy.
func legacyRuleFor(d egress.Decision) string {
	if d.Outcome == egress.OutcomeBadRequest || d.Outcome == egress.OutcomeCredentialElsewhere || strings.HasPrefix(d.Destination, "(unparsed)") || strings.Contains(d.Reason, "is a sidecar of this bottle") {
		return ""
	}
	if _, after, ok := strings.Cut(d.Reason, "(such as "); ok {
		if r, _, ok := strings.Cut(after, ")"); ok {
			if _, err := egress.ParseRule(r); err == nil {
				return r
			}
		}
	}
	if d.Rule != "" {
		return "" // a rule matched; the address policy refused it
	}
	r, err := egress.ParseRule(d.Destination)
	if err != nil {
		return ""
	}
	return r.String()
}

// DestinationCount is a destination and how many decisions were about it.
type DestinationCount struct {
	Destination string
	Count       int
}

// WhatIf is what a gateway's recent decisions would have been under new
// rules.
type WhatIf struct {
	// NowAllowed are destinations the policy refused that the new rules
	// would allow.
	NowAllowed []DestinationCount
	// NowDenied are destinations in use (allowed) that the new rules
	// would refuse.
	NowDenied []DestinationCount
}

// Replay replays decisions against rules. A refusal the address policy
// made (a rule matched, the address was forbidden) stays a refusal: no
// allow rule changes that.
func Replay(decs []GatewayDecision, rules []egress.Rule) WhatIf {
	allowed, denied := map[string]int{}, map[string]int{}
	for _, d := range decs {
		host, port, ok := splitDest(d.Destination)
		if !ok {
			continue
		}
		_, match := egress.Match(rules, host, port)
		switch {
		case !d.Allowed && d.Outcome != egress.OutcomeBadRequest && d.Outcome != egress.OutcomeCredentialElsewhere && d.Rule == "" && match:
			allowed[d.Destination]++
		case d.Allowed && !match:
			denied[d.Destination] += d.Requests()
		}
	}
	return WhatIf{NowAllowed: counted(allowed), NowDenied: counted(denied)}
}

func splitDest(dest string) (string, int, bool) {
	if strings.HasPrefix(dest, "(unparsed)") {
		return "", 0, false
	}
	h, p, err := net.SplitHostPort(dest)
	if err != nil {
		return "", 0, false
	}
	port, err := strconv.Atoi(p)
	return h, port, err == nil
}

func counted(m map[string]int) []DestinationCount {
	out := make([]DestinationCount, 0, len(m))
	for d, n := range m {
		out = append(out, DestinationCount{d, n})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Count != out[j].Count {
			return out[i].Count > out[j].Count
		}
		return out[i].Destination < out[j].Destination
	})
	return out
}

// Lines says the what-if in words, for the plan: nothing when the new
// rules change nothing the gateway saw.
func (w WhatIf) Lines(window time.Duration) []string {
	var out []string
	if len(w.NowAllowed) > 0 {
		out = append(out, fmt.Sprintf("of the destinations denied in the last %s, the new allowlist would allow %s", humanWindow(window), destList(w.NowAllowed)))
	}
	if len(w.NowDenied) > 0 {
		out = append(out, fmt.Sprintf("of the destinations in use in the last %s, the new allowlist would deny %s", humanWindow(window), destList(w.NowDenied)))
	}
	return out
}

func destList(ds []DestinationCount) string {
	parts := make([]string, len(ds))
	for i, d := range ds {
		parts[i] = fmt.Sprintf("%s (%d %s)", d.Destination, d.Count, map[bool]string{true: "request", false: "requests"}[d.Count == 1])
	}
	return strings.Join(parts, ", ")
}

func humanWindow(d time.Duration) string {
	if d%time.Hour == 0 {
		return fmt.Sprintf("%d hours", int(d/time.Hour))
	}
	return d.String()
}

// whatIf fills in the what-if of every planned change to a gateway's
// allowlist, from the gateway's decisions of the last DecisionsKept. A
// gateway whose log cannot be read gets none; the plan goes on.
func (op *Operation) whatIf(ctx context.Context, p *planner.Plan) {
	for _, c := range p.Changes {
		if c.Kind != KindGateway || c.Live == nil || (c.Action != planner.Update && c.Action != planner.Replace) {
			continue
		}
		allowV, ok := c.Object.Attrs["allow"]
		if !ok {
			continue
		}
		allow, err := drivers.Strings(allowV)
		if err != nil {
			continue
		}
		rules, err := egress.ParseRules(allow)
		if err != nil {
			continue
		}
		rt := op.Runtimes[c.Runtime]
		if rt == nil {
			continue
		}
		l := Live{Addr: c.Addr, Kind: c.Kind, ID: c.Live.ID, Runtime: c.Runtime, Driver: rt.Driver.Name(), lineage: op.Lineage(), obj: *c.Live, driver: rt.Driver}
		decs, err := l.decisions(ctx, op.now().Add(-DecisionsKept))
		if err != nil {
			if op.Log != nil {
				op.Log.Debug("cannot read the gateway's decisions for the what-if", "addr", c.Addr, "error", err)
			}
			continue
		}
		c.WhatIf = Replay(decs, rules).Lines(DecisionsKept)
	}
}
