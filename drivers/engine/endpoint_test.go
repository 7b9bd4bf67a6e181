package engine

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zclconf/go-cty/cty"

	"github.com/bottlefile/bottlefile/drivers"
)

// The fixtures in testdata/tls are a CA (ca.pem), a client certificate it
// signed and its key (cert.pem, key.pem), a key of nothing (other-key.pem)
// and a file that is no PEM (notpem.pem), made once with openssl.

// block is a decoded runtime block with the connection attributes; an
// attribute absent from attrs is null.
func block(attrs map[string]cty.Value) cty.Value {
	m := map[string]cty.Value{}
	for _, a := range []string{AttrHost, AttrTLSCA, AttrTLSCert, AttrTLSKey} {
		m[a] = cty.NullVal(cty.String)
	}
	for k, v := range attrs {
		m[k] = v
	}
	return cty.ObjectVal(m)
}

func s(v string) cty.Value { return cty.StringVal(v) }

// TestCheck: what validate says of host and tls_* in a runtime block,
// contacting nothing: each error on its attribute, with its words.
func TestCheck(t *testing.T) {
	unknown := cty.UnknownVal(cty.String)
	tls := func(host cty.Value) map[string]cty.Value {
		return map[string]cty.Value{AttrHost: host, AttrTLSCA: s("tls/ca.pem"), AttrTLSCert: s("tls/cert.pem"), AttrTLSKey: s("tls/key.pem")}
	}
	tests := []struct {
		name  string
		attrs map[string]cty.Value
		want  []string // "attribute: words"
	}{
		{"nothing set", nil, nil},
		{"unix", map[string]cty.Value{AttrHost: s("unix:///var/run/docker.sock")}, nil},
		{"tcp without TLS", map[string]cty.Value{AttrHost: s("tcp://10.0.0.5:2375")}, nil},
		{"tcp with TLS", tls(s("tcp://127.0.0.1:2376")), nil},
		{"tcp with TLS, absolute paths", map[string]cty.Value{AttrHost: s("tcp://engine.example:2376"), AttrTLSCA: s(abs(t, "testdata/tls/ca.pem"))}, nil},
		{"tcp with the CA only", map[string]cty.Value{AttrHost: s("tcp://h:2376"), AttrTLSCA: s("tls/ca.pem")}, nil},
		{"ssh", map[string]cty.Value{AttrHost: s("ssh://deploy@build-1.example")}, nil},
		{"ssh with a port", map[string]cty.Value{AttrHost: s("ssh://deploy@10.0.0.5:2222")}, nil},
		{"host unknown", tls(unknown), nil},
		{"tls unknown", map[string]cty.Value{AttrHost: s("unix:///x.sock"), AttrTLSCA: unknown}, nil},

		{"a path, no scheme", map[string]cty.Value{AttrHost: s("/var/run/docker.sock")}, []string{"host: is not an engine address"}},
		{"http", map[string]cty.Value{AttrHost: s("http://h:2375")}, []string{"host: the scheme is tcp://, not http://"}},
		{"unknown scheme", map[string]cty.Value{AttrHost: s("npipe:////./pipe/docker_engine")}, []string{`host: unknown scheme "npipe"`}},
		{"relative socket", map[string]cty.Value{AttrHost: s("unix://docker.sock")}, []string{"host: names no absolute socket path"}},
		{"no host name", map[string]cty.Value{AttrHost: s("tcp://:2376")}, []string{"host: names no host"}},
		{"bad port", map[string]cty.Value{AttrHost: s("tcp://h:99999")}, []string{`host: "tcp://h:99999": "99999" is not a port`}},
		{"ssh with a path", map[string]cty.Value{AttrHost: s("ssh://u@h/var/run/docker.sock")}, []string{"host: an engine address has no path"}},
		{"ssh with a password", map[string]cty.Value{AttrHost: s("ssh://u:secret@h")}, []string{"host: ssh:// takes no password"}},
		{"ssh user as an option", map[string]cty.Value{AttrHost: s("ssh://-oProxyCommand=x@h")}, []string{`host: "ssh://-oProxyCommand=x@h": an ssh user or host does not begin with "-"`}},
		{"tcp with a user", map[string]cty.Value{AttrHost: s("tcp://u@h:2376")}, []string{"host: a tcp:// address takes no user"}},

		{"TLS on a unix socket", tls(s("unix:///var/run/docker.sock")), []string{
			`tls_ca: only an engine at a tcp:// address takes TLS files, and host is "unix:///var/run/docker.sock" (a unix socket is secured by its file permissions)`,
			"tls_cert: only an engine at a tcp://", "tls_key: only an engine at a tcp://"}},
		{"TLS over ssh", map[string]cty.Value{AttrHost: s("ssh://u@h"), AttrTLSCA: s("tls/ca.pem")}, []string{"tls_ca: only an engine at a tcp:// address takes TLS files, and host is \"ssh://u@h\" (ssh:// is secured by ssh itself"}},
		{"TLS with no host", map[string]cty.Value{AttrTLSCA: s("tls/ca.pem")}, []string{`tls_ca: only an engine at a tcp:// address takes TLS files: set host = "tcp://HOST:PORT" in the same block`}},
		{"a missing CA", map[string]cty.Value{AttrHost: s("tcp://h:2376"), AttrTLSCA: s("tls/nope.pem")}, []string{"tls_ca: no file at " + abs(t, "testdata/tls/nope.pem")}},
		{"a missing file with host unknown", map[string]cty.Value{AttrHost: unknown, AttrTLSKey: s("tls/nope.pem"), AttrTLSCert: s("tls/cert.pem")}, []string{"tls_key: no file at"}},
		{"a directory", map[string]cty.Value{AttrHost: s("tcp://h:2376"), AttrTLSCA: s("tls")}, []string{"tls_ca: " + abs(t, "testdata/tls") + " is a directory"}},
		{"cert without key", map[string]cty.Value{AttrHost: s("tcp://h:2376"), AttrTLSCert: s("tls/cert.pem")}, []string{"tls_cert: needs tls_key"}},
		{"key without cert", map[string]cty.Value{AttrHost: s("tcp://h:2376"), AttrTLSKey: s("tls/key.pem")}, []string{"tls_key: needs tls_cert"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := drivers.ConfigureRequest{Runtime: "r", Config: block(tt.attrs), Dir: "testdata"}
			var got []string
			for _, e := range Check(req) {
				got = append(got, e.Error())
			}
			if len(got) != len(tt.want) {
				t.Fatalf("Check = %q, want %d errors like %q", got, len(tt.want), tt.want)
			}
			for i, w := range tt.want {
				attr, _, _ := strings.Cut(w, ":")
				if !strings.HasPrefix(got[i], attr+":") || !strings.Contains(got[i], strings.TrimPrefix(w, attr+": ")) {
					t.Errorf("error %d = %q, want %q", i, got[i], w)
				}
			}
			// Configure refuses what validate does, naming the first
			// attribute; what validate passes (all known) it takes.
			if tt.attrs[AttrHost] == unknown || tt.attrs[AttrTLSCA] == unknown {
				return
			}
			_, err := FromConfig(req)
			var ae *drivers.AttributeError
			switch {
			case len(tt.want) == 0 && err != nil:
				t.Errorf("FromConfig: %v", err)
			case len(tt.want) > 0 && (!errors.As(err, &ae) || ae.Error() != got[0]):
				t.Errorf("FromConfig: %v, want %q", err, got[0])
			}
		})
	}
}

