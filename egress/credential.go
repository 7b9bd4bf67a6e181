package egress

import (
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Credential is a secret the gateway puts into the requests to one host,
// so that the agent never holds it: for a CONNECT to Host:Port, the
// gateway terminates the agent's TLS with a certificate for Host signed by
// the bottle's CA, sets Header to Prefix+Value in every request (whatever
// the agent sent there), and forwards the request over verified TLS to the
// destination it checked. The agent holds Placeholder instead (in an
// environment variable); a request that carries any credential's
// placeholder anywhere else is refused and logged as an attempt to use the
// credential elsewhere.
type Credential struct {
	Name        string `json:"name"`
	Host        string `json:"host"` // lower-case name, or an address
	Port        int    `json:"port"`
	Header      string `json:"header"`
	Prefix      string `json:"prefix,omitempty"`
	Value       string `json:"value"`
	Placeholder string `json:"placeholder,omitempty"`

	// The forms the gateway masks in what the host sends back (valueForms)
	// and looks for in requests elsewhere (placeholderForms), made once by
	// SetCredentials.
	valueForms       [][]byte
	placeholderForms [][]byte
}

// CredentialsFile is the file the docker driver copies into the gateway
// container (readable by the gateway's user only): the bottle's CA, its
// key, the CAs the gateway trusts for the destinations' certificates
// besides the system's, and the credentials. Version is opaque: the
// gateway reports it as it loads the file ("credentials-loaded"), never
// anything else of it.
type CredentialsFile struct {
	Version     string       `json:"version"`
	CACert      string       `json:"ca_cert"` // PEM
	CAKey       string       `json:"ca_key"`  // PEM, PKCS #8
	UpstreamCAs string       `json:"upstream_cas,omitempty"`
	Credentials []Credential `json:"credentials"`
}

// Marshal returns the file's JSON.
func (f CredentialsFile) Marshal() ([]byte, error) {
	if f.Credentials == nil {
		f.Credentials = []Credential{}
	}
	return json.Marshal(f)
}

// UnmarshalCredentialsFile parses a credentials file.
func UnmarshalCredentialsFile(data []byte) (CredentialsFile, error) {
	var f CredentialsFile
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		// The decoder's error may quote the file: say only where.
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return CredentialsFile{}, fmt.Errorf("credentials file: invalid JSON at offset %d", se.Offset)
		}
		return CredentialsFile{}, errors.New("credentials file: not a credentials file")
	}
	return f, nil
}

// credset is the credentials in force.
type credset struct {
	version string
	trust   string                  // the CA and upstream CAs: a change closes the intercepted tunnels
	byDest  map[string][]Credential // "host:port"
	all     []Credential
	ca      *x509.Certificate
	caKey   *ecdsa.PrivateKey
	roots   *x509.CertPool // for the destinations
	leafKey *ecdsa.PrivateKey

	mu     sync.Mutex
	leaves map[string]*tls.Certificate // by host
}

// SetCredentials puts the credentials of f in force (an empty f removes
// them). The next request of an open intercepted tunnel carries the new
// values; a tunnel whose host has no credential any more, or whose CA
// changed, is closed.
func (g *Gateway) SetCredentials(f CredentialsFile) error {
	if len(f.Credentials) == 0 {
		g.creds.Store(nil)
		g.revokeIntercepted(nil)
		return nil
	}
	cs := &credset{version: f.Version, trust: f.CACert + f.UpstreamCAs, byDest: map[string][]Credential{}, leaves: map[string]*tls.Certificate{}}
	block, _ := pem.Decode([]byte(f.CACert))
	if block == nil {
		return errors.New("credentials: no CA certificate")
	}
	ca, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return fmt.Errorf("credentials: CA certificate: %v", err)
	}
	block, _ = pem.Decode([]byte(f.CAKey))
	if block == nil {
		return errors.New("credentials: no CA key")
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return errors.New("credentials: the CA key does not parse")
	}
	key, ok := k.(*ecdsa.PrivateKey)
	if !ok || !key.PublicKey.Equal(ca.PublicKey) {
		return errors.New("credentials: the CA key is not the CA certificate's ECDSA key")
	}
	cs.ca, cs.caKey = ca, key
	if cs.leafKey, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
		return err
	}
	cs.roots, err = x509.SystemCertPool()
	if err != nil || cs.roots == nil {
		cs.roots = x509.NewCertPool()
	}
	if f.UpstreamCAs != "" && !cs.roots.AppendCertsFromPEM([]byte(f.UpstreamCAs)) {
		return errors.New("credentials: upstream_cas holds no certificate")
	}
	for _, c := range f.Credentials {
		c.Host = strings.TrimSuffix(asciiLower(c.Host), ".")
		c.Header = http.CanonicalHeaderKey(c.Header)
		if c.Port == 0 {
			c.Port = 443
		}
		if c.Name == "" || c.Host == "" || c.Header == "" || c.Value == "" {
			return fmt.Errorf("credentials: credential %q lacks a host, header or value", c.Name)
		}
		if strings.ContainsAny(c.Prefix+c.Value, "\r\n\x00") {
			return fmt.Errorf("credentials: credential %q has a line break in its value", c.Name)
		}
		if c.Placeholder != "" && len(c.Placeholder) < 16 {
			return fmt.Errorf("credentials: credential %q has a placeholder shorter than 16 bytes", c.Name)
		}
		c.valueForms, c.placeholderForms = valueForms(c), placeholderNeedles(c)
		key := net.JoinHostPort(c.Host, strconv.Itoa(c.Port))
		cs.byDest[key] = append(cs.byDest[key], c)
		cs.all = append(cs.all, c)
	}
	g.creds.Store(cs)
	g.revokeIntercepted(cs)
	return nil
}

