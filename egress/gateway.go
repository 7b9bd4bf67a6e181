package egress

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Resolver looks up the addresses of a name. *net.Resolver is one.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Dialer opens connections. *net.Dialer is one. The gateway only ever dials
// "tcp" to an IP address and port it has checked.
type Dialer interface {
	DialContext(ctx context.Context, network, address string) (net.Conn, error)
}

// Defaults for the zero values of the Gateway's settings.
const (
	DefaultConnectTimeout    = 10 * time.Second
	DefaultIdleTimeout       = 2 * time.Minute
	DefaultKeepAliveTimeout  = 30 * time.Second
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultWriteTimeout      = 30 * time.Second
	DefaultMaxHeaderBytes    = 64 << 10
	DefaultMaxConns          = 1024
)

// answerTimeout bounds writing one of the gateway's own answers (a refusal,
// a health check): a client that never reads it does not hold the
// connection longer.
const answerTimeout = 10 * time.Second

// healthPath is the one origin-form request the gateway answers (200 "ok"),
// for health checks; it is not a decision and is not logged.
const healthPath = "/.bottlefile/health"

// Gateway is the egress proxy of one agent. Set its fields before serving and
// do not change them afterwards; change the allowlist with [Gateway.SetRules].
// The zero Gateway denies everything.
type Gateway struct {
	// Agent names the agent in refusals ("... is not in the allowlist of
	// agent.coder"). A rules file with an agent name overrides it.
	Agent string
	// Ceiling, when not nil, bounds every rule: a destination is allowed
	// only when a rule and a ceiling rule both allow it, whatever the rules
	// file says (an empty Ceiling allows nothing). It is the effective
	// egress ceiling (the operator's policy, or the runtime's narrower
	// egress_ceiling), given on the command line, which neither the agent
	// nor an edit of the rules file can change.
	Ceiling []Rule
	// Forbidden are prefixes the gateway never connects to, in addition to
	// the built-in ones (loopback, link-local, ...): the docker host's own
	// addresses, the bottle networks. An address rule does not override them.
	Forbidden []netip.Prefix
	// Resolver resolves allowed names; nil means net.DefaultResolver.
	Resolver Resolver
	// Dialer connects to checked addresses; nil means a net.Dialer.
	Dialer Dialer
	// Log receives one JSON line ([Decision]) per decision, in one Write each;
	// nil discards them. The gateway serializes its writes.
	Log io.Writer
	// Now is the clock of the decision log; nil means time.Now.
	Now func() time.Time

	// ConnectTimeout bounds resolving a name and, separately, connecting to
	// its addresses.
	ConnectTimeout time.Duration
	// IdleTimeout closes a tunnel or a forwarded exchange when no byte moved
	// either way for that long.
	IdleTimeout time.Duration
	// KeepAliveTimeout closes a client connection idle between requests.
	KeepAliveTimeout time.Duration
	// ReadHeaderTimeout bounds reading a request's header.
	ReadHeaderTimeout time.Duration
	// WriteTimeout bounds writing a response; tunnels and forwarded
	// exchanges extend it as long as bytes move (IdleTimeout).
	WriteTimeout time.Duration
	// MaxHeaderBytes bounds a request's header (and request line).
	MaxHeaderBytes int
	// MaxConns caps the client connections held at once (see connLimit).
	MaxConns int

	// loopbackByRule treats loopback like a private range (dialed when an
	// address rule names it) instead of forbidding it. Tests only: their
	// servers listen on loopback, where in a bottle only the gateway is.
	loopbackByRule bool
	// answerTimeout overrides answerTimeout. Tests only.
	answerTimeout time.Duration

	ruleset   atomic.Pointer[ruleset]
	ruleMu    sync.Mutex                     // serializes setRuleset, so serials never repeat
	forbidden atomic.Pointer[[]netip.Prefix] // SetForbidden's, beside Forbidden
	logMu     sync.Mutex
	refusals  refusalLimit
	allowed   allowedLimit

	creds atomic.Pointer[credset] // SetCredentials'; nil for none

	// activity stamps the time of the last proxy request (activity.go);
	// nil for none. Set before serving.
	activity *activityStamp

	tunnelMu sync.Mutex
	tunnels  map[*tunnel]struct{}
	lim      atomic.Pointer[connLimit] // of the last Serve
}

// held is the number of client connections the gateway holds.
func (g *Gateway) held() int {
	if l := g.lim.Load(); l != nil {
		return l.held()
	}
	return 0
}

