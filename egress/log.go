package egress

import (
	"bytes"
	"encoding/json"
	"net"
	"slices"
	"sync"
	"time"
	"unicode/utf8"
)

// Bounds of the decision log: an agent controls the request it sends, not
// how much the docker host stores about it.
const (
	// maxLogField bounds, in bytes once JSON-escaped, what a decision line
	// holds of a string the client chose (destination, reason), so that a
	// decision line is never longer than MaxDecisionLine.
	maxLogField = 600
	// MaxDecisionLine is the longest a decision line gets, in bytes.
	MaxDecisionLine = 2048

	// A source gets refusalBurst refusal lines at once, then one every
	// refusalEvery; the lines left out are counted in the next one logged.
	refusalBurst = 20
	refusalEvery = 200 * time.Millisecond
	// maxSources bounds the rate limiter's memory (sources are the
	// addresses of a bottle network: a handful).
	maxSources = 4096
)

// clip shortens s so that its JSON-escaped form (without HTML escaping)
// takes at most max bytes, marking a cut with "...".
func clip(s string, max int) string {
	total := 0
	for _, r := range s {
		total += escapedLen(r)
	}
	if total <= max {
		return s
	}
	n := 0
	for i, r := range s {
		if w := escapedLen(r); n+w <= max-3 {
			n += w
			continue
		}
		return s[:i] + "..."
	}
	return s
}

// escapedLen is how many bytes r takes in a JSON string.
func escapedLen(r rune) int {
	switch {
	case r == utf8.RuneError, r < 0x20, r == 0x2028, r == 0x2029:
		return 6 // \u00XX, \ufffd
	case r == '"' || r == '\\':
		return 2
	}
	return utf8.RuneLen(r)
}

// marshalDecision is the JSON line of d, its strings clipped.
func marshalDecision(d Decision) []byte {
	d.Destination = clip(d.Destination, 300)
	d.Reason = clip(d.Reason, maxLogField)
	d.Rule = clip(d.Rule, 300)
	d.AllowWith = clip(d.AllowWith, 300)
	d.Source = clip(d.Source, 64)
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // '<' stays one byte, not six
	if enc.Encode(d) != nil {
		return nil
	}
	return b.Bytes()
}

// refusalLimit rate-limits the refusal lines of each source (a token
// bucket per client IP address).
type refusalLimit struct {
	mu      sync.Mutex
	sources map[string]*bucket
}

type bucket struct {
	tokens     float64
	last       time.Time
	suppressed int
}

// allow reports whether a refusal from source may be logged now, and how
// many were left out before it.
func (l *refusalLimit) allow(source string, now time.Time) (bool, int) {
	host, _, err := net.SplitHostPort(source)
	if err != nil {
		host = source
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.sources == nil || len(l.sources) >= maxSources {
		l.sources = map[string]*bucket{}
	}
	b := l.sources[host]
	if b == nil {
		b = &bucket{tokens: refusalBurst, last: now}
		l.sources[host] = b
	}
	b.tokens = min(refusalBurst, b.tokens+float64(now.Sub(b.last))/float64(refusalEvery))
	b.last = now
	if b.tokens < 1 {
		b.suppressed++
		return false, 0
	}
	b.tokens--
	n := b.suppressed
	b.suppressed = 0
	return true, n
}

// The audit trail. The engine keeps a bounded log (rotated), and an agent
// can send allowed requests as fast as it likes: were each one a line, a
// flood of them would rotate earlier refusals and injections out of what
// `egress denials` reads. So allowed lines (connected, intercepted,
// credential-injected) are rate-limited per source like refusals, and
// what the limit holds back is aggregated, not lost: one line per
// destination and outcome with the number of requests it stands for
// (Decision.Count), written every aggregateEvery. A source's flood of
// allowed requests writes at most about allowedEvery⁻¹ + (maxAggregates
// + 1)/aggregateEvery lines a second, two or so: rotating 3 × 10 MB takes
// it hours, not the minutes one line a request took.
const (
	allowedBurst   = 100
	allowedEvery   = time.Second
	aggregateEvery = 30 * time.Second
	// maxAggregates bounds a source's pending aggregates (a wildcard rule
	// allows any number of destinations); past it, requests are counted
	// in the Suppressed of the source's next line.
	maxAggregates = 32
)

// allowedLimit rate-limits and aggregates the allowed lines.
type allowedLimit struct {
	mu        sync.Mutex // guards the fields below
	sources   map[string]*allowedSource
	lastFlush time.Time
}

type allowedSource struct {
	bucket
	pending map[aggKey]*Decision
	order   []aggKey // of pending, first seen first
	dropped int
}

type aggKey struct {
	dest, outcome, rule string
	serial              uint64
}

// add takes an allowed decision and returns the lines to write now: d
// itself when the source's bucket has a token, and the aggregates due.
func (l *allowedLimit) add(d Decision, now time.Time) []Decision {
	host, _, err := net.SplitHostPort(d.Source)
	if err != nil {
		host = d.Source
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.sources == nil {
		l.sources = map[string]*allowedSource{}
		l.lastFlush = now
	}
	var out []Decision
	if len(l.sources) >= maxSources {
		out = l.flushLocked(now) // and forget them
		l.sources = map[string]*allowedSource{}
	}
	s := l.sources[host]
	if s == nil {
		s = &allowedSource{bucket: bucket{tokens: allowedBurst, last: now}, pending: map[aggKey]*Decision{}}
		l.sources[host] = s
	}
	s.tokens = min(allowedBurst, s.tokens+float64(now.Sub(s.last))/float64(allowedEvery))
	s.last = now
	switch k := (aggKey{d.Destination, d.Outcome, d.Rule, d.Serial}); {
	case s.tokens >= 1:
		s.tokens--
		d.Suppressed, s.dropped = s.dropped, 0
		out = append(out, d)
	case s.pending[k] != nil:
		p := s.pending[k]
		p.Count++
		p.Time, p.Source, p.Reason = d.Time, d.Source, d.Reason
	case len(s.pending) < maxAggregates:
		d.Count = 1
		s.pending[k] = &d
		s.order = append(s.order, k)
	default:
		s.dropped++
	}
	if now.Sub(l.lastFlush) >= aggregateEvery {
		out = append(out, l.flushLocked(now)...)
	}
	return out
}

// flush returns every pending aggregate, oldest source line first.
func (l *allowedLimit) flush(now time.Time) []Decision {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.flushLocked(now)
}

func (l *allowedLimit) flushLocked(now time.Time) []Decision {
	l.lastFlush = now
	var out []Decision
	for _, s := range l.sources {
		for _, k := range s.order {
			d := *s.pending[k]
			d.Suppressed, s.dropped = s.dropped, 0
			out = append(out, d)
		}
		clear(s.pending)
		s.order = s.order[:0]
	}
	slices.SortStableFunc(out, func(a, b Decision) int { return a.Time.Compare(b.Time) })
	return out
}