// CredentialsVersion is the Version of the credentials in force; "" for
// none.
func (g *Gateway) CredentialsVersion() string {
	if cs := g.creds.Load(); cs != nil {
		return cs.version
	}
	return ""
}

// revokeIntercepted closes the intercepted tunnels cs (the credentials now
// in force) no longer serves: their host has no credential, or they show
// a certificate of another CA, or trust other destinations' CAs.
func (g *Gateway) revokeIntercepted(cs *credset) int {
	g.tunnelMu.Lock()
	defer g.tunnelMu.Unlock()
	n := 0
	for t := range g.tunnels {
		if t.intercepted && (cs == nil || cs.trust != t.trust || len(cs.credentialsFor(target{host: t.host, port: t.port})) == 0) {
			t.close()
			delete(g.tunnels, t)
			n++
		}
	}
	return n
}

// credentialsFor are the credentials of t, nil for none.
func (cs *credset) credentialsFor(t target) []Credential {
	if cs == nil {
		return nil
	}
	h := t.host.name
	if t.host.addr.IsValid() {
		h = t.host.addr.String()
	}
	return cs.byDest[net.JoinHostPort(h, strconv.Itoa(t.port))]
}

// misuse returns the credential whose placeholder r carries, in any form
// (see carries), in its target, URL or headers, skipping those in except;
// nil when none.
func (cs *credset) misuse(r *http.Request, except []Credential) *Credential {
	if cs == nil {
		return nil
	}
	for i := range cs.all {
		c := &cs.all[i]
		if c.Placeholder == "" || slices.ContainsFunc(except, func(e Credential) bool { return e.Name == c.Name }) {
			continue
		}
		if carries(r, c.placeholderForms) {
			return c
		}
	}
	return nil
}

// others are the credentials in force with a placeholder, except those
// named in except: those whose placeholder a body must not carry.
func (cs *credset) others(except []Credential) []Credential {
	if cs == nil {
		return nil
	}
	var out []Credential
	for _, c := range cs.all {
		if c.Placeholder != "" && !slices.ContainsFunc(except, func(e Credential) bool { return e.Name == c.Name }) {
			out = append(out, c)
		}
	}
	return out
}

// scanBody makes r's body fail as soon as it carries the placeholder of
// one of creds; nil when there is nothing to scan. It reads the first
// scanAhead bytes of the body at once: a placeholder in them is found
// (b.found) before the destination is reached, and the caller refuses
// the request outright. Streamed alone, a destination that answers
// without reading the body would let the request pass unrefused, as the
// proxy stops sending a body once the answer is in (TestEscape saw it).
// The body's reads are bounded by the connection's idle timeout.
func scanBody(r *http.Request, creds []Credential) *scannedBody {
	if len(creds) == 0 || r.Body == nil || r.Body == http.NoBody {
		return nil
	}
	b := &scannedBody{ReadCloser: r.Body, det: newStreamDetector(creds)}
	size := int64(scanAhead)
	if r.ContentLength >= 0 && r.ContentLength < size {
		size = r.ContentLength
	}
	ahead := make([]byte, size)
	n, err := io.ReadFull(b, ahead)
	var rest io.Reader = b
	switch {
	case err == nil, errors.Is(err, errPlaceholderInBody):
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		rest = eofReader{}
	default:
		rest = errReader{err}
	}
	r.Body = readAhead{Reader: io.MultiReader(bytes.NewReader(ahead[:n]), rest), Closer: b}
	return b
}

