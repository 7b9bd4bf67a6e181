package egress

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

const (
	testSecret      = "sk-real-secret-0123456789"
	testPlaceholder = "bottlefile-placeholder-anthropic-5f1e0c"
)

// credentialRig is a gateway with one credential for example.com (an
// in-process TLS server on loopback, its certificate from httptest's test
// CA, which the gateway trusts through upstream_cas) and a client that
// trusts the bottle's CA and nothing else.
type credentialRig struct {
	tg       *testGateway
	upstream *httptest.Server
	port     int
	caCert   []byte
	caKey    []byte
	seen     chan http.Header
	protos   chan string
	// reply, when set, answers instead of the default ("key=...").
	reply func(w http.ResponseWriter, r *http.Request)
}

func newCredentialRig(t *testing.T) *credentialRig {
	t.Helper()
	return newCredentialRigWith(t, true)
}

// newCredentialRigWith is newCredentialRig with an upstream that offers
// HTTP/2 or not.
func newCredentialRigWith(t *testing.T, h2 bool) *credentialRig {
	t.Helper()
	rig := &credentialRig{seen: make(chan http.Header, 10), protos: make(chan string, 10)}
	rig.upstream = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rig.seen <- r.Header.Clone()
		rig.protos <- r.Proto
		if rig.reply != nil {
			rig.reply(w, r)
			return
		}
		fmt.Fprintf(w, "key=%s proto=%s host=%s", r.Header.Get("X-Api-Key"), r.Proto, r.Host)
	}))
	rig.upstream.EnableHTTP2 = h2
	rig.upstream.Config.ErrorLog = log.New(io.Discard, "", 0)
	rig.upstream.StartTLS()
	t.Cleanup(rig.upstream.Close)
	_, port, _ := net.SplitHostPort(rig.upstream.Listener.Addr().String())
	rig.port, _ = strconv.Atoi(port)

	var err error
	if rig.caCert, rig.caKey, err = NewCA("agent.coder", []string{"example.com"}); err != nil {
		t.Fatal(err)
	}
	res := newResolver("example.com", "127.0.0.1", "other.example", "127.0.0.1")
	rig.tg = startGateway(t, nil, res, fmt.Sprintf("example.com:%d", rig.port), fmt.Sprintf("other.example:%d", rig.port), fmt.Sprintf("127.0.0.1:%d", rig.port))
	rig.setValue(t, testSecret, "v1")
	return rig
}

func (rig *credentialRig) setValue(t *testing.T, value, version string) {
	t.Helper()
	err := rig.tg.SetCredentials(CredentialsFile{
		Version:     version,
		CACert:      string(rig.caCert),
		CAKey:       string(rig.caKey),
		UpstreamCAs: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: rig.upstream.Certificate().Raw})),
		Credentials: []Credential{{Name: "anthropic", Host: "example.com", Port: rig.port, Header: "x-api-key", Value: value, Placeholder: testPlaceholder}},
	})
	if err != nil {
		t.Fatal(err)
	}
}

// client is the agent: it trusts the bottle's CA only and goes through the
// gateway; h2 lets it negotiate HTTP/2 with the gateway.
func (rig *credentialRig) client(t *testing.T, h2 bool) *http.Client {
	t.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(rig.caCert) {
		t.Fatal("CA certificate does not parse")
	}
	proxy, _ := url.Parse("http://" + rig.tg.addr)
	tr := &http.Transport{Proxy: http.ProxyURL(proxy), TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: h2}
	if !h2 {
		tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 20 * time.Second}
}

func (rig *credentialRig) get(t *testing.T, c *http.Client, rawURL string, header http.Header) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, rawURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", rawURL, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, string(body)
}

// TestCredentialInjection: over HTTP/1.1 and HTTP/2 between the agent and
// the gateway (and HTTP/2 to the destination, which offers it), the
// destination sees the real value whatever the agent sent in the header,
// the agent sees the bottle's certificate for the host, and the decision
// log says a credential was injected, never its value.
func TestCredentialInjection(t *testing.T) {
	for _, tt := range []struct {
		name  string
		h2    bool
		proto string
	}{
		{"http1", false, "HTTP/1.1"},
		{"http2", true, "HTTP/2.0"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rig := newCredentialRig(t)
			c := rig.client(t, tt.h2)
			target := fmt.Sprintf("https://example.com:%d/v1/messages", rig.port)
			for i, sent := range []string{testPlaceholder, "", "something-else"} {
				h := http.Header{}
				if sent != "" {
					h.Set("X-Api-Key", sent)
				}
				resp, body := rig.get(t, c, target, h)
				if resp.StatusCode != 200 {
					t.Fatalf("request %d: %s: %s", i, resp.Status, body)
				}
				if resp.Proto != tt.proto {
					t.Errorf("agent to gateway: %s, want %s", resp.Proto, tt.proto)
				}
				if got := resp.TLS.PeerCertificates[0].Issuer.CommonName; got != "bottlefile egress CA agent.coder" {
					t.Errorf("agent saw a certificate issued by %q", got)
				}
				seen := <-rig.seen
				if got := seen.Values("X-Api-Key"); len(got) != 1 || got[0] != testSecret {
					t.Fatalf("request %d (sent %q): destination saw x-api-key %q, want the real value", i, sent, got)
				}
				if p := <-rig.protos; p != "HTTP/2.0" {
					t.Errorf("gateway to destination: %s, want HTTP/2.0", p)
				}
			}
			d := rig.tg.log.decision(t)
			if d.Outcome != OutcomeIntercepted || !d.Allowed {
				t.Errorf("first decision %+v, want intercepted", d)
			}
			d = rig.tg.log.decision(t)
			if d.Outcome != OutcomeCredentialInjected || !strings.Contains(d.Reason, `credential injected: "anthropic" in header X-Api-Key`) {
				t.Errorf("request decision %+v, want credential injected", d)
			}
			if strings.Contains(rig.tg.log.String(), testSecret) {
				t.Fatalf("the decision log holds the value:\n%s", rig.tg.log)
			}
		})
	}
}

