package egress

import (
	"bytes"
	"encoding/json"
	"net"
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