// tunnel is an open connection to a destination (a CONNECT tunnel or a
// forwarded exchange), closed when the rules stop allowing it.
type tunnel struct {
	host  hostKey
	port  int
	addr  netip.Addr // the address it connected to
	close func()
	// intercepted: the gateway terminates its TLS to inject credentials;
	// a change of credentials closes it.
	intercepted bool
	trust       string // an intercepted tunnel's CA and upstream CAs
}

type ruleset struct {
	agent string // from a rules file; "" means Gateway.Agent
	rules []Rule
	// serial numbers the allowlists this gateway applied: 1 for the
	// first, one more at every change. Every decision carries it.
	serial uint64
	// sidecars are the names of the bottle's sidecars (from the rules
	// file), which a client must reach directly, not through the proxy.
	sidecars []string
}

// SetRules replaces the allowlist atomically, and closes the open tunnels
// and forwarded exchanges the new rules do not allow; it returns how many
// it closed. Every later decision uses the new rules.
func (g *Gateway) SetRules(rules []Rule) int {
	agent, sidecars := "", []string(nil)
	if rs := g.ruleset.Load(); rs != nil {
		agent, sidecars = rs.agent, rs.sidecars
	}
	return g.setRuleset(agent, rules, sidecars)
}

// Serial is the serial of the allowlist in force: 0 before any, 1 for
// the first applied, one more at every change since.
func (g *Gateway) Serial() uint64 { return g.current().serial }

func (g *Gateway) setRuleset(agent string, rules []Rule, sidecars []string) int {
	g.ruleMu.Lock()
	serial := g.current().serial + 1
	g.ruleset.Store(&ruleset{agent: agent, rules: slices.Clone(rules), serial: serial, sidecars: slices.Clone(sidecars)})
	g.ruleMu.Unlock()
	return g.revoke()
}

// SetForbidden replaces the prefixes the gateway never connects to besides
// Forbidden and the built-in ones (the driver keeps them current as
// networks come and go), and closes the tunnels now forbidden; it returns
// how many it closed.
func (g *Gateway) SetForbidden(prefixes []netip.Prefix) int {
	ps := slices.Clone(prefixes)
	g.forbidden.Store(&ps)
	return g.revoke()
}

// revoke closes the tunnels the rules and forbidden prefixes in force no
// longer allow, and returns how many.
func (g *Gateway) revoke() int {
	g.tunnelMu.Lock()
	defer g.tunnelMu.Unlock()
	n := 0
	for t := range g.tunnels {
		if !g.stillAllowed(t) {
			t.close()
			delete(g.tunnels, t)
			n++
		}
	}
	return n
}

// stillAllowed re-decides t under the rules in force, for the address it
// connected to (without resolving again).
func (g *Gateway) stillAllowed(t *tunnel) bool {
	rules := g.current().rules
	_, ok := matchKey(rules, t.host, t.port)
	return ok && g.underCeiling(t.host, t.port) && g.checkAddr(t.addr, t.port, rules) == ""
}

// track records an open tunnel until the returned func is called. When
// the rules changed since its decision and no longer allow it, it is
// closed at once (revoke may have run before it was recorded).
func (g *Gateway) track(host hostKey, port int, addr netip.Addr, close func()) (untrack func()) {
	return g.trackTunnel(&tunnel{host: host, port: port, addr: addr, close: close})
}

func (g *Gateway) trackTunnel(t *tunnel) (untrack func()) {
	g.tunnelMu.Lock()
	if g.tunnels == nil {
		g.tunnels = map[*tunnel]struct{}{}
	}
	g.tunnels[t] = struct{}{}
	g.tunnelMu.Unlock()
	end := g.activity.begin()
	if !g.stillAllowed(t) {
		g.revoke()
	}
	return func() {
		g.tunnelMu.Lock()
		delete(g.tunnels, t)
		g.tunnelMu.Unlock()
		end()
	}
}

// Rules returns a copy of the allowlist in force.
func (g *Gateway) Rules() []Rule {
	return slices.Clone(g.current().rules)
}

func (g *Gateway) current() *ruleset {
	if rs := g.ruleset.Load(); rs != nil {
		return rs
	}
	return &ruleset{}
}

