package engine

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/docker/docker/client"
	"github.com/hashicorp/hcl/v2/hcldec"
	"github.com/zclconf/go-cty/cty"

	"github.com/bottlefile/bottlefile/drivers"
)

// The connection attributes of a runtime block.
const (
	AttrHost    = "host"
	AttrTLSCA   = "tls_ca"
	AttrTLSCert = "tls_cert"
	AttrTLSKey  = "tls_key"
)

// The schemes host accepts.
const (
	SchemeUnix = "unix"
	SchemeTCP  = "tcp"
	SchemeSSH  = "ssh"
)

// Default ports of a tcp:// host that names none, as the docker CLI's.
const (
	defaultTCPPort = "2375"
	defaultTLSPort = "2376"
)

// Spec is the schema of the connection attributes, to merge into a runtime
// block's schema. All are optional strings.
func Spec() hcldec.ObjectSpec {
	return hcldec.ObjectSpec{
		AttrHost:    &hcldec.AttrSpec{Name: AttrHost, Type: cty.String},
		AttrTLSCA:   &hcldec.AttrSpec{Name: AttrTLSCA, Type: cty.String},
		AttrTLSCert: &hcldec.AttrSpec{Name: AttrTLSCert, Type: cty.String},
		AttrTLSKey:  &hcldec.AttrSpec{Name: AttrTLSKey, Type: cty.String},
	}
}

// Endpoint is where one runtime's engine is and how to reach it.
type Endpoint struct {
	// Runtime is the runtime block's name, for errors.
	Runtime string
	// Host is the host attribute as written; "" when the block sets none
	// (DOCKER_HOST, else the default socket).
	Host string
	// URL is the engine's address in use: Host, else DOCKER_HOST, else
	// the default socket.
	URL *url.URL
	// CA, Cert and Key are the TLS files, absolute; "" when not set. A
	// tcp:// engine with none of them is reached without TLS.
	CA, Cert, Key string
}

// Scheme is the address's scheme: "unix", "tcp" or "ssh".
func (ep Endpoint) Scheme() string {
	if ep.URL == nil {
		return ""
	}
	return ep.URL.Scheme
}

// TLS reports whether the engine is reached with TLS.
func (ep Endpoint) TLS() bool { return ep.CA != "" || ep.Cert != "" }

// Address says where the engine is looked for, as the user set it: the
// runtime's host (`host = "tcp://..."`), DOCKER_HOST=..., or the default
// socket.
func (ep Endpoint) Address() string {
	switch {
	case ep.Host != "":
		return fmt.Sprintf("host = %q", ep.Host)
	case os.Getenv("DOCKER_HOST") != "":
		return "DOCKER_HOST=" + os.Getenv("DOCKER_HOST")
	case ep.URL == nil:
		return client.DefaultDockerHost
	}
	return ep.URL.String()
}

// Local reports whether the engine runs on this machine: a unix socket,
// or a tcp:// or ssh:// address on a loopback address or localhost.
func (ep Endpoint) Local() bool {
	if ep.URL == nil || ep.URL.Scheme == SchemeUnix {
		return true
	}
	h := ep.URL.Hostname()
	if h == "localhost" {
		return true
	}
	a, err := netip.ParseAddr(h)
	return err == nil && a.IsLoopback()
}

