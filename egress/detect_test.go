package egress

import (
	"bufio"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
)

// placeholderCarriers are requests to other.example that carry the
// placeholder in a form the agent chose; want is whether the gateway
// must see it.
func placeholderCarriers(port int) []struct {
	name   string
	head   string // header lines, each ending \r\n
	path   string
	body   string
	caught bool
} {
	p := testPlaceholder
	b64 := base64.StdEncoding.EncodeToString
	type carrier = struct {
		name   string
		head   string
		path   string
		body   string
		caught bool
	}
	return []carrier{
		{"verbatim header", "X-Key: " + p + "\r\n", "/", "", true},
		{"upper case", "X-Key: " + strings.ToUpper(p) + "\r\n", "/", "", true},
		{"percent-encoded query", "", "/?k=" + percentAll(p), "", true},
		{"percent-encoded twice", "", "/?k=" + url.QueryEscape(percentAll(p)), "", true},
		{"percent-encoded header", "Cookie: k=" + strings.ToLower(percentAll(p)) + "\r\n", "/", "", true},
		{"base64 header", "Authorization: Basic " + b64([]byte("u:"+p)) + "\r\n", "/", "", true},
		{"base64 url in path", "", "/" + base64.RawURLEncoding.EncodeToString([]byte("xy"+p)), "", true},
		{"hex", "X-H: " + hex.EncodeToString([]byte(p)) + "\r\n", "/", "", true},
		{"split across two headers", "X-A: " + p[:20] + "\r\nX-B: " + p[20:] + "\r\n", "/", "", true},
		{"split across two values", "X-A: " + p[:7] + "\r\nX-A: " + p[7:] + "\r\n", "/", "", true},
		{"split, each half encoded", "X-A: " + percentAll(p[:12]) + "\r\nX-B: " + p[12:] + "\r\n", "/", "", true},
		{"body", "Content-Type: application/json\r\n", "/", `{"key":"` + p + `"}`, true},
		{"body, base64", "", "/", "data=" + b64([]byte(`{"k":"`+p+`"}`)), true},
		{"body, percent-encoded", "", "/", "k=" + url.QueryEscape(strings.ToUpper(p)), true},
		{"body, long, late", "", "/", strings.Repeat("x", 70000) + p, true},
		// Controls: what is not the placeholder passes.
		{"half the placeholder", "X-A: " + p[:20] + "\r\n", "/", "", false},
		{"the prefix of every placeholder", "X-A: bottlefile-placeholder-\r\nX-B: bottlefile-placeholder-\r\n", "/", "bottlefile-placeholder-", false},
		{"nothing", "", "/", "hello", false},
	}
}

// TestPlaceholderElsewhere is deliverable 3: a placeholder sent to
// another host is refused and logged as credential-elsewhere in every
// form (header, URL, body; any case, percent-encoded, base64, hex, split
// across headers), and nothing that only resembles it is.
func TestPlaceholderElsewhere(t *testing.T) {
	rig := newCredentialRig(t)
	rig.reply = func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") }
	// other.example over plain HTTP: an upstream of its own.
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		fmt.Fprint(w, "ok")
	}))
	t.Cleanup(upstream.Close)
	port := upstream.Listener.Addr().(*net.TCPAddr).Port
	rig.tg.SetRules(mustRules(t, fmt.Sprintf("other.example:%d", port), fmt.Sprintf("127.0.0.1:%d", port)))
	for _, c := range placeholderCarriers(port) {
		t.Run(c.name, func(t *testing.T) {
			method := "GET"
			if c.body != "" {
				method = "POST"
			}
			req := fmt.Sprintf("%s http://other.example:%d%s HTTP/1.1\r\nHost: other.example\r\n%sContent-Length: %d\r\nConnection: close\r\n\r\n%s", method, port, c.path, c.head, len(c.body), c.body)
			resp, body := rig.tg.raw(t, req)
			if !c.caught {
				if resp.StatusCode != 200 {
					t.Fatalf("control: %s %q", resp.Status, body)
				}
				return
			}
			if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "an attempt to use the credential elsewhere") {
				t.Fatalf("%s %q, want 403 credential elsewhere", resp.Status, body)
			}
			rig.tg.log.waitFor(t, `"outcome":"credential-elsewhere"`)
		})
	}
}

// TestPlaceholderForms is the detector alone, request by request.
func TestPlaceholderForms(t *testing.T) {
	needles := placeholderForms(testPlaceholder)
	for _, c := range placeholderCarriers(80) {
		if c.body != "" {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			r, err := http.ReadRequest(bufio.NewReader(strings.NewReader("GET " + c.path + " HTTP/1.1\r\nHost: other.example\r\n" + c.head + "\r\n")))
			if err != nil {
				t.Fatal(err)
			}
			if got := carries(r, needles); got != c.caught {
				t.Fatalf("carries = %v, want %v", got, c.caught)
			}
		})
	}
}

// TestStreamDetectorAcrossChunks: a body carrying the placeholder in any
// form is caught whatever the chunking; with bounded memory.
func TestStreamDetectorAcrossChunks(t *testing.T) {
	for _, c := range placeholderCarriers(80) {
		if c.body == "" || strings.Contains(c.name, "long") {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			for size := 1; size <= len(c.body); size++ {
				d := newStreamDetector([]Credential{testCred})
				var found *Credential
				for i := 0; i < len(c.body) && found == nil; i += size {
					found = d.feed([]byte(c.body[i:min(i+size, len(c.body))]))
					for _, ws := range d.win {
						if len(ws[0].tail) > d.keep {
							t.Fatalf("holds %d bytes, more than %d", len(ws[0].tail), d.keep)
						}
					}
				}
				if (found != nil) != c.caught {
					t.Fatalf("chunks of %d: found %v, want %v", size, found != nil, c.caught)
				}
			}
		})
	}
}