// Decision is one line of the decision log.
type Decision struct {
	Time        time.Time `json:"time"`        // RFC 3339 with nanoseconds, UTC
	Source      string    `json:"source"`      // the client, ip:port
	Destination string    `json:"destination"` // host:port as requested
	Rule        string    `json:"rule"`        // the rule that matched the destination, canonical; "" for none
	Allowed     bool      `json:"allowed"`     // the policy's decision: rules and address policy passed
	Outcome     string    `json:"outcome"`     // what happened: one of the Outcome constants
	Reason      string    `json:"reason"`      // why, or what happened, in words
	// Serial is the serial of the allowlist that made the decision
	// ([Gateway.Serial]); the rules-loaded event with that serial lists it.
	Serial uint64 `json:"serial"`
	// Suppressed counts this source's refusals left out of the log (rate
	// limited) since its previous line; on an allowed line, the allowed
	// requests left out (past the aggregates a source may hold).
	Suppressed int `json:"suppressed,omitempty"`
	// Count is how many allowed requests the line stands for: more than
	// one on an aggregate of requests past the allowed-lines rate limit
	// (their last time, source and reason); 0 means one.
	Count int `json:"count,omitempty"`
	// Refusal is why the policy refused a request, as one of the Refusal
	// constants, for programs (Reason says it in words); "" on an allowed
	// line, and on the lines of a gateway older than the field.
	Refusal string `json:"refusal,omitempty"`
	// AllowWith is the allow rule, canonical, that would let a refused
	// destination through ("api.example.com:443", "10.0.0.5:443" for a
	// private address only a rule naming it allows); "" when no allow rule
	// would (see Refusal).
	AllowWith string `json:"allow_with,omitempty"`
}

// Requests is how many requests the line stands for.
func (d Decision) Requests() int { return max(d.Count, 1) }

// What happened to a request, in Decision.Outcome. Allowed is the policy's
// decision; the outcome is what came of it.
const (
	OutcomeConnected  = "connected"              // allowed, and connected
	OutcomeDenied     = "denied"                 // the policy refused it: nothing was attempted
	OutcomeBadRequest = "bad-request"            // not a proxy request the gateway serves (400)
	OutcomeRefused    = "refused-by-destination" // allowed; the destination refused the connection
	OutcomeDNSFailed  = "dns-failed"             // allowed; the name did not resolve
	OutcomeTimedOut   = "timed-out"              // allowed; resolving or connecting timed out
	OutcomeFailed     = "failed"                 // allowed; connecting failed otherwise (unreachable)
	// OutcomeIntercepted: allowed, a CONNECT to a credential host, whose
	// TLS the gateway terminates to inject the credential.
	OutcomeIntercepted = "intercepted"
	// OutcomeCredentialInjected: one request of an intercepted tunnel,
	// forwarded with its credentials set.
	OutcomeCredentialInjected = "credential-injected"
	// OutcomeCredentialElsewhere: refused, the request carries a
	// credential's placeholder to a destination not its own.
	OutcomeCredentialElsewhere = "credential-elsewhere"
)

// Why the policy refused a request, in Decision.Refusal.
const (
	// RefusalNotAllowed: no rule of the allowlist matches the destination;
	// AllowWith is the rule that would (none when the ceiling would refuse
	// it too).
	RefusalNotAllowed = "not-allowed"
	// RefusalSidecar: the destination is a sidecar of this bottle, which
	// the client must reach directly, not through the proxy.
	RefusalSidecar = "sidecar"
	// RefusalCeiling: a rule matches, the operator's ceiling does not.
	RefusalCeiling = "ceiling"
	// RefusalAddress: a rule matches, the address it resolves to is one the
	// gateway does not dial; AllowWith is the address rule that would allow
	// it (a private address), none when it never dials it.
	RefusalAddress = "address"
	// RefusalRequest: the request itself is refused (malformed, a
	// credential's placeholder sent elsewhere, a request a credential host
	// does not take): no allow rule changes that.
	RefusalRequest = "request"
)

// unparsed marks a destination the gateway could not parse, as the client
// wrote it, in the decision log.
const unparsed = "(unparsed) "