// HostAddrs are the addresses of the engine's host, from the name in its
// address (tcp://HOST:2376, ssh://USER@HOST): nothing for a unix socket.
// A name is resolved, within ctx and at most 5 seconds.
func (ep Endpoint) HostAddrs(ctx context.Context) ([]netip.Addr, error) {
	if ep.URL == nil || ep.URL.Scheme == SchemeUnix || ep.URL.Hostname() == "" {
		return nil, nil
	}
	h := ep.URL.Hostname()
	if a, err := netip.ParseAddr(h); err == nil {
		return []netip.Addr{a.Unmap()}, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", h)
	if err != nil {
		return nil, err
	}
	for i, a := range addrs {
		addrs[i] = a.Unmap()
	}
	return addrs, nil
}

// hostPort is the TCP address a tcp:// or ssh:// engine is dialled at.
func (ep Endpoint) hostPort() string { return ep.URL.Host }

// attrs are the connection attributes of a runtime block as written;
// known is false for one whose value is not known yet (a variable, in
// validate).
type attrs struct {
	host, ca, cert, key string
	hostKnown, tlsKnown bool
}

func readAttrs(config cty.Value) (attrs, []*drivers.AttributeError) {
	var a attrs
	var errs []*drivers.AttributeError
	a.hostKnown, a.tlsKnown = true, true
	if config == cty.NilVal || config.IsNull() {
		return a, nil
	}
	if !config.IsKnown() {
		a.hostKnown, a.tlsKnown = false, false
		return a, nil
	}
	get := func(name string, known *bool) string {
		if !config.Type().IsObjectType() || !config.Type().HasAttribute(name) {
			return ""
		}
		v, _ := config.GetAttr(name).UnmarkDeep()
		if !v.IsKnown() {
			*known = false
			return ""
		}
		s, err := drivers.String(v)
		if err != nil {
			errs = append(errs, &drivers.AttributeError{Attribute: name, Err: err})
		}
		return s
	}
	a.host = get(AttrHost, &a.hostKnown)
	a.ca = get(AttrTLSCA, &a.tlsKnown)
	a.cert = get(AttrTLSCert, &a.tlsKnown)
	a.key = get(AttrTLSKey, &a.tlsKnown)
	return a, errs
}

// Check checks the connection attributes of a decoded runtime block
// without contacting anything, for drivers.Schema.CheckRuntime: host is a
// unix://, tcp:// or ssh:// address; tls_ca, tls_cert and tls_key go with a
// tcp:// host only, tls_cert with tls_key, and each names a file that
// exists. Values not known yet are not checked. It reads no environment.
func Check(req drivers.ConfigureRequest) []*drivers.AttributeError {
	a, errs := readAttrs(req.Config)
	if len(errs) > 0 {
		return errs
	}
	var u *url.URL
	if a.hostKnown && a.host != "" {
		var err error
		if u, err = ParseHost(a.host); err != nil {
			errs = append(errs, &drivers.AttributeError{Attribute: AttrHost, Err: err})
		}
	}
	if !a.tlsKnown {
		return errs
	}
	files := []struct{ attr, path string }{{AttrTLSCA, a.ca}, {AttrTLSCert, a.cert}, {AttrTLSKey, a.key}}
	for _, f := range files {
		if f.path == "" {
			continue
		}
		switch {
		case a.hostKnown && a.host == "":
			errs = append(errs, &drivers.AttributeError{Attribute: f.attr, Err: errors.New("only an engine at a tcp:// address takes TLS files: set host = \"tcp://HOST:PORT\" in the same block")})
			continue
		case u != nil && u.Scheme != SchemeTCP:
			errs = append(errs, &drivers.AttributeError{Attribute: f.attr, Err: fmt.Errorf("only an engine at a tcp:// address takes TLS files, and host is %q (%s)", a.host, noTLSWhy(u.Scheme))})
			continue
		}
		if err := checkFile(resolve(req.Dir, f.path)); err != nil {
			errs = append(errs, &drivers.AttributeError{Attribute: f.attr, Err: err})
		}
	}
	if a.cert != "" && a.key == "" {
		errs = append(errs, &drivers.AttributeError{Attribute: AttrTLSCert, Err: errors.New("needs tls_key, the key of the client certificate")})
	}
	if a.key != "" && a.cert == "" {
		errs = append(errs, &drivers.AttributeError{Attribute: AttrTLSKey, Err: errors.New("needs tls_cert, the client certificate it is the key of")})
	}
	return errs
}

func noTLSWhy(scheme string) string {
	if scheme == SchemeSSH {
		return "ssh:// is secured by ssh itself (its keys and known_hosts)"
	}
	return "a unix socket is secured by its file permissions"
}

// FromConfig reads the connection attributes of a decoded runtime block
// (after Check's checks) and where they leave the engine: the host, else
// DOCKER_HOST, else the default socket. With DOCKER_HOST and no tls_*,
// DOCKER_CERT_PATH (or DOCKER_TLS_VERIFY, with ~/.docker) gives
// ca.pem, cert.pem and key.pem, as the docker CLI's; TLS is always
// verified. An error about an attribute is a *drivers.AttributeError.
func FromConfig(req drivers.ConfigureRequest) (Endpoint, error) {
	if errs := Check(req); len(errs) > 0 {
		return Endpoint{}, errs[0]
	}
	a, _ := readAttrs(req.Config)
	if !a.hostKnown || !a.tlsKnown {
		return Endpoint{}, errors.New("the connection attributes are not known yet")
	}
	ep := Endpoint{Runtime: req.Runtime, Host: a.host}
	for _, f := range []struct {
		dst  *string
		path string
	}{{&ep.CA, a.ca}, {&ep.Cert, a.cert}, {&ep.Key, a.key}} {
		if f.path != "" {
			*f.dst = resolve(req.Dir, f.path)
		}
	}
	host := a.host
	if host == "" {
		host = os.Getenv("DOCKER_HOST")
		if host == "" {
			host = client.DefaultDockerHost
		}
		u, err := ParseHost(host)
		if err != nil {
			return Endpoint{}, fmt.Errorf("DOCKER_HOST: %w", err)
		}
		ep.URL = u
		if u.Scheme == SchemeTCP && !ep.TLS() {
			ep.CA, ep.Cert, ep.Key = envTLS()
		}
	} else {
		u, err := ParseHost(host)
		if err != nil {
			return Endpoint{}, &drivers.AttributeError{Attribute: AttrHost, Err: err}
		}
		ep.URL = u
	}
	if ep.URL.Scheme == SchemeTCP && ep.URL.Port() == "" {
		port := defaultTCPPort
		if ep.TLS() {
			port = defaultTLSPort
		}
		ep.URL.Host = net.JoinHostPort(ep.URL.Hostname(), port)
	}
	return ep, nil
}

// envTLS is the docker CLI's TLS from the environment: the files in
// DOCKER_CERT_PATH (default ~/.docker) when DOCKER_CERT_PATH or
// DOCKER_TLS_VERIFY is set, those of them that exist (ca.pem; cert.pem
// with key.pem).
func envTLS() (ca, cert, key string) {
	dir := os.Getenv("DOCKER_CERT_PATH")
	if dir == "" && os.Getenv("DOCKER_TLS_VERIFY") == "" {
		return "", "", ""
	}
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", "", ""
		}
		dir = filepath.Join(home, ".docker")
	}
	exists := func(name string) string {
		p := resolve(dir, name)
		if checkFile(p) != nil {
			return ""
		}
		return p
	}
	ca, cert, key = exists("ca.pem"), exists("cert.pem"), exists("key.pem")
	if cert == "" || key == "" {
		cert, key = "", ""
	}
	return ca, cert, key
}

