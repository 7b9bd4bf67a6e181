package egress

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
)

// Encodings. A credential host that echoes a request (a debug endpoint,
// an error that quotes the headers) would hand the agent the value the
// gateway injected. The gateway removes from what it streams back the
// value and the forms an upstream commonly gives it (valueForms); an
// agent sending a placeholder elsewhere is caught in the forms an agent
// can give it (placeholderForms). Matching ignores ASCII case everywhere:
// a value upper-cased is still the value, and base64 or hex compared
// without case costs nothing in false matches at these lengths.

// valueForms are the byte strings the gateway masks in what a credential
// host sends back for credential c: its value and its prefix plus value
// (the header as injected: "Bearer sk-..."), each as it is,
// percent-encoded (as query and path encoders and as a client that
// encodes every byte would), base64 (standard and URL alphabets, at every
// alignment inside a longer encoded text) and hex. Lower-case.
func valueForms(c Credential) [][]byte {
	var out [][]byte
	for _, s := range []string{c.Value, c.Prefix + c.Value} {
		out = append(out, encodedForms(s)...)
	}
	return dedupe(out)
}

// placeholderForms are the forms of a placeholder the gateway recognises
// in a request to another host. Percent-encoding is not among them: the
// detector decodes it first (percentDecode), whatever bytes were encoded.
func placeholderForms(p string) [][]byte {
	var out [][]byte
	for _, s := range []string{p, strings.ToUpper(p)} {
		out = append(out, []byte(s))
		out = append(out, base64Forms(s)...)
		out = append(out, []byte(hex.EncodeToString([]byte(s))))
	}
	return dedupe(out)
}

func encodedForms(s string) [][]byte {
	out := [][]byte{
		[]byte(s),
		[]byte(url.QueryEscape(s)),
		[]byte(url.PathEscape(s)),
		[]byte(percentAll(s)),
		[]byte(hex.EncodeToString([]byte(s))),
	}
	return append(out, base64Forms(s)...)
}

// base64Forms are the parts of s's base64 encodings fixed by s alone,
// whatever precedes or follows it in the encoded text: s starting at each
// of the three offsets within a 3-byte group, without the characters that
// also depend on the neighbouring bytes.
func base64Forms(s string) [][]byte {
	var out [][]byte
	for _, enc := range []*base64.Encoding{base64.RawStdEncoding, base64.RawURLEncoding} {
		for lead := 0; lead < 3; lead++ {
			b := enc.EncodeToString(append(make([]byte, lead), s...))
			skip := []int{0, 2, 3}[lead] // characters that hold lead bytes
			end := len(b)
			if (lead+len(s))%3 != 0 {
				end-- // the last character holds bits of what follows
			}
			if end-skip >= 8 {
				out = append(out, []byte(b[skip:end]))
			}
		}
	}
	return out
}

// percentAll is s with every byte percent-encoded.
func percentAll(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		b.WriteString("%" + strings.ToUpper(hex.EncodeToString([]byte{s[i]})))
	}
	return b.String()
}

// dedupe lower-cases the forms and drops repeats and empty ones.
func dedupe(forms [][]byte) [][]byte {
	var out [][]byte
	for _, f := range forms {
		f = bytes.ToLower(f)
		if len(f) > 0 && !slices.ContainsFunc(out, func(o []byte) bool { return bytes.Equal(o, f) }) {
			out = append(out, f)
		}
	}
	// Longest first: the mask of an overlap covers the longer match.
	slices.SortStableFunc(out, func(a, b []byte) int { return len(b) - len(a) })
	return out
}

// lowerASCII writes the ASCII lower case of src into dst (same length).
func lowerASCII(dst, src []byte) {
	for i, c := range src {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		dst[i] = c
	}
}

// maskByte replaces every byte of a match.
const maskByte = '*'

// minTailMask: at the end of a stream, a held tail this long that begins
// a form is masked too (an upstream that cut the value short).
const minTailMask = 8

// redactor masks needles in a stream with bounded memory: it holds back
// only the longest tail of what it was given that could begin a needle
// (at most the longest needle less one byte), and never buffers more.
// Masks keep lengths, so a Content-Length stays true.
type redactor struct {
	needles [][]byte // lower-case
	held    []byte   // raw bytes not yet emitted
	masked  []bool   // which of held are masked
	lower   []byte   // scratch
}