// Serve accepts proxy connections on l until ctx is done, then closes l and
// every connection (tunnels included), waits for its handlers to return, and
// returns nil. It returns an error if l fails first.
func (g *Gateway) Serve(ctx context.Context, l net.Listener) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var hs handlerSet
	lim := newConnLimit(g.maxConns())
	g.lim.Store(lim)
	l = limitListener{Listener: l, lim: lim}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !hs.enter() {
				http.Error(w, "bottlefile egress: the gateway is shutting down", http.StatusServiceUnavailable)
				return
			}
			defer hs.leave()
			g.ServeHTTP(w, r)
		}),
		ReadHeaderTimeout:            g.readHeaderTimeout(),
		WriteTimeout:                 orDefault(g.WriteTimeout, DefaultWriteTimeout),
		IdleTimeout:                  orDefault(g.KeepAliveTimeout, DefaultKeepAliveTimeout),
		MaxHeaderBytes:               g.maxHeaderBytes(),
		ConnState:                    lim.state,
		ErrorLog:                     log.New(io.Discard, "", 0),
		BaseContext:                  func(net.Listener) context.Context { return ctx },
		DisableGeneralOptionsHandler: true,
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(l) }()
	flushed := make(chan struct{})
	go func() {
		defer close(flushed)
		g.flushAggregates(ctx)
	}()
	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	cancel() // ends tunnels and forwarded requests
	srv.Close()
	if err == nil {
		<-errc
	}
	hs.wait()
	<-flushed
	g.writeDecisions(g.allowed.flush(g.now())...) // what the last requests left pending
	g.activity.stop()
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// flushAggregates writes the aggregated allowed lines every
// aggregateEvery until ctx is done, so that a quiet source's last
// requests are not held back.
func (g *Gateway) flushAggregates(ctx context.Context) {
	t := time.NewTicker(aggregateEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			g.writeDecisions(g.allowed.flush(g.now())...)
		}
	}
}

// handlerSet counts running handlers so that Serve can wait for them,
// hijacked ones included, which http.Server does not track.
type handlerSet struct {
	mu      sync.Mutex
	n       int
	closing bool
	idle    chan struct{}
}

func (h *handlerSet) enter() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closing {
		return false
	}
	h.n++
	return true
}

func (h *handlerSet) leave() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.n--
	if h.closing && h.n == 0 {
		close(h.idle)
	}
}

func (h *handlerSet) wait() {
	h.mu.Lock()
	h.closing = true
	if h.n == 0 {
		h.mu.Unlock()
		return
	}
	h.idle = make(chan struct{})
	h.mu.Unlock()
	<-h.idle
}

// ServeHTTP serves one proxy request: CONNECT host:port, or an absolute-form
// http:// request. It answers anything else 400. Under [Gateway.Serve], a
// tunnel ends when Serve stops; served by another http.Server, it ends when a
// side closes it or it is idle.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodConnect:
		g.activity.request()
		g.serveConnect(w, r)
	case r.URL.IsAbs():
		g.activity.request()
		g.serveForward(w, r)
	case (r.Method == http.MethodGet || r.Method == http.MethodHead) && r.URL.Path == healthPath:
		http.NewResponseController(w).SetWriteDeadline(time.Now().Add(orDefault(g.answerTimeout, answerTimeout)))
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		io.WriteString(w, "ok\n")
	default:
		// The Host header is the client's claim, not a destination.
		g.refuse(w, r, verdict{
			dest:    unparsed + r.Host,
			status:  http.StatusBadRequest,
			outcome: OutcomeBadRequest,
			reason:  fmt.Sprintf("%s %s is not a proxy request; this is an HTTP proxy: send CONNECT host:port, or an absolute URL (GET http://host/path)", clip(r.Method, 20), clip(r.RequestURI, 100)),
		})
	}
}

// verdict is the outcome of a decision.
type verdict struct {
	dest    string // host:port for the log
	rule    string
	allowed bool
	status  int    // when not served: 400 or 403 (refused), 502 (failed)
	outcome string // an Outcome constant
	serial  uint64 // of the allowlist that decided
	reason  string // why, or what happened
	refusal string // a Refusal constant, when refused
	// allowWith is the allow rule that would let a refused request through.
	allowWith string
	addrs     []netip.Addr
	port      int
}

// target is a parsed, normalized destination.
type target struct {
	host hostKey
	port int
}

func (t target) String() string {
	h := t.host.name
	if t.host.addr.IsValid() {
		h = t.host.addr.String()
	}
	return net.JoinHostPort(h, strconv.Itoa(t.port))
}

// parseTarget parses the host and port of a request; the error is a reason
// to answer 400.
func parseTarget(host, port string) (target, error) {
	p, err := parsePort(port)
	if err != nil {
		return target{}, err
	}
	if host == "" {
		return target{}, errors.New("missing host")
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if a.Zone() != "" {
			return target{}, fmt.Errorf("%q: an IPv6 zone is not allowed", host)
		}
		return target{host: hostKey{addr: a.Unmap()}, port: p}, nil
	}
	name := strings.TrimSuffix(asciiLower(host), ".")
	if err := checkName(name); err != nil {
		return target{}, fmt.Errorf("invalid host %q: %v", host, err)
	}
	return target{host: hostKey{name: name}, port: p}, nil
}