// ParseHost parses an engine address: unix:///PATH, tcp://HOST[:PORT] or
// ssh://[USER@]HOST[:PORT].
func ParseHost(s string) (*url.URL, error) {
	const want = `use unix:///PATH, tcp://HOST:PORT (with tls_ca, tls_cert and tls_key for TLS) or ssh://USER@HOST`
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok {
		return nil, fmt.Errorf("%q is not an engine address: %s", s, want)
	}
	switch scheme {
	case SchemeUnix:
		if !strings.HasPrefix(rest, "/") {
			return nil, fmt.Errorf("%q names no absolute socket path: use unix:///PATH, like unix:///var/run/docker.sock", s)
		}
		return &url.URL{Scheme: SchemeUnix, Path: filepath.Clean(rest)}, nil
	case SchemeTCP, SchemeSSH:
	case "http", "https":
		return nil, fmt.Errorf("%q: the scheme is tcp://, not %s:// (%s)", s, scheme, want)
	default:
		return nil, fmt.Errorf("%q: unknown scheme %q; %s", s, scheme, want)
	}
	u, err := url.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("%q is not an engine address: %v", s, err)
	}
	if u.Hostname() == "" {
		return nil, fmt.Errorf("%q names no host", s)
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return nil, fmt.Errorf("%q: %q is not a port", s, p)
		}
	}
	if u.Path != "" && u.Path != "/" || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("%q: an engine address has no path or query after the host", s)
	}
	u.Path = ""
	if scheme == SchemeTCP && u.User != nil {
		return nil, fmt.Errorf("%q: a tcp:// address takes no user (the client certificate tls_cert identifies the client)", s)
	}
	if scheme == SchemeSSH && u.User != nil {
		if _, hasPassword := u.User.Password(); hasPassword {
			return nil, fmt.Errorf("%q: ssh:// takes no password; use a key (ssh-agent or ~/.ssh/config)", s)
		}
	}
	if scheme == SchemeSSH && (strings.HasPrefix(u.User.Username(), "-") || strings.HasPrefix(u.Hostname(), "-")) {
		return nil, fmt.Errorf("%q: an ssh user or host does not begin with \"-\"", s)
	}
	return u, nil
}

// resolve makes a path from the runtime block absolute, relative to the
// Bottlefile's directory (the working directory when dir is "").
func resolve(dir, p string) string {
	if !filepath.IsAbs(p) {
		p = filepath.Join(dir, p)
	}
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return filepath.Clean(p)
}

func checkFile(path string) error {
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("no file at %s", path)
	case err != nil:
		return fmt.Errorf("cannot read %s: %v", path, err)
	case fi.IsDir():
		return fmt.Errorf("%s is a directory, not a PEM file", path)
	}
	return nil
}

// ForHost is the endpoint of an engine at host (as the host attribute,
// without TLS; "" for DOCKER_HOST or the default socket), for callers
// that have an address and no runtime block: tests, a swarm node's
// engine.
func ForHost(runtime, host string) (Endpoint, error) {
	return FromConfig(drivers.ConfigureRequest{
		Runtime: runtime,
		Config:  cty.ObjectVal(map[string]cty.Value{AttrHost: cty.StringVal(host)}),
	})
}
