package k8stest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// pki is the cluster's certificate authority and the files it signed,
// written under dir: NAME.crt and NAME.key (PEM), and NAME.kubeconfig for
// each client that talks to the API server.
type pki struct {
	dir    string
	caCert *x509.Certificate
	caKey  *ecdsa.PrivateKey
	caPEM  []byte
}

// newPKI makes the CA (P-256, valid two days: a test cluster lives
// minutes) and writes ca.crt.
func newPKI(dir string) (*pki, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "bottlefile-k8stest-ca"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(48 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	p := &pki{dir: dir, caCert: cert, caKey: key, caPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
	if err := os.WriteFile(p.path("ca.crt"), p.caPEM, 0o644); err != nil {
		return nil, err
	}
	if err := writeKey(p.path("ca.key"), key); err != nil {
		return nil, err
	}
	return p, nil
}

func (p *pki) path(name string) string { return filepath.Join(p.dir, name) }

// cert is one certificate to sign: its subject, whether it serves or
// authenticates a client, and the names it serves.
type cert struct {
	name   string // the files' name
	cn     string
	org    string
	server bool
	dns    []string
	ips    []string
}

// sign makes a key and a certificate for c and writes NAME.crt and
// NAME.key; it returns both in PEM.
func (p *pki) sign(c cert, serial int64) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      pkix.Name{CommonName: c.cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(48 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		DNSNames:     c.dns,
	}
	if c.org != "" {
		tmpl.Subject.Organization = []string{c.org}
	}
	if c.server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	} else {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	}
	for _, s := range c.ips {
		ip := net.ParseIP(s)
		if ip == nil {
			return nil, nil, fmt.Errorf("certificate %s: bad IP %q", c.name, s)
		}
		tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.caCert, &key.PublicKey, p.caKey)
	if err != nil {
		return nil, nil, err
	}
	certPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	if err := os.WriteFile(p.path(c.name+".crt"), certPEM, 0o644); err != nil {
		return nil, nil, err
	}
	if err := writeKey(p.path(c.name+".key"), key); err != nil {
		return nil, nil, err
	}
	keyPEM, err = os.ReadFile(p.path(c.name + ".key"))
	return certPEM, keyPEM, err
}

func writeKey(path string, key *ecdsa.PrivateKey) error {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), 0o600)
}

// kubeconfig is a kubeconfig for server with a client's certificate and
// key, all embedded.
func (p *pki) kubeconfig(server, user string, certPEM, keyPEM []byte) []byte {
	b64 := base64.StdEncoding.EncodeToString
	return fmt.Appendf(nil, `apiVersion: v1
kind: Config
clusters:
- name: k8stest
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: %s
  user:
    client-certificate-data: %s
    client-key-data: %s
contexts:
- name: k8stest
  context:
    cluster: k8stest
    user: %s
current-context: k8stest
`, server, b64(p.caPEM), user, b64(certPEM), b64(keyPEM), user)
}

// serviceAccountKeys writes the key pair that signs ServiceAccount tokens:
// sa.key (private) and sa.pub (public, PEM).
func (p *pki) serviceAccountKeys() error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	if err := writeKey(p.path("sa.key"), key); err != nil {
		return err
	}
	der, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return err
	}
	return os.WriteFile(p.path("sa.pub"), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o644)
}
