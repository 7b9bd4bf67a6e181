package egress

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"slices"
)

// Placeholders sent elsewhere. An agent holds a credential's placeholder;
// sending it to another host is the sign of an attempt to use the
// credential there (a prompt-injected agent, a confused tool). The
// gateway looks for it in the request line, the Host, every header and
// the body of a request it can read (plain HTTP, and requests inside an
// intercepted tunnel), in any case, percent-encoded (up to twice), in
// base64 and hex, and split between two header values. A CONNECT
// tunnel's encrypted bytes are out of its sight.

// maxPercentRounds bounds how many times percent-encoding is undone.
const maxPercentRounds = 2

// placeholderNeedles are the forms of c's placeholder; nil without one.
func placeholderNeedles(c Credential) [][]byte {
	if c.Placeholder == "" {
		return nil
	}
	return placeholderForms(c.Placeholder)
}

// normalized is s lower-cased, and lower-cased after undoing percent-
// encoding once and twice: the texts the forms are looked for in. The
// raw text is kept, since decoding can eat a form's first byte ("%4" +
// form).
func normalized(s []byte) [][]byte {
	out := [][]byte{bytes.ToLower(s)}
	cur := s
	for range maxPercentRounds {
		var d pctDecoder
		next := append(d.feed(cur), d.carry...)
		if bytes.Equal(next, cur) {
			break
		}
		out = append(out, bytes.ToLower(next))
		cur = next
	}
	return out
}

// carriesForm reports whether s holds one of the needles, in any of its
// normalized texts.
func carriesForm(s string, needles [][]byte) bool {
	for _, t := range normalized([]byte(s)) {
		for _, n := range needles {
			if bytes.Contains(t, n) {
				return true
			}
		}
	}
	return false
}

// splitAcross reports whether two of the values, one ending with the
// start of a needle and another starting with its rest, put a needle
// together (a client, or a server that joins header values, would).
func splitAcross(values []string, needles [][]byte) bool {
	texts := make([][][]byte, len(values))
	for i, v := range values {
		texts[i] = normalized([]byte(v))
	}
	for _, n := range needles {
		// ends[k]: the values ending with n[:k]; starts[k]: the values
		// starting with n[k:].
		ends, starts := map[int][]int{}, map[int][]int{}
		for i, ts := range texts {
			for _, t := range ts {
				for k := 1; k < len(n); k++ {
					if len(t) >= k && t[len(t)-1] == n[k-1] && bytes.HasSuffix(t, n[:k]) {
						ends[k] = append(ends[k], i)
					}
					if len(t) >= len(n)-k && t[0] == n[k] && bytes.HasPrefix(t, n[k:]) {
						starts[k] = append(starts[k], i)
					}
				}
			}
		}
		for k, is := range ends {
			for _, j := range starts[k] {
				if slices.ContainsFunc(is, func(i int) bool { return i != j }) {
					return true
				}
			}
		}
	}
	return false
}

// carries reports whether r's request line, Host or headers hold one of
// the needles, in any form.
func carries(r *http.Request, needles [][]byte) bool {
	values := []string{r.RequestURI, r.Host, r.URL.String()}
	for k, vs := range r.Header {
		values = append(values, k)
		values = append(values, vs...)
	}
	for _, v := range values {
		if carriesForm(v, needles) {
			return true
		}
	}
	// Split: between header values (not the request line, which repeats
	// in r.URL).
	return splitAcross(values[3:], needles)
}

// pctDecoder undoes percent-encoding in a stream; carry holds a "%" or
// "%X" cut at the end of a chunk.
type pctDecoder struct {
	carry []byte
}

func (d *pctDecoder) feed(p []byte) []byte {
	buf := append(d.carry, p...)
	d.carry = nil
	out := make([]byte, 0, len(buf))
	for i := 0; i < len(buf); i++ {
		c := buf[i]
		if c != '%' {
			out = append(out, c)
			continue
		}
		switch {
		case i+2 < len(buf) && isHex(buf[i+1]) && isHex(buf[i+2]):
			out = append(out, unhex(buf[i+1])<<4|unhex(buf[i+2]))
			i += 2
		case i+1 == len(buf) || i+2 == len(buf) && isHex(buf[i+1]):
			d.carry = slices.Clone(buf[i:])
			return out
		default:
			out = append(out, c)
		}
	}
	return out
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c <= 'F':
		return c - 'A' + 10
	}
	return c - 'a' + 10
}

// scanWindow looks for needles in a stream, keeping the last bytes that
// could begin one.
type scanWindow struct {
	tail []byte
}

func (w *scanWindow) feed(p []byte, needles [][]byte, keep int) bool {
	buf := append(w.tail, bytes.ToLower(p)...)
	found := false
	for _, n := range needles {
		if bytes.Contains(buf, n) {
			found = true
			break
		}
	}
	if len(buf) > keep {
		buf = buf[len(buf)-keep:]
	}
	w.tail = append(w.tail[:0:0], buf...)
	return found
}

// streamDetector looks for the forms of placeholders in a body as it
// streams: raw, and percent-decoded once and twice, with bounded memory.
type streamDetector struct {
	creds   []Credential
	needles [][][]byte // per credential
	keep    int
	dec     [maxPercentRounds]pctDecoder
	win     [maxPercentRounds + 1][]scanWindow // per text, per credential
}

func newStreamDetector(creds []Credential) *streamDetector {
	d := &streamDetector{creds: creds}
	for _, c := range creds {
		ns := placeholderNeedles(c)
		d.needles = append(d.needles, ns)
		for _, n := range ns {
			d.keep = max(d.keep, len(n)-1)
		}
	}
	for i := range d.win {
		d.win[i] = make([]scanWindow, len(creds))
	}
	return d
}

// feed returns the credential whose placeholder the stream now holds, nil
// for none.
func (d *streamDetector) feed(p []byte) *Credential {
	text := p
	for round := 0; ; round++ {
		for i := range d.creds {
			if d.win[round][i].feed(text, d.needles[i], d.keep) {
				return &d.creds[i]
			}
		}
		if round == maxPercentRounds {
			return nil
		}
		text = d.dec[round].feed(text)
	}
}

// errPlaceholderInBody ends the forwarding of a request whose body
// carries a placeholder.
var errPlaceholderInBody = errors.New("the request body carries a credential's placeholder")

// scannedBody is a request body read through a streamDetector: when a
// placeholder shows, the read fails (the request to the destination is
// cut short) and found says whose.
type scannedBody struct {
	io.ReadCloser
	det      *streamDetector
	found    *Credential
	reported bool // the refusal is logged
}

func (b *scannedBody) Read(p []byte) (int, error) {
	if b.found != nil {
		return 0, errPlaceholderInBody
	}
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		if c := b.det.feed(p[:n]); c != nil {
			b.found = c
			return 0, errPlaceholderInBody
		}
	}
	return n, err
}