// TestPctDecoder undoes percent-encoding cut anywhere.
func TestPctDecoder(t *testing.T) {
	in := "a%41%4g%%2541z%"
	want := "aA%4g%%41z%"
	for size := 1; size <= len(in); size++ {
		var d pctDecoder
		var out []byte
		for i := 0; i < len(in); i += size {
			out = append(out, d.feed([]byte(in[i:min(i+size, len(in))]))...)
		}
		out = append(out, d.carry...)
		if string(out) != want {
			t.Fatalf("chunks of %d: %q, want %q", size, out, want)
		}
	}
}

// TestPlaceholderOfAnotherCredentialInTunnel: inside the tunnel of one
// credential host, a body carrying another credential's placeholder is
// refused as credential-elsewhere; its own placeholder passes.
func TestPlaceholderOfAnotherCredentialInTunnel(t *testing.T) {
	rig := newCredentialRig(t)
	rig.reply = func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		fmt.Fprint(w, "ok")
	}
	const otherPlaceholder = "bottlefile-placeholder-github-0123456789abcdef"
	err := rig.tg.SetCredentials(CredentialsFile{
		Version: "v2", CACert: string(rig.caCert), CAKey: string(rig.caKey),
		UpstreamCAs: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: rig.upstream.Certificate().Raw})),
		Credentials: []Credential{
			{Name: "anthropic", Host: "example.com", Port: rig.port, Header: "x-api-key", Value: testSecret, Placeholder: testPlaceholder},
			{Name: "github", Host: "other.example", Port: rig.port, Header: "authorization", Prefix: "token ", Value: "ghp-other-secret-value", Placeholder: otherPlaceholder},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	c := rig.client(t, true)
	post := func(body string) (*http.Response, string) {
		resp, err := c.Post(fmt.Sprintf("https://example.com:%d/", rig.port), "text/plain", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	if resp, body := post("mine: " + testPlaceholder); resp.StatusCode != 200 {
		t.Fatalf("control, its own placeholder: %s %q", resp.Status, body)
	}
	<-rig.seen
	<-rig.protos
	resp, body := post(strings.Repeat("padding ", 5000) + base64.StdEncoding.EncodeToString([]byte(otherPlaceholder)))
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, `credential "github"`) {
		t.Fatalf("another credential's placeholder in the body: %s %q", resp.Status, body)
	}
	rig.tg.log.waitFor(t, `"outcome":"credential-elsewhere"`, `credential \"github\"`)
}

// TestPlaceholderInBodyAnsweredAtOnce: a destination that answers without
// reading the body (as TestEscape's allowed host does) still never gets a
// request whose small body carries the placeholder: the gateway reads the
// body's start before it connects and refuses it with a 403. A body past
// what it reads ahead is still cut short when the placeholder shows,
// for a destination that reads it.
func TestPlaceholderInBodyAnsweredAtOnce(t *testing.T) {
	rig := newCredentialRig(t)
	seen := make(chan int, 10)
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/reads" {
			n, _ := io.Copy(io.Discard, r.Body)
			seen <- int(n)
		} else {
			seen <- -1
		}
		fmt.Fprint(w, "answered")
	}))
	t.Cleanup(plain.Close)
	_, port, _ := net.SplitHostPort(plain.Listener.Addr().String())
	rig.tg.SetRules(mustRules(t, "127.0.0.1:"+port))
	post := func(path, body string) (*http.Response, string) {
		t.Helper()
		return rig.tg.raw(t, fmt.Sprintf("POST http://127.0.0.1:%s%s HTTP/1.1\r\nHost: 127.0.0.1:%s\r\nContent-Length: %d\r\n\r\n%s", port, path, port, len(body), body))
	}

	if resp, body := post("/", `{"note":"nothing here"}`); resp.StatusCode != http.StatusOK || body != "answered" {
		t.Fatalf("control: %s %q", resp.Status, body)
	}
	<-seen
	rig.tg.log.decision(t)
	resp, body := post("/", `{"token":"`+testPlaceholder+`"}`)
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "an attempt to use the credential elsewhere") {
		t.Fatalf("a small body with the placeholder, to a destination that answers at once: %s %q", resp.Status, body)
	}
	if d := rig.tg.log.decision(t); d.Outcome != OutcomeCredentialElsewhere {
		t.Fatalf("decision %+v, want credential-elsewhere", d)
	}
	select {
	case n := <-seen:
		t.Fatalf("the destination got the request (%d)", n)
	default:
	}

	// Past the read-ahead: forwarded until the placeholder shows, then cut.
	big := strings.Repeat("padding ", scanAhead/8+1000) + testPlaceholder
	post("/reads", big)
	select {
	case n := <-seen:
		if n >= len(big)-len(testPlaceholder) {
			t.Errorf("the destination read %d bytes of a %d-byte body whose placeholder starts at %d", n, len(big), len(big)-len(testPlaceholder))
		}
	case <-time.After(10 * time.Second):
	}
	rig.tg.log.waitFor(t, `"outcome":"credential-elsewhere"`)
}