func abs(t *testing.T, p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestFromConfig: where the attributes and the environment leave the
// engine, and how errors name it.
func TestFromConfig(t *testing.T) {
	tests := []struct {
		name             string
		attrs            map[string]cty.Value
		env              map[string]string
		url, address     string
		tls, local       bool
		ca, cert, key    string
		hostAddrs        string
		dockerCertPathCA bool
	}{
		{name: "default socket", url: "unix:///var/run/docker.sock", address: "unix:///var/run/docker.sock", local: true},
		{name: "DOCKER_HOST", env: map[string]string{"DOCKER_HOST": "tcp://192.0.2.4"}, url: "tcp://192.0.2.4:2375", address: "DOCKER_HOST=tcp://192.0.2.4", hostAddrs: "[192.0.2.4]"},
		{name: "DOCKER_HOST with DOCKER_CERT_PATH", env: map[string]string{"DOCKER_HOST": "tcp://192.0.2.4", "DOCKER_CERT_PATH": "testdata/tls"}, url: "tcp://192.0.2.4:2376", address: "DOCKER_HOST=tcp://192.0.2.4", tls: true, ca: "testdata/tls/ca.pem", cert: "testdata/tls/cert.pem", key: "testdata/tls/key.pem", hostAddrs: "[192.0.2.4]"},
		{name: "the block wins", attrs: map[string]cty.Value{AttrHost: s("unix:///run/other.sock")}, env: map[string]string{"DOCKER_HOST": "tcp://192.0.2.4:2375", "DOCKER_CERT_PATH": "testdata/tls"}, url: "unix:///run/other.sock", address: `host = "unix:///run/other.sock"`, local: true},
		{name: "tcp with TLS", attrs: map[string]cty.Value{AttrHost: s("tcp://127.0.0.1"), AttrTLSCA: s("tls/ca.pem"), AttrTLSCert: s("tls/cert.pem"), AttrTLSKey: s("tls/key.pem")}, url: "tcp://127.0.0.1:2376", address: `host = "tcp://127.0.0.1"`, tls: true, local: true, ca: "testdata/tls/ca.pem", cert: "testdata/tls/cert.pem", key: "testdata/tls/key.pem", hostAddrs: "[127.0.0.1]"},
		{name: "ssh", attrs: map[string]cty.Value{AttrHost: s("ssh://deploy@192.0.2.9:2222")}, url: "ssh://deploy@192.0.2.9:2222", address: `host = "ssh://deploy@192.0.2.9:2222"`, hostAddrs: "[192.0.2.9]"},
		{name: "ssh to localhost", attrs: map[string]cty.Value{AttrHost: s("ssh://root@localhost")}, url: "ssh://root@localhost", address: `host = "ssh://root@localhost"`, local: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, k := range []string{"DOCKER_HOST", "DOCKER_CERT_PATH", "DOCKER_TLS_VERIFY"} {
				t.Setenv(k, tt.env[k])
			}
			ep, err := FromConfig(drivers.ConfigureRequest{Runtime: "r", Config: block(tt.attrs), Dir: "testdata"})
			if err != nil {
				t.Fatal(err)
			}
			if ep.URL.String() != tt.url || ep.Address() != tt.address || ep.TLS() != tt.tls || ep.Local() != tt.local {
				t.Errorf("url %s, address %s, tls %v, local %v; want %s, %s, %v, %v", ep.URL, ep.Address(), ep.TLS(), ep.Local(), tt.url, tt.address, tt.tls, tt.local)
			}
			for _, f := range []struct{ got, want string }{{ep.CA, tt.ca}, {ep.Cert, tt.cert}, {ep.Key, tt.key}} {
				if f.want != "" && f.got != abs(t, f.want) || f.want == "" && f.got != "" {
					t.Errorf("TLS file %q, want %q", f.got, f.want)
				}
			}
			if tt.hostAddrs != "" || tt.name == "default socket" {
				addrs, err := ep.HostAddrs(t.Context())
				if err != nil || (tt.hostAddrs == "" && len(addrs) != 0) || (tt.hostAddrs != "" && fmt.Sprint(addrs) != tt.hostAddrs) {
					t.Errorf("HostAddrs = %v, %v; want %s", addrs, err, tt.hostAddrs)
				}
			}
		})
	}
	t.Run("bad DOCKER_HOST", func(t *testing.T) {
		t.Setenv("DOCKER_HOST", "docker.example:2375")
		_, err := FromConfig(drivers.ConfigureRequest{Runtime: "r", Config: block(nil)})
		if err == nil || !strings.HasPrefix(err.Error(), "DOCKER_HOST: ") {
			t.Errorf("err = %v", err)
		}
	})
}