// scanAhead is how much of a request body scanBody reads before the
// request goes on: most bodies a placeholder could hide in whole.
const scanAhead = 64 << 10

// readAhead is a body whose first bytes were read already.
type readAhead struct {
	io.Reader
	io.Closer
}

type eofReader struct{}

func (eofReader) Read([]byte) (int, error) { return 0, io.EOF }

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// valueNeedles are the forms of every credential value in force.
func (cs *credset) valueNeedles() [][]byte {
	if cs == nil {
		return nil
	}
	var out [][]byte
	for _, c := range cs.all {
		out = append(out, c.valueForms...)
	}
	return dedupe(out)
}

// refuseScanned refuses the request whose body b found a placeholder in,
// if it did; false if not. Once the destination answered, the refusal is
// only logged.
func (g *Gateway) refuseScanned(w http.ResponseWriter, r *http.Request, dest string, b *scannedBody, answered bool) bool {
	if b == nil || b.found == nil || b.reported {
		return b != nil && b.reported
	}
	b.reported = true
	if answered {
		w = discardWriter{}
	}
	g.refuseMisuse(w, r, dest, b.found)
	return true
}

// discardWriter takes an answer that can no longer be sent.
type discardWriter struct{}

func (discardWriter) Header() http.Header         { return http.Header{} }
func (discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (discardWriter) WriteHeader(int)             {}

// refuseMisuse refuses a request that carries credential c's placeholder
// to dest.
func (g *Gateway) refuseMisuse(w http.ResponseWriter, r *http.Request, dest string, c *Credential) {
	g.refuse(w, r, verdict{dest: dest, status: http.StatusForbidden, outcome: OutcomeCredentialElsewhere,
		reason: fmt.Sprintf("the request carries the placeholder of credential %q, which is injected only for %s: an attempt to use the credential elsewhere", c.Name, net.JoinHostPort(c.Host, strconv.Itoa(c.Port)))})
}

// leaf is the certificate the gateway shows the agent for host.
func (cs *credset) leaf(host string) (*tls.Certificate, error) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if c, ok := cs.leaves[host]; ok && time.Until(c.Leaf.NotAfter) > time.Hour {
		return c, nil
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, err
	}
	now := time.Now()
	notAfter := now.Add(30 * 24 * time.Hour)
	if notAfter.After(cs.ca.NotAfter) {
		notAfter = cs.ca.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: host},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if a, err := netip.ParseAddr(host); err == nil {
		tmpl.IPAddresses = []net.IP{a.AsSlice()}
	} else {
		tmpl.DNSNames = []string{host}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, cs.ca, &cs.leafKey.PublicKey, cs.caKey)
	if err != nil {
		return nil, err
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	c := &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: cs.leafKey, Leaf: leaf}
	cs.leaves[host] = c
	return c, nil
}

// NewCA makes a bottle's CA: an ECDSA P-256 key and a self-signed
// certificate valid for ten years, named after the bottle, allowed to sign
// server certificates only, and name-constrained (critical) to hosts, its
// credential hosts: a client that trusts it trusts it for those names
// (and their subdomains, as DNS name constraints go) and addresses, never
// for another host. Both are PEM; the key is PKCS #8.
func NewCA(name string, hosts []string) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "bottlefile egress CA " + name, Organization: []string{"bottlefile"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.AddDate(10, 0, 0),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	constrain(tmpl, hosts)
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), nil
}

// noName and noAddrs are name constraints nothing matches: a CA for
// addresses only must not be trusted for any name, nor one for names
// only for any address (an absent kind of constraint permits all).
var (
	noName  = "invalid" // RFC 6761: never a real name
	noAddrs = []*net.IPNet{
		{IP: net.IPv4zero.To4(), Mask: net.CIDRMask(32, 32)},
		{IP: net.IPv6zero, Mask: net.CIDRMask(128, 128)},
	}
)

