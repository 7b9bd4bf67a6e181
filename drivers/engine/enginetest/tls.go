// Package enginetest makes remote engines on this machine for tests: a
// TLS endpoint in front of the local engine's socket, with certificates
// made by the test, and an sshd on loopback whose logins run `docker
// system dial-stdio` against it.
package enginetest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// Socket is the local engine's socket the endpoints forward to.
const Socket = "/var/run/docker.sock"

// CA is a certificate authority made by a test.
type CA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	// File is its certificate, PEM, in the test's temporary directory.
	File string
	dir  string
}

// NewCA makes a certificate authority named name.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber:          serial(t),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ca := &CA{cert: cert, key: key, dir: dir, File: filepath.Join(dir, name+"-ca.pem")}
	writePEM(t, ca.File, "CERTIFICATE", der)
	return ca
}

// Pair is a certificate and its key, as files and as a tls.Certificate.
type Pair struct {
	Cert, Key string
	TLS       tls.Certificate
}

// Issue makes a certificate signed by the CA: for a server at the given
// addresses and names (127.0.0.1, localhost), or for a client when there
// are none.
func (ca *CA) Issue(t testing.TB, name string, hosts ...string) Pair {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: serial(t),
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if len(hosts) > 0 {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		for _, h := range hosts {
			if ip := net.ParseIP(h); ip != nil {
				tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
			} else {
				tmpl.DNSNames = append(tmpl.DNSNames, h)
			}
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	p := Pair{Cert: filepath.Join(ca.dir, name+"-cert.pem"), Key: filepath.Join(ca.dir, name+"-key.pem")}
	writePEM(t, p.Cert, "CERTIFICATE", der)
	writePEM(t, p.Key, "EC PRIVATE KEY", kder)
	p.TLS, err = tls.LoadX509KeyPair(p.Cert, p.Key)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Pool is a certificate pool holding only the CA.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.cert)
	return p
}

// TLSEngine is the local engine behind a TLS listener on loopback, as an
// engine run with --tlsverify is: it presents a server certificate of
// the CA for 127.0.0.1 and requires a client certificate of the same CA.
type TLSEngine struct {
	// Addr is where it listens: 127.0.0.1:PORT.
	Addr string
	// CA is the authority of both certificates; Client a client
	// certificate it accepts.
	CA     *CA
	Client Pair

	mu      sync.Mutex
	handled int
}

// Host is its address as a runtime's host attribute: tcp://127.0.0.1:PORT.
func (e *TLSEngine) Host() string { return "tcp://" + e.Addr }

// Handled is how many TLS connections it forwarded to the engine.
func (e *TLSEngine) Handled() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.handled
}

// StartTLSEngine starts a TLSEngine in front of socket, closed when the
// test ends. Its certificate is for names (addresses or host names),
// default 127.0.0.1 and localhost.
func StartTLSEngine(t testing.TB, socket string, names ...string) *TLSEngine {
	t.Helper()
	if len(names) == 0 {
		names = []string{"127.0.0.1", "localhost"}
	}
	ca := NewCA(t, "engine")
	server := ca.Issue(t, "server", names...)
	e := &TLSEngine{CA: ca, Client: ca.Issue(t, "client")}
	cfg := &tls.Config{
		Certificates: []tls.Certificate{server.TLS},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    ca.Pool(),
		MinVersion:   tls.VersionTLS12,
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.Addr = ln.Addr().String()
	var wg sync.WaitGroup
	done := make(chan struct{})
	var conns sync.Map
	t.Cleanup(func() {
		close(done)
		ln.Close()
		conns.Range(func(k, _ any) bool { k.(net.Conn).Close(); return true })
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				select {
				case <-done:
				default:
					if !errors.Is(err, net.ErrClosed) {
						t.Logf("tls engine: accept: %v", err)
					}
				}
				return
			}
			conns.Store(c, true)
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer conns.Delete(c)
				defer c.Close()
				if err := c.(*tls.Conn).Handshake(); err != nil {
					// A client the test means to refuse. To one speaking
					// plain HTTP, answer as dockerd's HTTP server does.
					var re tls.RecordHeaderError
					if errors.As(err, &re) && re.Conn != nil {
						io.WriteString(re.Conn, "HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to an HTTPS server.\n")
						re.Conn.Close()
					}
					return
				}
				e.mu.Lock()
				e.handled++
				e.mu.Unlock()
				up, err := net.Dial("unix", socket)
				if err != nil {
					t.Logf("tls engine: %v", err)
					return
				}
				conns.Store(up, true)
				defer conns.Delete(up)
				defer up.Close()
				pipe(c, up)
			}()
		}
	}()
	return e
}

// pipe copies both ways until both directions end, passing a half-close
// on (a hijacked exec's input ending).
func pipe(a, b net.Conn) {
	var wg sync.WaitGroup
	one := func(dst, src net.Conn) {
		defer wg.Done()
		io.Copy(dst, src)
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			cw.CloseWrite()
		} else {
			dst.Close()
		}
	}
	wg.Add(2)
	go one(a, b)
	go one(b, a)
	wg.Wait()
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func serial(t testing.TB) *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func writePEM(t testing.TB, path, kind string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}
