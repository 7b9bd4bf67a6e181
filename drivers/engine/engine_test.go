package engine_test

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/zclconf/go-cty/cty"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/docker/dockertest"
	"github.com/bottlefile/bottlefile/drivers/engine"
	"github.com/bottlefile/bottlefile/drivers/engine/enginetest"
)

// endpoint is the endpoint of a runtime block with these attributes
// (host, tls_ca, tls_cert, tls_key; "" for null).
func endpoint(t *testing.T, host, ca, cert, key string) engine.Endpoint {
	t.Helper()
	v := func(s string) cty.Value {
		if s == "" {
			return cty.NullVal(cty.String)
		}
		return cty.StringVal(s)
	}
	ep, err := engine.FromConfig(drivers.ConfigureRequest{Runtime: "remote", Config: cty.ObjectVal(map[string]cty.Value{
		engine.AttrHost: v(host), engine.AttrTLSCA: v(ca), engine.AttrTLSCert: v(cert), engine.AttrTLSKey: v(key),
	})})
	if err != nil {
		t.Fatal(err)
	}
	return ep
}

// connect opens the endpoint and connects, returning Connect's error.
func connect(t *testing.T, ep engine.Endpoint) (*engine.Engine, error) {
	t.Helper()
	eng, err := ep.Open()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	return eng, eng.Connect(t.Context())
}

// wantFailure checks that err is one UnreachableError for the runtime,
// of the failure, whose words contain each of words.
func wantFailure(t *testing.T, err error, f engine.Failure, words ...string) {
	t.Helper()
	var ue *drivers.UnreachableError
	if !errors.As(err, &ue) || ue.Runtime != "remote" {
		t.Fatalf("err = %v (%T), want an UnreachableError of runtime remote", err, err)
	}
	t.Log(err)
	if got := engine.FailureOf(err); got != f {
		t.Errorf("failure %q, want %q: %v", got, f, err)
	}
	for _, w := range words {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error lacks %q: %v", w, err)
		}
	}
}

// TestTLSEngine: an engine behind TLS that requires a client certificate
// answers with the right CA and certificate, on every call (Connect, a
// list), and each wrong certificate gives a TLS failure that says whose.
func TestTLSEngine(t *testing.T) {
	dockertest.Client(t) // the engine behind the TLS endpoint, or skip
	te := enginetest.StartTLSEngine(t, enginetest.Socket)

	t.Run("verified both ways", func(t *testing.T) {
		eng, err := connect(t, endpoint(t, te.Host(), te.CA.File, te.Client.Cert, te.Client.Key))
		if err != nil {
			t.Fatal(err)
		}
		info, err := eng.Info(t.Context())
		if err != nil || info.ID == "" {
			t.Fatalf("Info over TLS: %v", err)
		}
		if v := eng.ClientVersion(); v == "" || v < engine.MinAPIVersion {
			t.Errorf("negotiated API %q", v)
		}
		if te.Handled() == 0 {
			t.Error("the TLS engine handled no connection: the client went elsewhere")
		}
	})
	t.Run("another CA", func(t *testing.T) {
		other := enginetest.NewCA(t, "other")
		_, err := connect(t, endpoint(t, te.Host(), other.File, te.Client.Cert, te.Client.Key))
		wantFailure(t, err, engine.TLS, `host = "`+te.Host()+`"`, "TLS: the engine's certificate at "+te.Addr+" is not signed by tls_ca ("+other.File+")", "unknown authority")
	})
	t.Run("a client certificate of another CA", func(t *testing.T) {
		other := enginetest.NewCA(t, "other").Issue(t, "client")
		_, err := connect(t, endpoint(t, te.Host(), te.CA.File, other.Cert, other.Key))
		wantFailure(t, err, engine.TLS, "refused the client certificate tls_cert ("+other.Cert+")")
	})
	t.Run("no client certificate", func(t *testing.T) {
		_, err := connect(t, endpoint(t, te.Host(), te.CA.File, "", ""))
		wantFailure(t, err, engine.TLS, "set tls_cert and tls_key")
	})
	t.Run("a name the certificate is not for", func(t *testing.T) {
		named := enginetest.StartTLSEngine(t, enginetest.Socket, "engine.invalid")
		_, err := connect(t, endpoint(t, named.Host(), named.CA.File, named.Client.Cert, named.Client.Key))
		wantFailure(t, err, engine.TLS, "the engine's certificate is not for 127.0.0.1")
	})
	t.Run("without TLS", func(t *testing.T) {
		_, err := connect(t, endpoint(t, te.Host(), "", "", ""))
		wantFailure(t, err, engine.TLS, "speaks TLS: set tls_ca, tls_cert and tls_key")
	})
}

