package engine

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/docker/docker/api/types/versions"
	"github.com/docker/docker/client"
	"github.com/hashicorp/go-hclog"

	"github.com/bottlefile/bottlefile/drivers"
)

// MinAPIVersion is the oldest engine API bottlefile drives (Docker 20.10).
const MinAPIVersion = "1.41"

// Failure says what failed when an engine could not be reached.
type Failure string

const (
	// Refused: nothing listens at the address (or no socket is there).
	Refused Failure = "refused"
	// TLS: the TLS handshake failed: the engine's certificate does not
	// verify against tls_ca or is not for the host, or the engine
	// refused the client certificate.
	TLS Failure = "TLS"
	// Authentication: ssh did not let bottlefile in (key, host key), or
	// the socket's permissions refused it.
	Authentication Failure = "authentication"
	// TooOld: the engine's API is older than MinAPIVersion.
	TooOld Failure = "API too old"
	// Unreachable: anything else between here and the engine: a name
	// that does not resolve, no route, no answer in time, no docker on
	// the ssh host, something that is not an engine answering.
	Unreachable Failure = "unreachable"
)

// ConnectError is a failure to reach an engine: from this package's
// dialer, or the version check of Connect.
type ConnectError struct {
	Failure Failure
	// Msg says what failed, in words, with what to do about it.
	Msg string
	// Err is the underlying error, when there is one.
	Err error
}

func (e *ConnectError) Error() string { return e.Msg }

func (e *ConnectError) Unwrap() error { return e.Err }

// FailureOf is the Failure of the ConnectError in err's chain; "" when
// there is none.
func FailureOf(err error) Failure {
	var ce *ConnectError
	if errors.As(err, &ce) {
		return ce.Failure
	}
	return ""
}

// Engine is a client of one runtime's engine. The embedded client is the
// docker API (version negotiated); Connect checks the engine once before
// the first call.
type Engine struct {
	*client.Client
	ep Endpoint

	mu        sync.Mutex
	connected bool
}

// Open makes a client of the endpoint's engine. It contacts nothing, and
// reads the TLS files: one that is not what its attribute says is a
// *drivers.AttributeError.
func (ep Endpoint) Open() (*Engine, error) { return ep.OpenTraced(nil) }

// OpenTraced is Open whose client logs every engine call at trace level
// to log (the call, its object, start and duration: trace.go), when log
// is at trace level; otherwise it is Open.
func (ep Endpoint) OpenTraced(log hclog.Logger) (*Engine, error) {
	d, err := newDialer(ep)
	if err != nil {
		return nil, err
	}
	// Idle connections are kept for an apply's parallel steps (10 by
	// default): over ssh each new one is an ssh login.
	tr := &http.Transport{MaxIdleConns: 16, MaxIdleConnsPerHost: 16, IdleConnTimeout: 30 * time.Second}
	hc := &http.Client{Transport: tr, CheckRedirect: client.CheckRedirect}
	host := ep.URL.String()
	if ep.URL.Scheme == SchemeSSH {
		// The client speaks HTTP over what the dialer returns; the
		// address only names the connections.
		host = "tcp://" + ep.hostPort()
		if ep.URL.Port() == "" {
			host += ":22"
		}
	}
	cli, err := client.NewClientWithOpts(
		client.WithHTTPClient(hc),
		client.WithHost(host),
		client.WithDialContext(d.dial),
		func(*client.Client) error {
			// The engine is reached at its own address, never through an
			// HTTP proxy of the environment (WithHost sets one for tcp).
			tr.Proxy = nil
			return nil
		},
		client.WithAPIVersionNegotiation(),
	)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ep.Address(), err)
	}
	if log != nil && log.IsTrace() {
		// Wrapped once the client is made: its options want the
		// *http.Transport itself.
		hc.Transport = &tracer{next: hc.Transport, log: log}
	}
	return &Engine{Client: cli, ep: ep}, nil
}

// Endpoint is where the engine is.
func (e *Engine) Endpoint() Endpoint { return e.ep }

// Connect checks, once per Engine, that the engine answers and that its
// API is at least MinAPIVersion, and fixes the API version the client
// speaks. A failure is a *drivers.UnreachableError whose Err is a
// *ConnectError (or the client's error when nothing more is known); a
// failure is not remembered: the next call tries again.
func (e *Engine) Connect(ctx context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.connected {
		return nil
	}
	ping, err := e.Client.Ping(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return err
		}
		if c := e.ep.Classify(err); c != err {
			return c
		}
		if strings.Contains(err.Error(), "HTTP request to an HTTPS server") {
			return e.ep.unreachable(e.ep.speaksTLS(err))
		}
		return e.ep.unreachable(&ConnectError{Failure: Unreachable, Msg: fmt.Sprintf("what answers there is not a Docker engine: %v", err), Err: err})
	}
	v := ping.APIVersion
	if v == "" || versions.LessThan(v, MinAPIVersion) {
		if v == "" {
			v = "(none given: before 1.24)"
		}
		return e.ep.unreachable(&ConnectError{Failure: TooOld, Msg: fmt.Sprintf("the engine's API version %s is older than %s, the oldest bottlefile drives (Docker 20.10): upgrade the engine", v, MinAPIVersion)})
	}
	e.Client.NegotiateAPIVersionPing(ping)
	e.connected = true
	return nil
}

// Classify turns an error that says the engine cannot be reached at all
// into a *drivers.UnreachableError naming the runtime and the address,
// which the planner reports once for the runtime rather than once per
// object. Other errors, and nil, pass unchanged.
func (ep Endpoint) Classify(err error) error {
	if err == nil {
		return nil
	}
	var ue *drivers.UnreachableError
	if errors.As(err, &ue) {
		return err
	}
	var ce *ConnectError
	if errors.As(err, &ce) {
		return ep.unreachable(ce)
	}
	if !client.IsErrConnectionFailed(err) {
		return err
	}
	if strings.Contains(err.Error(), "TLS-enabled daemon without TLS") {
		return ep.unreachable(ep.speaksTLS(err))
	}
	var cf interface{ Unwrap() error }
	inner := err
	for errors.As(inner, &cf) && client.IsErrConnectionFailed(cf.Unwrap()) {
		inner = cf.Unwrap()
	}
	return ep.unreachable(inner)
}

// speaksTLS is the failure of a client without TLS at an engine with.
func (ep Endpoint) speaksTLS(err error) *ConnectError {
	return &ConnectError{Failure: TLS, Msg: fmt.Sprintf("TLS: the engine at %s speaks TLS: set tls_ca, tls_cert and tls_key", ep.hostPort()), Err: err}
}

func (ep Endpoint) unreachable(err error) error {
	return &drivers.UnreachableError{Runtime: ep.Runtime, Address: ep.Address(), Err: err}
}