// decide applies the rules and the address policy to t, resolving its name
// when a rule allows it.
func (g *Gateway) decide(ctx context.Context, t target) verdict {
	rs := g.current()
	v := verdict{dest: t.String(), port: t.port, serial: rs.serial}
	rule, ok := matchKey(rs.rules, t.host, t.port)
	if !ok {
		v.status, v.outcome, v.refusal = http.StatusForbidden, OutcomeDenied, RefusalNotAllowed
		if slices.Contains(rs.sidecars, t.host.name) {
			v.refusal = RefusalSidecar
			v.reason = fmt.Sprintf("%s is a sidecar of this bottle: connect to %s directly, not through the proxy (the client ignored NO_PROXY, which names it)", t.host.name, v.dest)
			return v
		}
		v.reason = fmt.Sprintf("%s is not in the allowlist%s%s", v.dest, g.of(rs), portHint(rs.rules, t))
		if g.underCeiling(t.host, t.port) {
			v.allowWith = Rule{Host: t.host.name, Prefix: hostPrefix(t.host.addr), Port: t.port}.String()
		}
		return v
	}
	v.rule = rule.String()
	if !g.underCeiling(t.host, t.port) {
		v.status, v.outcome, v.refusal = http.StatusForbidden, OutcomeDenied, RefusalCeiling
		v.reason = fmt.Sprintf("%s is outside the egress ceiling of this gateway (the operator's policy), which no rules file widens", v.dest)
		return v
	}
	addrs := []netip.Addr{t.host.addr}
	if !t.host.addr.IsValid() {
		rctx, cancel := context.WithTimeout(ctx, g.connectTimeout())
		defer cancel()
		// Rooted: the resolver's search domains never apply, so no name
		// but the one allowed is ever looked up.
		ips, err := g.resolver().LookupNetIP(rctx, "ip", t.host.name+".")
		if err == nil && len(ips) == 0 {
			err = errors.New("no addresses")
		}
		if err != nil {
			v.allowed = true
			v.status, v.outcome = http.StatusBadGateway, OutcomeDNSFailed
			if timedOut(err) {
				v.outcome = OutcomeTimedOut
			}
			v.reason = fmt.Sprintf("cannot resolve %s: %v", t.host.name, err)
			return v
		}
		addrs = ips
	}
	var checked []netip.Addr
	for _, a := range addrs {
		a = a.Unmap().WithZone("")
		if why := g.checkAddr(a, t.port, rs.rules); why != "" {
			v.status, v.outcome, v.refusal = http.StatusForbidden, OutcomeDenied, RefusalAddress
			// The rule naming the address, if the policy would dial it then.
			if r := (Rule{Prefix: hostPrefix(a), Port: t.port}); g.checkAddr(a, t.port, append(slices.Clip(rs.rules), r)) == "" {
				v.allowWith = r.String()
			}
			if t.host.addr.IsValid() {
				v.reason = fmt.Sprintf("%s is %s", v.dest, why)
			} else {
				v.reason = fmt.Sprintf("%s resolves to %s, %s", v.dest, a, why)
			}
			return v
		}
		if !slices.Contains(checked, a) {
			checked = append(checked, a)
		}
	}
	// IPv4 first: a bottle's egress network rarely routes IPv6.
	slices.SortStableFunc(checked, func(a, b netip.Addr) int {
		switch {
		case a.Is4() == b.Is4():
			return 0
		case a.Is4():
			return -1
		default:
			return 1
		}
	})
	v.allowed = true
	v.addrs = checked
	return v
}

// underCeiling reports whether the ceiling, if any, allows h:port.
func (g *Gateway) underCeiling(h hostKey, port int) bool {
	if g.Ceiling == nil {
		return true
	}
	_, ok := matchKey(g.Ceiling, h, port)
	return ok
}

func matchKey(rules []Rule, h hostKey, port int) (Rule, bool) {
	for _, r := range rules {
		if r.matchesHost(h) && r.allowsPort(port) {
			return r, true
		}
	}
	return Rule{}, false
}

// portHint lists the ports the rules allow for t's host, if any.
func portHint(rules []Rule, t target) string {
	var ports []int
	for _, r := range rules {
		if r.matchesHost(t.host) {
			for _, p := range r.ports() {
				if !slices.Contains(ports, p) {
					ports = append(ports, p)
				}
			}
		}
	}
	if len(ports) == 0 {
		return ""
	}
	slices.Sort(ports)
	h := t.host.name
	if t.host.addr.IsValid() {
		h = t.host.addr.String()
	}
	return fmt.Sprintf(" (allowed ports for %s: %s)", h, portsString(ports))
}