// TestUnreachable: each way of not reaching an engine is one
// UnreachableError that says which, from Connect and from any later call.
func TestUnreachable(t *testing.T) {
	t.Run("refused", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		eng, err := connect(t, endpoint(t, "tcp://"+addr, "", "", ""))
		wantFailure(t, err, engine.Refused, "the connection to "+addr+" was refused")
		// A call without Connect fails the same once classified.
		_, err = eng.Info(t.Context())
		wantFailure(t, eng.Endpoint().Classify(err), engine.Refused, "was refused")
	})
	t.Run("no socket", func(t *testing.T) {
		sock := t.TempDir() + "/docker.sock"
		_, err := connect(t, endpoint(t, "unix://"+sock, "", "", ""))
		wantFailure(t, err, engine.Refused, "the socket "+sock+" does not exist")
	})
	t.Run("TLS to a plain port", func(t *testing.T) {
		srv := httptest.NewServer(http.NotFoundHandler())
		defer srv.Close()
		te := enginetest.NewCA(t, "ca")
		_, err := connect(t, endpoint(t, "tcp://"+srv.Listener.Addr().String(), te.File, "", ""))
		wantFailure(t, err, engine.TLS, "does not speak TLS")
	})
	t.Run("not an engine", func(t *testing.T) {
		srv := httptest.NewServer(http.NotFoundHandler())
		defer srv.Close()
		_, err := connect(t, endpoint(t, "tcp://"+srv.Listener.Addr().String(), "", "", ""))
		wantFailure(t, err, engine.Unreachable, "not a Docker engine")
	})
}

// TestAPITooOld: an engine older than API 1.41 is refused at Connect,
// naming its version, and the client never speaks to it beyond the ping.
func TestAPITooOld(t *testing.T) {
	var paths []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		paths = append(paths, r.URL.Path)
		w.Header().Set("Api-Version", "1.40")
		io.WriteString(w, "OK")
	}))
	defer srv.Close()
	_, err := connect(t, endpoint(t, "tcp://"+srv.Listener.Addr().String(), "", "", ""))
	wantFailure(t, err, engine.TooOld, "API version 1.40 is older than 1.41", "upgrade the engine")
	for _, p := range paths {
		if p != "/_ping" {
			t.Errorf("asked %s of an engine too old", p)
		}
	}
}

// TestSSHEngine: an engine reached with ssh:// through the ssh client
// and `docker system dial-stdio` on the far side (a real sshd of the
// test's on loopback) answers; a key the sshd refuses and a host key the
// client does not know are authentication failures, an address where no
// sshd listens a refusal.
func TestSSHEngine(t *testing.T) {
	dockertest.Client(t)
	sshd := enginetest.StartSSHD(t)

	t.Run("a key the host takes", func(t *testing.T) {
		sshd.UseClient(t, enginetest.Client{})
		eng, err := connect(t, endpoint(t, sshd.Host(), "", "", ""))
		if err != nil {
			t.Fatalf("%v\nsshd:\n%s", err, sshd.Log())
		}
		info, err := eng.Info(t.Context())
		if err != nil || info.ID == "" {
			t.Fatalf("Info over ssh: %v", err)
		}
	})
	t.Run("a key the host refuses", func(t *testing.T) {
		sshd.UseClient(t, enginetest.Client{OtherKey: true})
		_, err := connect(t, endpoint(t, sshd.Host(), "", "", ""))
		wantFailure(t, err, engine.Authentication, "ssh authentication to "+sshd.User+"@127.0.0.1:", "Permission denied (publickey)")
	})
	t.Run("a host key not known", func(t *testing.T) {
		sshd.UseClient(t, enginetest.Client{UnknownHost: true})
		_, err := connect(t, endpoint(t, sshd.Host(), "", "", ""))
		wantFailure(t, err, engine.Authentication, "ssh does not know the host key of", "connect once with ssh")
	})
	t.Run("no sshd there", func(t *testing.T) {
		sshd.UseClient(t, enginetest.Client{})
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().(*net.TCPAddr)
		ln.Close()
		_, err = connect(t, endpoint(t, fmt.Sprintf("ssh://%s@127.0.0.1:%d", sshd.User, addr.Port), "", "", ""))
		wantFailure(t, err, engine.Refused, "was refused: no ssh server listens there")
	})
}
