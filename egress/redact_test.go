package egress

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

var testCred = Credential{Name: "anthropic", Host: "example.com", Port: 443, Header: "Authorization", Prefix: "Bearer ", Value: testSecret, Placeholder: testPlaceholder}

// reflections are the forms an echoing upstream gives the value (and the
// header as injected), each inside a text of its own.
func reflections() map[string]string {
	hdr := testCred.Prefix + testCred.Value
	b64 := func(enc *base64.Encoding, lead, s string) string { return enc.EncodeToString([]byte(lead + s + "}")) }
	return map[string]string{
		"verbatim":            `{"headers":{"authorization":"` + hdr + `"}}`,
		"value alone":         "key=" + testSecret + "&x=1",
		"upper case":          "KEY: " + strings.ToUpper(testSecret),
		"query escape":        "u=" + url.QueryEscape(hdr),
		"path escape":         "/echo/" + url.PathEscape(hdr) + "/",
		"every byte escaped":  "x=" + percentAll(testSecret),
		"lower-case escapes":  "x=" + strings.ToLower(percentAll(hdr)),
		"base64 std":          "b=" + base64.StdEncoding.EncodeToString([]byte(testSecret)),
		"base64 url":          "b=" + base64.URLEncoding.EncodeToString([]byte(hdr)),
		"base64 inside, +0":   b64(base64.StdEncoding, `{"a":"`, hdr),
		"base64 inside, +1":   b64(base64.StdEncoding, `{"ab":"`, hdr),
		"base64 inside, +2":   b64(base64.RawURLEncoding, `{"abc":"`, testSecret),
		"basic auth":          "Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte("user:"+testSecret)),
		"hex":                 "h=" + hex.EncodeToString([]byte(testSecret)),
		"twice in a row":      testSecret + testSecret,
		"overlapping forms":   hdr + " " + url.QueryEscape(testSecret),
		"at the very end":     "end " + testSecret,
		"at the very start":   testSecret + " start",
		"nothing but the key": testSecret,
	}
}

// leaks reports which form of the value out still holds, "" for none:
// the value in any case, its base64 (decoded at every offset) or hex, its
// percent-encoding decoded.
func leaks(out string) string {
	low := strings.ToLower(out)
	if strings.Contains(low, strings.ToLower(testSecret)) {
		return "value"
	}
	if dec, err := url.PathUnescape(out); err == nil && strings.Contains(strings.ToLower(dec), strings.ToLower(testSecret)) {
		return "percent-encoded"
	}
	if dec, err := url.QueryUnescape(out); err == nil && strings.Contains(dec, testSecret) {
		return "query-encoded"
	}
	if strings.Contains(low, hex.EncodeToString([]byte(testSecret))) {
		return "hex"
	}
	for _, enc := range []*base64.Encoding{base64.RawStdEncoding, base64.RawURLEncoding} {
		for start := 0; start < len(out); start++ {
			for end := start + 4; end <= len(out); end += 4 {
				s := strings.TrimRight(out[start:end], "=")
				if dec, err := enc.DecodeString(s); err == nil && bytes.Contains(dec, []byte(testSecret)) {
					return "base64"
				}
			}
		}
	}
	return ""
}

// TestRedactorAcrossChunks: every reflection, fed in chunks of every size
// (so every chunk boundary cuts the form somewhere), comes out the same
// length, with no form of the value left and the text around it intact.
func TestRedactorAcrossChunks(t *testing.T) {
	needles := valueForms(testCred)
	for name, in := range reflections() {
		t.Run(name, func(t *testing.T) {
			if leaks(in) == "" {
				t.Fatalf("control: the input %q holds no form of the value", in)
			}
			for size := 1; size <= len(in); size++ {
				r := newRedactor(needles)
				var out []byte
				for i := 0; i < len(in); i += size {
					out = append(out, r.write([]byte(in[i:min(i+size, len(in))]))...)
					if len(r.held) > longestNeedle(needles)-1 {
						t.Fatalf("chunk %d: holds %d bytes, more than the longest form less one (%d)", size, len(r.held), longestNeedle(needles)-1)
					}
				}
				out = append(out, r.close()...)
				if len(out) != len(in) {
					t.Fatalf("chunks of %d: %d bytes out for %d in", size, len(out), len(in))
				}
				if l := leaks(string(out)); l != "" {
					t.Fatalf("chunks of %d: the %s value is in %q", size, l, out)
				}
				if size == 1 && name == "value alone" && string(out[:4]) != "key=" || name == "value alone" && !strings.HasSuffix(string(out), "&x=1") {
					t.Fatalf("chunks of %d: the text around the value changed: %q", size, out)
				}
			}
		})
	}
}

