package egress

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"strings"
	"testing"
	"time"
)

// parseCA parses NewCA's output into a credset that can sign leaves.
func parseCA(t *testing.T, certPEM, keyPEM []byte) (*credset, *x509.CertPool) {
	t.Helper()
	block, _ := pem.Decode(certPEM)
	ca, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	kblock, _ := pem.Decode(keyPEM)
	k, err := x509.ParsePKCS8PrivateKey(kblock.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	leafKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return &credset{ca: ca, caKey: k.(*ecdsa.PrivateKey), leafKey: leafKey, leaves: map[string]*tls.Certificate{}}, pool
}

// TestCANameConstraints: a client that trusts a bottle's CA accepts the
// CA's certificates for its credential hosts only (names, their
// subdomains, addresses), never for another name or address, as if the
// CA's key signed them.
func TestCANameConstraints(t *testing.T) {
	for _, tt := range []struct {
		name    string
		hosts   []string
		trusted []string
		refused []string
	}{
		{"a name", []string{"API.example.com."},
			[]string{"api.example.com", "eu.api.example.com"},
			[]string{"example.com", "evil.com", "api.example.com.evil.com", "xapi.example.com", "10.0.0.1", "::1"}},
		{"an address", []string{"10.0.0.5"},
			[]string{"10.0.0.5"},
			[]string{"10.0.0.6", "api.example.com", "localhost", "2001:db8::1"}},
		{"names and addresses", []string{"api.example.com", "10.0.0.5", "[2001:db8::1]", "registry.example"},
			[]string{"api.example.com", "10.0.0.5", "2001:db8::1", "registry.example"},
			[]string{"example.com", "10.0.0.6", "2001:db8::2", "github.com"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			certPEM, keyPEM, err := NewCA("agent.coder", tt.hosts)
			if err != nil {
				t.Fatal(err)
			}
			cs, pool := parseCA(t, certPEM, keyPEM)
			verify := func(host string) error {
				leaf, err := cs.leaf(host)
				if err != nil {
					t.Fatalf("signing a leaf for %s: %v", host, err)
				}
				_, err = leaf.Leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: strings.Trim(host, "[]"), CurrentTime: time.Now()})
				return err
			}
			for _, h := range tt.trusted {
				if err := verify(h); err != nil {
					t.Errorf("%s: refused: %v", h, err)
				}
			}
			for _, h := range tt.refused {
				if err := verify(h); err == nil {
					t.Errorf("%s: trusted, want refused", h)
				}
			}
			if !CAConstrainedTo(certPEM, tt.hosts) {
				t.Errorf("CAConstrainedTo(its own hosts) = false")
			}
			if CAConstrainedTo(certPEM, append(tt.hosts, "other.example")) || CAConstrainedTo(certPEM, tt.hosts[1:]) {
				t.Errorf("CAConstrainedTo(other hosts) = true")
			}
		})
	}
}

// TestCAConstrainedToOrder: the same hosts in another order or case are
// the same constraints; a CA of before name constraints is not.
func TestCAConstrainedToOrder(t *testing.T) {
	certPEM, _, err := NewCA("agent.coder", []string{"b.example", "A.example", "10.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	if !CAConstrainedTo(certPEM, []string{"10.0.0.1", "a.example", "b.example", "a.example"}) {
		t.Errorf("the same hosts in another order and case: not the same constraints")
	}
	if CAConstrainedTo([]byte("not a certificate"), nil) {
		t.Errorf("garbage is constrained")
	}
}