// constrain sets tmpl's permitted names and addresses to hosts.
func constrain(tmpl *x509.Certificate, hosts []string) {
	names, addrs := caHosts(hosts)
	tmpl.PermittedDNSDomainsCritical = true
	tmpl.PermittedDNSDomains = names
	if len(names) == 0 {
		tmpl.PermittedDNSDomains = []string{noName}
	}
	for _, a := range addrs {
		tmpl.PermittedIPRanges = append(tmpl.PermittedIPRanges, &net.IPNet{IP: a.AsSlice(), Mask: net.CIDRMask(a.BitLen(), a.BitLen())})
	}
	if len(addrs) == 0 {
		tmpl.PermittedIPRanges = noAddrs
	}
}

// caHosts splits hosts into lower-case names and addresses, sorted, each
// once.
func caHosts(hosts []string) (names []string, addrs []netip.Addr) {
	for _, h := range hosts {
		h = strings.TrimSuffix(asciiLower(strings.Trim(h, "[]")), ".")
		if a, err := netip.ParseAddr(h); err == nil {
			if a = a.Unmap(); !slices.Contains(addrs, a) {
				addrs = append(addrs, a)
			}
		} else if h != "" && !slices.Contains(names, h) {
			names = append(names, h)
		}
	}
	slices.Sort(names)
	slices.SortFunc(addrs, netip.Addr.Compare)
	return names, addrs
}

// CAConstrainedTo reports whether the CA certificate certPEM is
// name-constrained to exactly hosts (as NewCA makes it): a CA made for
// other hosts, or before CAs were constrained, must be made anew.
func CAConstrainedTo(certPEM []byte, hosts []string) bool {
	block, _ := pem.Decode(certPEM)
	if block == nil {
		return false
	}
	ca, err := x509.ParseCertificate(block.Bytes)
	if err != nil || !ca.PermittedDNSDomainsCritical {
		return false
	}
	var want x509.Certificate
	constrain(&want, hosts)
	if !slices.Equal(ca.PermittedDNSDomains, want.PermittedDNSDomains) || len(ca.PermittedIPRanges) != len(want.PermittedIPRanges) {
		return false
	}
	for i, r := range ca.PermittedIPRanges {
		if r.String() != want.PermittedIPRanges[i].String() {
			return false
		}
	}
	return true
}