// TestOpenReadsTLSFiles: files that exist but are not what their
// attribute says are refused at Configure (Open), on that attribute,
// before any engine is contacted.
func TestOpenReadsTLSFiles(t *testing.T) {
	tests := []struct {
		ca, cert, key string
		want          string
	}{
		{"tls/ca.pem", "tls/cert.pem", "tls/key.pem", ""},
		{"tls/notpem.pem", "tls/cert.pem", "tls/key.pem", "tls_ca: " + abs(t, "testdata/tls/notpem.pem") + " holds no PEM certificate"},
		{"tls/ca.pem", "tls/notpem.pem", "tls/key.pem", "tls_cert: " + abs(t, "testdata/tls/notpem.pem") + " and " + abs(t, "testdata/tls/key.pem") + " are not a PEM certificate and its key"},
		{"tls/ca.pem", "tls/cert.pem", "tls/other-key.pem", "are not a PEM certificate and its key: tls: private key does not match public key"},
	}
	for _, tt := range tests {
		ep, err := FromConfig(drivers.ConfigureRequest{Runtime: "r", Dir: "testdata", Config: block(map[string]cty.Value{
			AttrHost: s("tcp://127.0.0.1:1"), AttrTLSCA: s(tt.ca), AttrTLSCert: s(tt.cert), AttrTLSKey: s(tt.key)})})
		if err != nil {
			t.Fatal(err)
		}
		eng, err := ep.Open()
		if tt.want == "" {
			if err != nil {
				t.Errorf("%v: %v", tt, err)
			} else {
				eng.Close()
			}
			continue
		}
		var ae *drivers.AttributeError
		if !errors.As(err, &ae) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%v: err = %v, want an attribute error with %q", tt, err, tt.want)
		}
	}
}
