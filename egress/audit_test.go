package egress

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

func allowedLine(src, dest string, at time.Time) Decision {
	return Decision{Time: at, Source: src, Destination: dest, Rule: dest, Allowed: true, Outcome: OutcomeConnected, Reason: "connected to 192.0.2.1:443", Serial: 1}
}

// TestAllowedLimit: a source's allowed lines pass up to the burst, then
// one a second; the rest are aggregated per destination into lines that
// count them (flushed every aggregateEvery), past maxAggregates only
// counted; sources are limited apart; no request goes uncounted.
func TestAllowedLimit(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 6, 0, 0, 0, time.UTC)
	var l allowedLimit
	var out []Decision
	for range allowedBurst + 500 {
		out = append(out, l.add(allowedLine("10.0.0.2:1", "a.example:443", t0), t0)...)
	}
	if len(out) != allowedBurst {
		t.Fatalf("%d lines for %d requests at once, want the burst, %d", len(out), allowedBurst+500, allowedBurst)
	}
	// Another source has its own burst.
	if got := l.add(allowedLine("10.0.0.3:1", "a.example:443", t0), t0); len(got) != 1 {
		t.Fatalf("another source: %d lines, want 1", len(got))
	}
	// 40 destinations more past the burst: with a.example's, 32
	// aggregates; 9 only counted.
	for i := range 40 {
		l.add(allowedLine("10.0.0.2:1", fmt.Sprintf("d%d.example:443", i), t0), t0)
	}
	// A second later, one token: a line, carrying the 9 left out.
	got := l.add(allowedLine("10.0.0.2:1", "b.example:443", t0.Add(time.Second)), t0.Add(time.Second))
	if len(got) != 1 || got[0].Suppressed != 9 || got[0].Requests() != 1 {
		t.Fatalf("after a second: %+v, want one line with 9 suppressed", got)
	}
	// Due: the aggregates come with the next request.
	later := t0.Add(aggregateEvery)
	got = l.add(allowedLine("10.0.0.2:1", "a.example:443", later), later)
	total, lines := 0, map[string]int{}
	for _, d := range got {
		total += d.Requests() + d.Suppressed
		lines[d.Destination] = d.Requests()
	}
	if lines["a.example:443"] != 500 || len(lines) != 1+31 {
		t.Fatalf("aggregates %v, want a.example:443 counting 500, and 31 other destinations", lines)
	}
	if want := 1 + 500 + 31; total != want { // the request itself (tokens again), then the aggregates
		t.Fatalf("the aggregates count %d requests, want %d", total, want)
	}
	if rest := l.flush(later); len(rest) != 0 {
		t.Fatalf("left pending after a flush: %+v", rest)
	}
}

// TestAllowedFloodBounded is the flood in figures: 95,000
// allowed requests in four minutes from one source (one line each
// rotated a 3 × 10 MB log) write a few hundred lines, to one destination
// or to as many as a wildcard rule allows.
func TestAllowedFloodBounded(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 6, 0, 0, 0, time.UTC)
	for _, dests := range []int{1, 1000} {
		t.Run(fmt.Sprint(dests, " destinations"), func(t *testing.T) {
			var l allowedLimit
			const n, over = 95000, 4 * time.Minute
			bytes, lines, requests := 0, 0, 0
			for i := range n {
				now := t0.Add(over * time.Duration(i) / n)
				d := allowedLine("10.0.0.2:1234", fmt.Sprintf("host%d.example.com:443", i%dests), now)
				for _, w := range l.add(d, now) {
					bytes += len(marshalDecision(w))
					lines++
					requests += w.Requests() + w.Suppressed
				}
			}
			for _, w := range l.flush(t0.Add(over)) {
				bytes += len(marshalDecision(w))
				lines++
				requests += w.Requests() + w.Suppressed
			}
			t.Logf("%d requests to %d destinations in %v: %d lines, %d bytes", n, dests, over, lines, bytes)
			if requests != n {
				t.Errorf("the lines account for %d requests, want %d", requests, n)
			}
			if limit := int(allowedBurst + over/allowedEvery + (maxAggregates+1)*(over/aggregateEvery+1)); lines > limit {
				t.Errorf("%d lines, want at most %d", lines, limit)
			}
			if bytes > 1<<20 {
				t.Errorf("%d bytes, want at most 1 MiB (one line a request: %d)", bytes, n*317)
			}
		})
	}
}

// TestRefusalOutlivesAllowedFlood: through the gateway, a refusal, then a
// flood of allowed requests: the log holds the refusal among a bounded
// number of lines.
func TestRefusalOutlivesAllowedFlood(t *testing.T) {
	_, port := echoServer(t)
	tg := startGateway(t, nil, newResolver(), fmt.Sprintf("127.0.0.1:%d", port))
	resp, _ := tg.raw(t, "CONNECT denied.example:443 HTTP/1.1\r\nHost: denied.example:443\r\n\r\n")
	if resp.StatusCode != 403 {
		t.Fatalf("control: %s", resp.Status)
	}
	const flood = 2 * allowedBurst
	for range flood {
		c, _, resp, _ := tg.connect(t, fmt.Sprintf("127.0.0.1:%d", port))
		if resp.StatusCode != 200 {
			t.Fatalf("allowed CONNECT: %s", resp.Status)
		}
		c.Close()
	}
	tg.stop() // flushes the aggregates
	log := tg.log.String()
	lines := strings.Split(strings.TrimSpace(log), "\n")
	if !strings.Contains(lines[0], `"destination":"denied.example:443"`) {
		t.Fatalf("the refusal is not the first line: %s", lines[0])
	}
	counted := 0
	for _, l := range lines[1:] {
		var d Decision
		if err := json.Unmarshal([]byte(l), &d); err != nil {
			t.Fatal(err)
		}
		counted += d.Requests()
	}
	if len(lines) > allowedBurst+2 || counted != flood {
		t.Fatalf("%d lines for %d allowed requests (counting %d), want at most %d", len(lines)-1, flood, counted, allowedBurst+1)
	}
}