func (g *Gateway) of(rs *ruleset) string {
	agent := rs.agent
	if agent == "" {
		agent = g.Agent
	}
	if agent == "" {
		return ""
	}
	return " of " + agent
}

// dial connects to the first of v's checked addresses that answers.
func (g *Gateway) dial(ctx context.Context, v verdict) (net.Conn, netip.AddrPort, error) {
	ctx, cancel := context.WithTimeout(ctx, g.connectTimeout())
	defer cancel()
	var first error
	for _, a := range v.addrs {
		ap := netip.AddrPortFrom(a, uint16(v.port))
		c, err := g.dialer().DialContext(ctx, "tcp", ap.String())
		if err == nil {
			return c, ap, nil
		}
		if first == nil {
			first = err
		}
		if ctx.Err() != nil {
			break
		}
	}
	if first == nil {
		first = errors.New("no address to connect to")
	}
	return nil, netip.AddrPort{}, first
}

// admit decides and, when allowed, connects. It logs the decision and answers
// the client itself unless it returns a connection, with the address it
// connected to.
func (g *Gateway) admit(w http.ResponseWriter, r *http.Request, t target) (net.Conn, netip.AddrPort) {
	v := g.decide(r.Context(), t)
	if !v.allowed {
		g.refuse(w, r, v)
		return nil, netip.AddrPort{}
	}
	if v.status != 0 { // allowed, but the name did not resolve
		g.fail(w, r, v)
		return nil, netip.AddrPort{}
	}
	c, ap, err := g.dial(r.Context(), v)
	if err != nil {
		v.status, v.outcome = http.StatusBadGateway, dialOutcome(err)
		v.reason = fmt.Sprintf("cannot connect to %s: %v", v.dest, err)
		g.fail(w, r, v)
		return nil, netip.AddrPort{}
	}
	v.reason, v.outcome = "connected to "+ap.String(), OutcomeConnected
	g.logDecision(r, v)
	return c, ap
}

// dialOutcome classifies a failed connection.
func dialOutcome(err error) string {
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return OutcomeRefused
	case timedOut(err):
		return OutcomeTimedOut
	default:
		return OutcomeFailed
	}
}

func timedOut(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
}

// refuse logs a refusal and answers it.
func (g *Gateway) refuse(w http.ResponseWriter, r *http.Request, v verdict) {
	v.allowed = false
	if v.refusal == "" {
		v.refusal = RefusalRequest
	}
	if v.outcome == "" {
		v.outcome = OutcomeDenied
		if v.status == http.StatusBadRequest {
			v.outcome = OutcomeBadRequest
		}
	}
	g.logDecision(r, v)
	g.answer(w, v.status, v.reason)
}

// fail logs an allowed request that could not be served and answers 502.
func (g *Gateway) fail(w http.ResponseWriter, r *http.Request, v verdict) {
	g.logDecision(r, v)
	g.answer(w, v.status, v.reason)
}

func (g *Gateway) answer(w http.ResponseWriter, status int, reason string) {
	http.NewResponseController(w).SetWriteDeadline(time.Now().Add(orDefault(g.answerTimeout, answerTimeout)))
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	io.WriteString(w, "bottlefile egress: "+clip(reason, 1000)+"\n")
}

// logDecision writes v's line. Refusals and failures, which cost the
// client nothing but a request, are rate-limited per source.
func (g *Gateway) logDecision(r *http.Request, v verdict) {
	if g.Log == nil {
		return
	}
	now := g.now()
	d := Decision{
		Time:        now.UTC(),
		Source:      r.RemoteAddr,
		Destination: v.dest,
		Rule:        v.rule,
		Allowed:     v.allowed,
		Outcome:     v.outcome,
		Reason:      v.reason,
		Serial:      v.serial,
		Refusal:     v.refusal,
		AllowWith:   v.allowWith,
	}
	if d.Serial == 0 {
		d.Serial = g.current().serial // refused before the rules were consulted
	}
	if v.status != 0 {
		ok, left := g.refusals.allow(r.RemoteAddr, now)
		if !ok {
			return
		}
		d.Suppressed = left
		g.writeDecisions(d)
		return
	}
	g.writeDecisions(g.allowed.add(d, now)...)
}