// TestCredentialElsewhere: the placeholder sent to another allowed host
// (in a header of plain HTTP, or in the CONNECT itself) is refused and
// logged as an attempt to use the credential elsewhere; the destination
// sees nothing.
func TestCredentialElsewhere(t *testing.T) {
	rig := newCredentialRig(t)
	resp, body := rig.tg.raw(t, fmt.Sprintf("GET http://other.example:%d/ HTTP/1.1\r\nHost: other.example\r\nAuthorization: Bearer %s\r\n\r\n", rig.port, testPlaceholder))
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "an attempt to use the credential elsewhere") {
		t.Fatalf("plain request with the placeholder: %s %q", resp.Status, body)
	}
	d := rig.tg.log.decision(t)
	if d.Allowed || d.Outcome != OutcomeCredentialElsewhere || !strings.Contains(d.Reason, `credential "anthropic"`) {
		t.Fatalf("decision %+v, want credential-elsewhere", d)
	}
	resp, body = rig.tg.raw(t, fmt.Sprintf("CONNECT other.example:%d HTTP/1.1\r\nHost: other.example\r\nX-Token: %s\r\n\r\n", rig.port, testPlaceholder))
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("CONNECT with the placeholder: %s %q", resp.Status, body)
	}
	if d := rig.tg.log.decision(t); d.Outcome != OutcomeCredentialElsewhere {
		t.Fatalf("decision %+v, want credential-elsewhere", d)
	}
	select {
	case h := <-rig.seen:
		t.Fatalf("the destination got a request: %v", h)
	default:
	}
}

// TestCredentialRotation: new credentials take effect for the next request
// of an agent whose connection stays open.
func TestCredentialRotation(t *testing.T) {
	rig := newCredentialRig(t)
	c := rig.client(t, true)
	target := fmt.Sprintf("https://example.com:%d/", rig.port)
	rig.get(t, c, target, nil)
	if got := (<-rig.seen).Get("X-Api-Key"); got != testSecret {
		t.Fatalf("before: %q", got)
	}
	rig.setValue(t, "sk-rotated-9876543210", "v2")
	if v := rig.tg.CredentialsVersion(); v != "v2" {
		t.Fatalf("version %q", v)
	}
	resp, body := rig.get(t, c, target, nil)
	if resp.StatusCode != 200 {
		t.Fatalf("after: %s %s", resp.Status, body)
	}
	if got := (<-rig.seen).Get("X-Api-Key"); got != "sk-rotated-9876543210" {
		t.Fatalf("after rotation the destination saw %q", got)
	}
}

// TestCredentialUpstreamVerified: a destination whose certificate the
// gateway does not trust gets no request, and the credential never leaves.
func TestCredentialUpstreamVerified(t *testing.T) {
	rig := newCredentialRig(t)
	f := CredentialsFile{Version: "v", CACert: string(rig.caCert), CAKey: string(rig.caKey),
		Credentials: []Credential{{Name: "anthropic", Host: "example.com", Port: rig.port, Header: "x-api-key", Value: testSecret}}}
	if err := rig.tg.SetCredentials(f); err != nil {
		t.Fatal(err)
	}
	resp, _ := rig.get(t, rig.client(t, false), fmt.Sprintf("https://example.com:%d/", rig.port), nil)
	if resp.StatusCode != http.StatusBadGateway {
		t.Fatalf("untrusted destination: %s, want 502", resp.Status)
	}
	select {
	case h := <-rig.seen:
		t.Fatalf("the untrusted destination got a request: %v", h)
	default:
	}
}

// TestCredentialsFileWatched: the gateway command loads its credentials
// file; the event names the credentials and the version, never a value,
// and a file that does not parse is reported without its content.
func TestCredentialsFileWatched(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "credentials.json")
	ca, key, err := NewCA("agent.coder", []string{"api.anthropic.com"})
	if err != nil {
		t.Fatal(err)
	}
	data, err := CredentialsFile{Version: "abc", CACert: string(ca), CAKey: string(key),
		Credentials: []Credential{{Name: "anthropic", Host: "api.anthropic.com", Port: 443, Header: "x-api-key", Value: testSecret, Placeholder: testPlaceholder}}}.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	g := &Gateway{}
	events := newLineLog()
	w := newWatcher("", "", path, g, events)
	w.check()
	var ev RulesEvent
	if err := json.Unmarshal([]byte(events.next(t)), &ev); err != nil {
		t.Fatal(err)
	}
	if ev.Event != "credentials-loaded" || ev.Version != "abc" || len(ev.Credentials) != 1 || ev.Credentials[0] != "anthropic" {
		t.Fatalf("event %+v", ev)
	}
	if err := os.WriteFile(path, []byte(`{"version":"x","ca_cert":"`+testSecret), 0o600); err != nil {
		t.Fatal(err)
	}
	w.check()
	w.check()
	line := events.next(t)
	if !strings.Contains(line, "credentials-invalid") || strings.Contains(line, testSecret) {
		t.Fatalf("invalid file event %s", line)
	}
	if g.CredentialsVersion() != "abc" {
		t.Fatalf("an invalid file replaced the credentials in force")
	}
}
