package engine

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"time"

	"github.com/bottlefile/bottlefile/drivers"
)

// dialTimeout bounds a connection attempt when the caller's context does
// not, as the docker CLI's.
const dialTimeout = 30 * time.Second

// dialer makes every connection to one engine, whatever address the HTTP
// client asks for: the client speaks plain HTTP over what it returns, so
// a failure to connect (TLS included) is always the dialer's, and says
// what failed.
type dialer struct {
	ep  Endpoint
	tls *tls.Config // tcp:// with TLS only
}

func newDialer(ep Endpoint) (*dialer, error) {
	d := &dialer{ep: ep}
	if ep.URL.Scheme == SchemeTCP && ep.TLS() {
		cfg, err := tlsConfig(ep)
		if err != nil {
			return nil, err
		}
		d.tls = cfg
	}
	return d, nil
}

// tlsConfig reads the TLS files: the engine's certificate is verified
// against tls_ca (else this machine's roots) and must be for the host it
// is dialled at; the client certificate is presented when set.
func tlsConfig(ep Endpoint) (*tls.Config, error) {
	fail := func(attr string, err error) error {
		if ep.Host == "" { // from DOCKER_CERT_PATH, not the block
			return fmt.Errorf("DOCKER_CERT_PATH: %w", err)
		}
		return &drivers.AttributeError{Attribute: attr, Err: err}
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: ep.URL.Hostname()}
	if ep.CA != "" {
		pem, err := os.ReadFile(ep.CA)
		if err != nil {
			return nil, fail(AttrTLSCA, fmt.Errorf("cannot read %s: %v", ep.CA, err))
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fail(AttrTLSCA, fmt.Errorf("%s holds no PEM certificate", ep.CA))
		}
		cfg.RootCAs = pool
	}
	if ep.Cert != "" {
		pair, err := tls.LoadX509KeyPair(ep.Cert, ep.Key)
		if err != nil {
			return nil, fail(AttrTLSCert, fmt.Errorf("%s and %s are not a PEM certificate and its key: %v", ep.Cert, ep.Key, err))
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

// dial is the HTTP client's DialContext; network and addr are ignored.
func (d *dialer) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	switch d.ep.URL.Scheme {
	case SchemeUnix:
		path := d.ep.URL.Path
		c, err := (&net.Dialer{Timeout: dialTimeout}).DialContext(ctx, "unix", path)
		if err != nil {
			return nil, dialError(ctx, "the socket "+path, err)
		}
		return c, nil
	case SchemeTCP:
		return d.dialTCP(ctx)
	case SchemeSSH:
		return d.dialSSH(ctx)
	}
	return nil, fmt.Errorf("no dialer for %q", d.ep.URL.Scheme)
}

func (d *dialer) dialTCP(ctx context.Context) (net.Conn, error) {
	addr := d.ep.hostPort()
	c, err := (&net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, dialError(ctx, addr, err)
	}
	if d.tls == nil {
		return c, nil
	}
	tc := tls.Client(c, d.tls)
	hctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	if err := tc.HandshakeContext(hctx); err != nil {
		c.Close()
		if ctx.Err() != nil {
			return nil, err
		}
		return nil, d.tlsError(err)
	}
	return &tlsConn{Conn: tc, d: d}, nil
}

// tlsConn is a TLS connection whose reads and writes report an alert from
// the engine as a TLS failure: with TLS 1.3 the engine refuses a client
// certificate after the handshake, on the first read.
type tlsConn struct {
	*tls.Conn
	d *dialer
}

func (c *tlsConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if err != nil && isRemoteAlert(err) {
		err = c.d.tlsError(err)
	}
	return n, err
}

func (c *tlsConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	if err != nil && isRemoteAlert(err) {
		err = c.d.tlsError(err)
	}
	return n, err
}

// isRemoteAlert reports whether err is a TLS alert the peer sent.
func isRemoteAlert(err error) bool {
	var oe *net.OpError
	return errors.As(err, &oe) && oe.Op == "remote error"
}

// tlsError says which side's certificate failed.
func (d *dialer) tlsError(err error) error {
	addr := d.ep.hostPort()
	var (
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
		record   tls.RecordHeaderError
	)
	var msg string
	switch {
	case errors.As(err, &unknown):
		if d.ep.CA != "" {
			msg = fmt.Sprintf("the engine's certificate at %s is not signed by tls_ca (%s)", addr, d.ep.CA)
		} else {
			msg = fmt.Sprintf("the engine's certificate at %s is not signed by an authority this machine trusts: set tls_ca", addr)
		}
	case errors.As(err, &hostname):
		msg = fmt.Sprintf("the engine's certificate is not for %s", d.ep.URL.Hostname())
	case errors.As(err, &invalid):
		msg = fmt.Sprintf("the engine's certificate at %s is not valid", addr)
	case isRemoteAlert(err):
		if d.ep.Cert == "" {
			msg = fmt.Sprintf("the engine at %s refused the connection: it may ask for a client certificate (set tls_cert and tls_key)", addr)
		} else {
			msg = fmt.Sprintf("the engine at %s refused the client certificate tls_cert (%s)", addr, d.ep.Cert)
		}
	case errors.As(err, &record):
		msg = fmt.Sprintf("what answers at %s does not speak TLS", addr)
	case errors.Is(err, io.EOF), errors.Is(err, syscall.ECONNRESET):
		msg = fmt.Sprintf("the engine at %s closed the connection during the TLS handshake", addr)
	default:
		msg = fmt.Sprintf("the TLS handshake with %s failed", addr)
	}
	return &ConnectError{Failure: TLS, Msg: fmt.Sprintf("TLS: %s: %v", msg, err), Err: err}
}

// dialError says why a connection to where could not be made. Its words
// never contain "connection refused": the docker client replaces an error
// that does with one that says nothing of the cause.
func dialError(ctx context.Context, where string, err error) error {
	if ctx.Err() != nil {
		return err
	}
	cause := err
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Err != nil {
		cause = oe.Err
	}
	var dns *net.DNSError
	var ne net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return &ConnectError{Failure: Refused, Msg: fmt.Sprintf("the connection to %s was refused: nothing listens there (is the engine running?)", where), Err: err}
	case errors.Is(err, syscall.ENOENT):
		return &ConnectError{Failure: Refused, Msg: fmt.Sprintf("%s does not exist (is the engine running?)", where), Err: err}
	case errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM):
		return &ConnectError{Failure: Authentication, Msg: fmt.Sprintf("permission denied on %s: run as root or as a member of its group", where), Err: err}
	case errors.As(err, &dns):
		return &ConnectError{Failure: Unreachable, Msg: fmt.Sprintf("cannot resolve %s: %v", dns.Name, cause), Err: err}
	case errors.As(err, &ne) && ne.Timeout():
		return &ConnectError{Failure: Unreachable, Msg: fmt.Sprintf("no answer from %s in time", where), Err: err}
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return &ConnectError{Failure: Unreachable, Msg: fmt.Sprintf("no route to %s", where), Err: err}
	}
	return &ConnectError{Failure: Unreachable, Msg: fmt.Sprintf("cannot connect to %s: %v", where, cause), Err: err}
}