// writeDecisions writes lines to the log, one Write each.
func (g *Gateway) writeDecisions(ds ...Decision) {
	if g.Log == nil || len(ds) == 0 {
		return
	}
	g.logMu.Lock()
	defer g.logMu.Unlock()
	for _, d := range ds {
		if line := marshalDecision(d); line != nil {
			g.Log.Write(line)
		}
	}
}

func (g *Gateway) serveConnect(w http.ResponseWriter, r *http.Request) {
	host, port, err := net.SplitHostPort(r.URL.Host)
	if err != nil {
		g.refuse(w, r, verdict{dest: unparsed + r.URL.Host, status: http.StatusBadRequest,
			reason: fmt.Sprintf("CONNECT needs host:port, not %q", clip(r.URL.Host, 300))})
		return
	}
	t, err := parseTarget(host, port)
	if err != nil {
		g.refuse(w, r, verdict{dest: unparsed + r.URL.Host, status: http.StatusBadRequest, reason: err.Error()})
		return
	}
	cs := g.creds.Load()
	creds := cs.credentialsFor(t)
	if c := cs.misuse(r, creds); c != nil {
		g.refuseMisuse(w, r, t.String(), c)
		return
	}
	if len(creds) > 0 {
		v := g.decide(r.Context(), t)
		switch {
		case !v.allowed:
			g.refuse(w, r, v)
		case v.status != 0:
			g.fail(w, r, v)
		default:
			g.intercept(w, r, t, v, cs, creds)
		}
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		g.refuse(w, r, verdict{dest: t.String(), status: http.StatusBadRequest, reason: "CONNECT is not possible on this connection"})
		return
	}
	upstream, ap := g.admit(w, r, t)
	if upstream == nil {
		return
	}
	client, brw, err := hj.Hijack()
	if err != nil {
		upstream.Close()
		return
	}
	defer g.track(t.host, t.port, ap.Addr(), func() {
		client.Close()
		upstream.Close()
	})()
	act := new(activity)
	c := &idleConn{Conn: client, idle: g.idleTimeout(), act: act}
	u := &idleConn{Conn: upstream, idle: g.idleTimeout(), act: act}
	stop := context.AfterFunc(r.Context(), func() {
		client.Close()
		upstream.Close()
	})
	defer stop()
	client.SetDeadline(time.Time{})
	if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		client.Close()
		upstream.Close()
		return
	}
	// Bytes the client sent right after its CONNECT (a TLS ClientHello).
	if n := brw.Reader.Buffered(); n > 0 {
		b, _ := brw.Reader.Peek(n)
		if _, err := u.Write(b); err != nil {
			client.Close()
			upstream.Close()
			return
		}
	}
	splice(c, u)
}