func newRedactor(needles [][]byte) *redactor { return &redactor{needles: needles} }

// write takes p and returns the bytes that can go out now, masked. The
// result is valid until the next call.
func (r *redactor) write(p []byte) []byte {
	buf := append(r.held, p...)
	mask := append(r.masked, make([]bool, len(p))...)
	r.lower = slices.Grow(r.lower[:0], len(buf))[:len(buf)]
	lowerASCII(r.lower, buf)
	for _, n := range r.needles {
		for off := 0; ; {
			i := bytes.Index(r.lower[off:], n)
			if i < 0 {
				break
			}
			for j := off + i; j < off+i+len(n); j++ {
				mask[j] = true
			}
			off += i + 1
		}
	}
	keep := r.heldTail(r.lower)
	out := make([]byte, len(buf)-keep)
	for i := range out {
		out[i] = buf[i]
		if mask[i] {
			out[i] = maskByte
		}
	}
	r.held = append(r.held[:0:0], buf[len(buf)-keep:]...)
	r.masked = append(r.masked[:0:0], mask[len(buf)-keep:]...)
	return out
}

// heldTail is the length of the longest proper suffix of lower that is a
// prefix of a needle: bytes that a later write may complete into one.
func (r *redactor) heldTail(lower []byte) int {
	longest := 0
	for _, n := range r.needles {
		longest = max(longest, len(n)-1)
	}
	for k := min(longest, len(lower)); k > 0; k-- {
		tail := lower[len(lower)-k:]
		for _, n := range r.needles {
			if len(n) > k && n[0] == tail[0] && bytes.HasPrefix(n, tail) {
				return k
			}
		}
	}
	return 0
}

// close returns what is held, masked; a held tail of minTailMask bytes or
// more (the start of a form, cut short) is masked whole.
func (r *redactor) close() []byte {
	out := slices.Clone(r.held)
	for i := range out {
		if r.masked[i] || len(out) >= minTailMask {
			out[i] = maskByte
		}
	}
	r.held, r.masked = nil, nil
	return out
}

// redactString masks the needles in s.
func redactString(s string, needles [][]byte) string {
	r := newRedactor(needles)
	out := append(r.write([]byte(s)), r.close()...)
	return string(out)
}

// redactHeader masks the needles in h's names and values, in place.
func redactHeader(h http.Header, needles [][]byte) {
	for k, vs := range h {
		nk := redactString(k, needles)
		for i, v := range vs {
			vs[i] = redactString(v, needles)
		}
		if nk != k {
			delete(h, k)
			h[nk] = append(h[nk], vs...)
		}
	}
}

// redactingWriter is the ResponseWriter of a request to a credential
// host: headers (1xx, final, trailers) and body go out with the values'
// forms masked. It has no Unwrap, so nothing reaches the connection
// around it: a protocol switch (Hijack) is refused.
type redactingWriter struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	needles [][]byte
	body    *redactor
	wrote   bool
}

func newRedactingWriter(w http.ResponseWriter, needles [][]byte) *redactingWriter {
	return &redactingWriter{w: w, rc: http.NewResponseController(w), needles: needles, body: newRedactor(needles)}
}

func (w *redactingWriter) Header() http.Header { return w.w.Header() }

func (w *redactingWriter) WriteHeader(code int) {
	redactHeader(w.w.Header(), w.needles)
	if code >= 200 {
		w.wrote = true
	}
	w.w.WriteHeader(code)
}

func (w *redactingWriter) Write(p []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	if out := w.body.write(p); len(out) > 0 {
		if _, err := w.w.Write(out); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// FlushError flushes what can go out: never the held tail, which may be
// the start of a value.
func (w *redactingWriter) FlushError() error { return w.rc.Flush() }

func (w *redactingWriter) SetWriteDeadline(t time.Time) error { return w.rc.SetWriteDeadline(t) }

// finish writes the held tail and masks the trailers the handler set.
func (w *redactingWriter) finish() {
	if out := w.body.close(); len(out) > 0 {
		w.w.Write(out)
	}
	redactHeader(w.w.Header(), w.needles)
}

var _ io.Writer = (*redactingWriter)(nil)