// intercept serves a CONNECT to a credential host: it answers 200,
// terminates the client's TLS with a certificate for the host, and serves
// HTTP/1.1 and HTTP/2 requests on it, each forwarded with the credentials
// set over verified TLS to the addresses v checked.
func (g *Gateway) intercept(w http.ResponseWriter, r *http.Request, t target, v verdict, cs *credset, creds []Credential) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		g.refuse(w, r, verdict{dest: t.String(), status: http.StatusBadRequest, reason: "CONNECT is not possible on this connection"})
		return
	}
	host := t.host.name
	if t.host.addr.IsValid() {
		host = t.host.addr.String()
	}
	cert, err := cs.leaf(host)
	if err != nil {
		v.status, v.outcome, v.reason = http.StatusBadGateway, OutcomeFailed, fmt.Sprintf("cannot make a certificate for %s: %v", host, err)
		g.fail(w, r, v)
		return
	}
	names := make([]string, len(creds))
	for i, c := range creds {
		names[i] = strconv.Quote(c.Name)
	}
	v.outcome = OutcomeIntercepted
	v.reason = fmt.Sprintf("TLS terminated by the gateway to inject credential %s; requests go to %s", strings.Join(names, ", "), addrsString(v.addrs))
	g.logDecision(r, v)

	client, brw, err := hj.Hijack()
	if err != nil {
		return
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	tr := &http.Transport{
		Proxy: nil,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			c, _, err := g.dial(ctx, v) // the checked addresses, never a new lookup
			if err != nil {
				return nil, err
			}
			return &idleConn{Conn: c, idle: g.idleTimeout(), act: new(activity)}, nil
		},
		TLSClientConfig:        &tls.Config{ServerName: host, RootCAs: cs.roots, MinVersion: tls.VersionTLS12},
		ForceAttemptHTTP2:      true,
		DisableCompression:     true,
		MaxResponseHeaderBytes: 1 << 20,
		IdleConnTimeout:        g.idleTimeout(),
		TLSHandshakeTimeout:    g.connectTimeout(),
	}
	defer tr.CloseIdleConnections()
	closeAll := func() {
		cancel()
		client.Close()
	}
	defer g.trackIntercepted(t.host, t.port, v.addrs, cs.trust, closeAll)()

	client.SetDeadline(time.Time{})
	if _, err := io.WriteString(client, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		client.Close()
		return
	}
	var raw net.Conn = client
	if n := brw.Reader.Buffered(); n > 0 {
		b, _ := brw.Reader.Peek(n)
		raw = &prefixConn{Conn: client, pre: bytes.NewReader(slices.Clone(b))}
	}
	act := new(activity)
	tc := tls.Server(&idleConn{Conn: raw, idle: g.idleTimeout(), act: act}, &tls.Config{
		Certificates: []tls.Certificate{*cert},
		NextProtos:   []string{"h2", "http/1.1"},
		MinVersion:   tls.VersionTLS12,
	})
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme = "https"
			pr.Out.URL.Host = t.String()
			if t.port == 443 {
				pr.Out.URL.Host = host
			}
			pr.Out.Host = pr.Out.URL.Host
			pr.Out.Header.Del("Proxy-Authorization")
			pr.Out.Header.Del("Proxy-Connection")
			creds := pr.In.Context().Value(credsKey{}).([]Credential)
			for _, c := range creds {
				pr.Out.Header.Del(c.Header)
			}
			for _, c := range creds {
				pr.Out.Header.Set(c.Header, c.Prefix+c.Value)
			}
			// What comes back is masked as it streams: it must come
			// uncompressed (decoded below if it comes compressed anyway),
			// and whole, never a range of an echo cut where the agent
			// chose.
			pr.Out.Header.Set("Accept-Encoding", "identity")
			pr.Out.Header.Del("Range")
			pr.Out.Header.Del("If-Range")
		},
		ModifyResponse: decodeForMasking,
		Transport:      tr,
		FlushInterval:  -1,
		ErrorLog:       log.New(io.Discard, "", 0),
		ErrorHandler: func(w http.ResponseWriter, req *http.Request, err error) {
			if req.Context().Err() != nil {
				return
			}
			if b, _ := req.Context().Value(scanKey{}).(*scannedBody); g.refuseScanned(w, req, t.String(), b, false) {
				return
			}
			fv := v
			// The error may quote what the host sent back (a malformed
			// answer): masked like the answer, in the log too.
			reason := fmt.Sprintf("forwarding %s %s: %v", clip(req.Method, 20), t, err)
			fv.status, fv.outcome, fv.reason = http.StatusBadGateway, dialOutcome(err), redactString(reason, g.creds.Load().valueNeedles())
			g.fail(w, req, fv)
		},
	}
	handler := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		req.RemoteAddr = r.RemoteAddr
		// The credentials in force now: a rotation reaches the next
		// request of an open tunnel.
		cs := g.creds.Load()
		creds := cs.credentialsFor(t)
		if len(creds) == 0 {
			g.refuse(w, req, verdict{dest: t.String(), status: http.StatusForbidden, reason: "no credential is configured for this host any more; connect again"})
			closeAll()
			return
		}
		if c := cs.misuse(req, creds); c != nil {
			g.refuseMisuse(w, req, t.String(), c)
			return
		}
		if why := credentialRequestRefused(req); why != "" {
			g.refuse(w, req, verdict{dest: t.String(), rule: v.rule, serial: v.serial, status: http.StatusForbidden, reason: why})
			return
		}
		ctx := context.WithValue(req.Context(), credsKey{}, creds)
		if b := scanBody(req, cs.others(creds)); b != nil {
			if g.refuseScanned(w, req, t.String(), b, false) {
				return
			}
			ctx = context.WithValue(ctx, scanKey{}, b)
		}
		req = req.WithContext(ctx)
		iv := v
		iv.outcome = OutcomeCredentialInjected
		parts := make([]string, len(creds))
		for i, c := range creds {
			parts[i] = fmt.Sprintf("%q in header %s", c.Name, c.Header)
		}
		iv.reason = fmt.Sprintf("credential injected: %s, into %s %s", strings.Join(parts, ", "), clip(req.Method, 20), clip(req.URL.Path, 200))
		g.logDecision(req, iv)
		rw := newRedactingWriter(w, cs.valueNeedles())
		rp.ServeHTTP(rw, req)
		rw.finish()
		b, _ := req.Context().Value(scanKey{}).(*scannedBody)
		g.refuseScanned(w, req, t.String(), b, true)
	})
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: g.readHeaderTimeout(),
		IdleTimeout:       g.idleTimeout(),
		MaxHeaderBytes:    g.maxHeaderBytes(),
		ErrorLog:          log.New(io.Discard, "", 0),
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	l := newOneConnListener(tc)
	srv.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateClosed || st == http.StateHijacked {
			l.Close()
		}
	}
	stop := context.AfterFunc(ctx, func() { srv.Close() })
	defer stop()
	srv.Serve(l)
	<-l.done
	srv.Close()
}