func (g *Gateway) serveForward(w http.ResponseWriter, r *http.Request) {
	if r.URL.Scheme != "http" {
		reason := fmt.Sprintf("%s:// URLs are not proxied", r.URL.Scheme)
		dest := unparsed + r.URL.Host
		if r.URL.Scheme == "https" {
			reason = fmt.Sprintf("the client must use CONNECT for https:// URLs: it sent %s %s as a plain request to the proxy; CONNECT %s opens a tunnel (clients do so when HTTPS_PROXY is set)",
				clip(r.Method, 20), clip(r.URL.Scheme+"://"+r.URL.Host, 200), clip(withPort(r.URL.Host, "443"), 200))
			if t, err := parseTarget(r.URL.Hostname(), portOr(r.URL.Port(), "443")); err == nil {
				dest = t.String()
			}
		}
		g.refuse(w, r, verdict{dest: dest, status: http.StatusBadRequest, reason: reason})
		return
	}
	port := r.URL.Port()
	if port == "" {
		port = "80"
	}
	t, err := parseTarget(r.URL.Hostname(), port)
	if err != nil {
		g.refuse(w, r, verdict{dest: unparsed + r.URL.Host, status: http.StatusBadRequest, reason: err.Error()})
		return
	}
	// Plain HTTP is never a credential's destination: its placeholder here
	// is sent where no credential goes.
	cs := g.creds.Load()
	if c := cs.misuse(r, nil); c != nil {
		g.refuseMisuse(w, r, t.String(), c)
		return
	}
	// The client's body reads get the idle bound first: the scan reads
	// ahead of the forwarding.
	rc := http.NewResponseController(w)
	if r.Body != nil && r.Body != http.NoBody {
		r.Body = &idleBody{ReadCloser: r.Body, rc: rc, idle: g.idleTimeout()}
	}
	scanned := scanBody(r, cs.others(nil))
	if g.refuseScanned(w, r, t.String(), scanned, false) {
		return
	}
	conn, ap := g.admit(w, r, t)
	if conn == nil {
		return
	}
	defer g.track(t.host, t.port, ap.Addr(), func() { conn.Close() })()
	checked := &idleConn{Conn: conn, idle: g.idleTimeout(), act: new(activity)}
	var once atomic.Bool
	defer func() {
		if once.CompareAndSwap(false, true) {
			conn.Close() // the transport never took it
		}
	}()
	v := verdict{addrs: []netip.Addr{ap.Addr()}, port: t.port}
	tr := &http.Transport{
		Proxy: nil, // never the environment's proxy
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			if once.CompareAndSwap(false, true) {
				return checked, nil
			}
			c, _, err := g.dial(ctx, v) // the checked address again, never a new lookup
			if err != nil {
				return nil, err
			}
			return &idleConn{Conn: c, idle: g.idleTimeout(), act: new(activity)}, nil
		},
		DisableKeepAlives:      true,
		DisableCompression:     true,
		MaxResponseHeaderBytes: 1 << 20,
		ExpectContinueTimeout:  time.Second,
		TLSNextProto:           map[string]func(string, *tls.Conn) http.RoundTripper{},
	}
	defer tr.CloseIdleConnections()
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.Header.Del("Proxy-Authorization")
			pr.Out.Header.Del("Proxy-Connection")
		},
		Transport:     tr,
		FlushInterval: -1,
		ErrorLog:      log.New(io.Discard, "", 0),
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if r.Context().Err() != nil {
				return
			}
			if g.refuseScanned(w, r, t.String(), scanned, false) {
				return
			}
			g.answer(w, http.StatusBadGateway, fmt.Sprintf("%s: %v", t, err))
		},
	}
	// The client side gets the same idle bound: a client that stops reading
	// the response or sending its body (above) does not hold the handler
	// forever.
	rp.ServeHTTP(&idleResponseWriter{ResponseWriter: w, rc: rc, idle: g.idleTimeout()}, r)
	g.refuseScanned(w, r, t.String(), scanned, true)
}

// idleResponseWriter gives each write to the client the idle timeout.
type idleResponseWriter struct {
	http.ResponseWriter
	rc   *http.ResponseController
	idle time.Duration
}

func (w *idleResponseWriter) Write(p []byte) (int, error) {
	w.rc.SetWriteDeadline(time.Now().Add(w.idle))
	return w.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController (flushes, upgrades) reach the server's writer.
func (w *idleResponseWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// idleBody gives each read of the request body from the client the idle timeout.
type idleBody struct {
	io.ReadCloser
	rc   *http.ResponseController
	idle time.Duration
}

func (b *idleBody) Read(p []byte) (int, error) {
	b.rc.SetReadDeadline(time.Now().Add(b.idle))
	return b.ReadCloser.Read(p)
}

// withPort is host with def as its port when it has none.
func withPort(host, def string) string {
	if _, _, err := net.SplitHostPort(host); err == nil {
		return host
	}
	return net.JoinHostPort(strings.Trim(host, "[]"), def)
}

func portOr(port, def string) string {
	if port == "" {
		return def
	}
	return port
}

func (g *Gateway) now() time.Time {
	if g.Now != nil {
		return g.Now()
	}
	return time.Now()
}

func (g *Gateway) resolver() Resolver {
	if g.Resolver != nil {
		return g.Resolver
	}
	return net.DefaultResolver
}

func (g *Gateway) dialer() Dialer {
	if g.Dialer != nil {
		return g.Dialer
	}
	return &net.Dialer{KeepAlive: 30 * time.Second}
}

func (g *Gateway) connectTimeout() time.Duration {
	return orDefault(g.ConnectTimeout, DefaultConnectTimeout)
}

func (g *Gateway) idleTimeout() time.Duration {
	return orDefault(g.IdleTimeout, DefaultIdleTimeout)
}

func (g *Gateway) readHeaderTimeout() time.Duration {
	return orDefault(g.ReadHeaderTimeout, DefaultReadHeaderTimeout)
}

func (g *Gateway) maxConns() int {
	if g.MaxConns > 0 {
		return g.MaxConns
	}
	return DefaultMaxConns
}

func (g *Gateway) maxHeaderBytes() int {
	if g.MaxHeaderBytes > 0 {
		return g.MaxHeaderBytes
	}
	return DefaultMaxHeaderBytes
}

func orDefault(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}