func longestNeedle(ns [][]byte) int {
	n := 0
	for _, x := range ns {
		n = max(n, len(x))
	}
	return n
}

// TestRedactorEmitsAtOnce: text that cannot begin a form goes out with
// the write that brought it (a stream of events is not held back); only a
// tail that begins a form waits for the next write.
func TestRedactorEmitsAtOnce(t *testing.T) {
	r := newRedactor(valueForms(testCred))
	for _, tt := range []struct{ in, want string }{
		{"data: {\"delta\":\"hello\"}\n\n", "data: {\"delta\":\"hello\"}\n\n"},
		{"data: " + testSecret[:5], "data: "},
		{testSecret[5:] + "\n\n", strings.Repeat("*", len(testSecret)) + "\n\n"},
		{"plain.\n", "plain.\n"},
	} {
		if got := string(r.write([]byte(tt.in))); got != tt.want {
			t.Errorf("write(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	if got := string(r.close()); got != "" {
		t.Errorf("close: %q held", got)
	}
}

// TestRedactHeader masks names and values.
func TestRedactHeader(t *testing.T) {
	h := http.Header{
		"X-Echo-Authorization": {"Bearer " + testSecret},
		"X-" + testSecret:      {"name"},
		"Content-Type":         {"application/json"},
	}
	redactHeader(h, valueForms(testCred))
	b, _ := json.Marshal(h)
	if l := leaks(string(b)); l != "" {
		t.Fatalf("header still holds the %s value: %s", l, b)
	}
	if h.Get("Content-Type") != "application/json" {
		t.Fatalf("other headers changed: %v", h)
	}
}

// TestCredentialHostReflects is deliverable 2 against the gateway: an
// upstream that echoes the request (headers and body, in several forms,
// in its headers, body and trailers) over HTTP/1.1 and HTTP/2 gives the
// agent none of them; a gzip answer is decoded and masked, one in an
// encoding the gateway cannot decode is refused; TRACE and TRACK are
// refused and logged.
func TestCredentialHostReflects(t *testing.T) {
	for _, tt := range []struct {
		name string
		h2   bool
	}{{"http1", false}, {"http2", true}} {
		t.Run(tt.name, func(t *testing.T) {
			rig := newCredentialRig(t)
			rig.reply = func(w http.ResponseWriter, r *http.Request) {
				v := r.Header.Get("X-Api-Key")
				body, _ := io.ReadAll(r.Body)
				w.Header().Set("Trailer", "X-Echo-Trailer")
				w.Header().Set("X-Echo-Key", v)
				w.Header().Set("X-Echo-Accept-Encoding", r.Header.Get("Accept-Encoding")+"|"+r.Header.Get("Range"))
				if r.URL.Query().Get("gzip") != "" {
					w.Header().Set("Content-Encoding", r.URL.Query().Get("gzip"))
					zw := gzip.NewWriter(w)
					fmt.Fprintf(zw, "zipped %s", v)
					zw.Close()
					return
				}
				fmt.Fprintf(w, "key=%s\nb64=%s\npct=%s\nbody=%s\n", v, base64.StdEncoding.EncodeToString([]byte(v)), percentAll(v), body)
				w.(http.Flusher).Flush()
				fmt.Fprintf(w, "after a flush: %s", v)
				w.Header().Set("X-Echo-Trailer", v)
			}
			c := rig.client(t, tt.h2)
			target := fmt.Sprintf("https://example.com:%d/echo", rig.port)
			req, _ := http.NewRequest(http.MethodPost, target, strings.NewReader("agent body"))
			req.Header.Set("X-Api-Key", testPlaceholder)
			req.Header.Set("Accept-Encoding", "gzip, br")
			req.Header.Set("Range", "bytes=4-10")
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if got := (<-rig.seen).Get("X-Api-Key"); got != testSecret {
				t.Fatalf("control: the upstream saw %q, not the value", got)
			}
			<-rig.protos
			all := fmt.Sprintf("%v %v %s", resp.Header, resp.Trailer, body)
			if l := leaks(all); l != "" {
				t.Fatalf("the agent got the %s value:\n%s", l, all)
			}
			if !strings.Contains(string(body), "body=agent body") || !strings.Contains(string(body), "key="+strings.Repeat("*", len(testSecret))) {
				t.Fatalf("the answer is not the echo, masked:\n%s", body)
			}
			if got := resp.Header.Get("X-Echo-Accept-Encoding"); got != "identity|" {
				t.Errorf("the upstream saw Accept-Encoding|Range %q, want identity and none", got)
			}
			if resp.Trailer.Get("X-Echo-Trailer") == "" {
				t.Errorf("control: no trailer came through: %v", resp.Trailer)
			}

			// A compressed answer anyway: decoded, masked.
			resp, text := rig.get(t, c, target+"?gzip=gzip", nil)
			<-rig.seen
			<-rig.protos
			if resp.StatusCode != 200 || text != "zipped "+strings.Repeat("*", len(testSecret)) {
				t.Fatalf("gzip answer: %s %q", resp.Status, text)
			}
			resp, text = rig.get(t, c, target+"?gzip=br", nil)
			<-rig.seen
			<-rig.protos
			if resp.StatusCode != http.StatusBadGateway || leaks(text) != "" || !strings.Contains(text, `Content-Encoding "br"`) {
				t.Fatalf("an answer in an encoding the gateway cannot decode: %s %q", resp.Status, text)
			}

			for _, m := range []string{"TRACE", "TRACK"} {
				req, _ := http.NewRequest(m, target, nil)
				resp, err := c.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(b), m+" to a credential host is refused") {
					t.Fatalf("%s: %s %q", m, resp.Status, b)
				}
				rig.tg.log.waitFor(t, `"outcome":"denied"`, m+" to a credential host is refused")
			}
			select {
			case h := <-rig.seen:
				t.Fatalf("a TRACE reached the upstream: %v", h)
			default:
			}
			if strings.Contains(rig.tg.log.String(), testSecret) {
				t.Fatalf("the decision log holds the value")
			}
		})
	}
}

// TestCredentialHostUpgradeRefused: a protocol switch to a credential host
// would carry bytes the gateway does not mask.
func TestCredentialHostUpgradeRefused(t *testing.T) {
	rig := newCredentialRig(t)
	resp, body := rig.get(t, rig.client(t, false), fmt.Sprintf("https://example.com:%d/ws", rig.port), http.Header{"Upgrade": {"websocket"}, "Connection": {"Upgrade"}})
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "protocol switch") {
		t.Fatalf("upgrade: %s %q", resp.Status, body)
	}
}

// TestCredentialHostMalformedAnswer: an answer that does not parse, the
// value in it, is refused 502 with the error masked, in the answer and
// in the log.
func TestCredentialHostMalformedAnswer(t *testing.T) {
	rig := newCredentialRigWith(t, false)
	rig.reply = func(w http.ResponseWriter, r *http.Request) {
		c, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		defer c.Close()
		fmt.Fprintf(c, "%s 200 OK\r\n\r\n", r.Header.Get("X-Api-Key"))
	}
	resp, body := rig.get(t, rig.client(t, false), fmt.Sprintf("https://example.com:%d/", rig.port), nil)
	<-rig.seen
	<-rig.protos
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(body, "malformed HTTP") {
		t.Fatalf("control: a malformed answer gave %s %q", resp.Status, body)
	}
	rig.tg.log.waitFor(t, "malformed HTTP")
	if l := leaks(body + rig.tg.log.String()); l != "" {
		t.Fatalf("the %s value is in the answer or the log:\n%s\n%s", l, body, rig.tg.log)
	}
}