// credsKey carries a request's credentials to the reverse proxy's Rewrite.
type credsKey struct{}

// scanKey carries a request's scannedBody to the reverse proxy's
// ErrorHandler.
type scanKey struct{}

// credentialRequestRefused is why the gateway refuses req to a credential
// host, "" when it does not: methods whose answer is the request itself,
// and protocol switches, whose bytes the gateway cannot mask.
func credentialRequestRefused(req *http.Request) string {
	if m := strings.ToUpper(req.Method); m == "TRACE" || m == "TRACK" {
		return fmt.Sprintf("%s to a credential host is refused: its answer is the request, credential and all", clip(req.Method, 20))
	}
	if req.Header.Get("Upgrade") != "" {
		return fmt.Sprintf("a protocol switch (Upgrade: %s) to a credential host is refused: the gateway could not mask the credential in what the other protocol sends back", clip(req.Header.Get("Upgrade"), 40))
	}
	return ""
}

// decodeForMasking undoes a content encoding the credential host applied
// although the gateway asked for none, so that the masking sees the bytes;
// an encoding it cannot undo fails the request (502) rather than pass
// unmasked.
func decodeForMasking(resp *http.Response) error {
	if resp.Close {
		// The host closes its connection: so does the gateway the
		// agent's, once this answer is out, rather than hold it (and a
		// pipelined request) for the idle timeout.
		resp.Header.Set("Connection", "close")
	}
	ce := strings.ToLower(strings.TrimSpace(resp.Header.Get("Content-Encoding")))
	if ce == "" || ce == "identity" || resp.Body == nil || resp.Body == http.NoBody ||
		resp.Request.Method == http.MethodHead || resp.StatusCode == http.StatusNoContent || resp.StatusCode == http.StatusNotModified {
		return nil
	}
	var dec io.ReadCloser
	var err error
	switch ce {
	case "gzip", "x-gzip":
		dec, err = gzip.NewReader(resp.Body)
	case "deflate":
		dec, err = zlib.NewReader(resp.Body)
	default:
		return fmt.Errorf("the credential host answered with Content-Encoding %q, which the gateway cannot decode to mask the credential", clip(ce, 40))
	}
	if err != nil {
		return fmt.Errorf("decoding the credential host's %s answer: %v", ce, err)
	}
	resp.Body = struct {
		io.Reader
		io.Closer
	}{dec, resp.Body}
	resp.Header.Del("Content-Encoding")
	resp.Header.Del("Content-Length")
	resp.ContentLength = -1
	return nil
}

func addrsString(addrs []netip.Addr) string {
	s := make([]string, len(addrs))
	for i, a := range addrs {
		s[i] = a.String()
	}
	return strings.Join(s, ", ")
}

// trackIntercepted records an intercepted tunnel: revoked like any
// tunnel when the rules stop allowing it (for each address it may use),
// and when the credentials change.
func (g *Gateway) trackIntercepted(host hostKey, port int, addrs []netip.Addr, trust string, close func()) (untrack func()) {
	var untracks []func()
	for _, a := range addrs {
		untracks = append(untracks, g.trackTunnel(&tunnel{host: host, port: port, addr: a, close: close, intercepted: true, trust: trust}))
	}
	return func() {
		for _, u := range untracks {
			u()
		}
	}
}

// prefixConn reads pre before the connection: bytes a client sent right
// after its CONNECT.
type prefixConn struct {
	net.Conn
	pre io.Reader
}

func (c *prefixConn) Read(p []byte) (int, error) {
	if c.pre != nil {
		n, err := c.pre.Read(p)
		if n > 0 {
			return n, nil
		}
		if err == io.EOF {
			c.pre = nil
		}
	}
	return c.Conn.Read(p)
}

// oneConnListener hands out one connection, then blocks until closed.
type oneConnListener struct {
	c    chan net.Conn
	addr net.Addr
	once sync.Once
	done chan struct{}
}

func newOneConnListener(c net.Conn) *oneConnListener {
	l := &oneConnListener{c: make(chan net.Conn, 1), addr: c.LocalAddr(), done: make(chan struct{})}
	l.c <- c
	return l
}

func (l *oneConnListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.c:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *oneConnListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *oneConnListener) Addr() net.Addr { return l.addr }
