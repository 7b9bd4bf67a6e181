package egress

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Main is the "bottlefile gateway" command. It serves the proxy on -listen
// until ctx is done (or SIGTERM/SIGINT arrives: it may run as PID 1), and
// returns the exit code: 0 after a clean stop, 1 when it cannot serve, 2 for
// bad usage. Decisions go to stdout, one JSON line each; its own events
// (listening, rules loaded or rejected) to stderr, also as JSON lines.
//
//	-listen ADDR    proxy address (default ":3128")
//	-listen-in CIDR listen on this machine's address inside CIDR (on -listen's
//	                port) instead of -listen's host: for a gateway whose
//	                address on its bottle's network is known only once it runs
//	-rules FILE     rules file (RulesFile JSON) to load and watch; without it,
//	                or while it is missing or invalid, every request is denied
//	-forbid CIDR    an address or CIDR never to connect to (repeatable)
//	-forbid-file FILE  more of them (ForbidFile JSON), watched like the rules file
//	-credentials FILE  credentials to inject (CredentialsFile JSON), watched like the rules file
//	-ceiling RULES  the egress ceiling, comma-separated rules: nothing outside
//	                it is allowed, whatever the rules file says ("" allows
//	                nothing; without the flag, no ceiling)
//	-state FILE     where to report the files in force: the SHA-256 of each
//	                (JSON, by kind), rewritten as they change; each change is
//	                also logged on stderr ("files-in-force", LoadedEvent)
//	-activity FILE  the file whose modification time is the time of the last
//	                proxy request (activity.go); default: ActivityFileName
//	                beside -state, none without -state
//	-max-conns N    client connections held at once (default 1024)
//	-poll DURATION  how often to check the rules file (default 1s); SIGHUP checks at once
//	-health         check that a gateway answers on -listen, exit 0 if so, 1 if not
//	-print-addrs    print this network namespace's own addresses and default
//	                gateways, one per line, and exit
//
// Besides -forbid, the gateway never connects to its own interface addresses
// nor to its default gateway (on a docker network, the docker host).
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	// Ask for SIGHUP first: a Go program signalled before it asks dies
	// (exit 2, nothing logged).
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	fs := flag.NewFlagSet("bottlefile gateway", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", ":3128", "`address` the proxy listens on")
	listenIn := fs.String("listen-in", "", "listen on this machine's address inside `CIDR`, on -listen's port")
	rulesPath := fs.String("rules", "", "rules `file` (JSON) to load and watch; without one every request is denied")
	var forbid prefixList
	fs.Var(&forbid, "forbid", "`CIDR` or address the gateway never connects to (repeatable)")
	forbidPath := fs.String("forbid-file", "", "`file` (JSON) of more prefixes never to connect to, watched like the rules file")
	credsPath := fs.String("credentials", "", "credentials `file` (JSON): the bottle's CA and the credentials to inject, watched like the rules file")
	ceiling := fs.String("ceiling", "", "the egress ceiling: comma-separated `rules` beyond which no rules file allows anything")
	statePath := fs.String("state", "", "`file` to report the digest of each file in force to")
	activityPath := fs.String("activity", "", "`file` whose modification time is the time of the last proxy request (default: beside -state)")
	maxConns := fs.Int("max-conns", DefaultMaxConns, "client connections held at once")
	poll := fs.Duration("poll", time.Second, "how often to check the rules file")
	health := fs.Bool("health", false, "check that a gateway answers on -listen, then exit 0 (healthy) or 1")
	printAddrs := fs.Bool("print-addrs", false, "print this network namespace's own addresses and default gateways, one per line, then exit")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "bottlefile gateway: unexpected arguments %q\n", fs.Args())
		return 2
	}
	if *maxConns <= 0 {
		fmt.Fprintf(stderr, "bottlefile gateway: -max-conns %d is not positive\n", *maxConns)
		return 2
	}
	if *poll <= 0 {
		fmt.Fprintf(stderr, "bottlefile gateway: -poll %v is not positive\n", *poll)
		return 2
	}
	if *printAddrs {
		// The docker driver runs this in the engine host's network
		// namespace to learn the host's own addresses (docker.Driver's
		// engine host probe): an engine behind a local socket may live
		// in a VM or another namespace than bottlefile.
		for _, p := range ownAddresses() {
			fmt.Fprintln(stdout, p.Addr())
		}
		return 0
	}
	var ceilingRules []Rule
	ceilingSet := false
	fs.Visit(func(f *flag.Flag) { ceilingSet = ceilingSet || f.Name == "ceiling" })
	if ceilingSet {
		rules, err := ParseCeiling(*ceiling)
		if err != nil {
			fmt.Fprintf(stderr, "bottlefile gateway: -ceiling: %v\n", err)
			return 2
		}
		ceilingRules = rules
	}
	if *listenIn != "" {
		addr, err := listenAddrIn(*listen, *listenIn, localAddrs)
		if err != nil {
			fmt.Fprintf(stderr, "bottlefile gateway: -listen-in: %v\n", err)
			return 1
		}
		*listen = addr
	}
	if *health {
		if err := checkHealth(ctx, *listen); err != nil {
			fmt.Fprintf(stderr, "bottlefile gateway: unhealthy: %v\n", err)
			return 1
		}
		return 0
	}

	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, os.Interrupt)
	defer stop()
	events := &lockedWriter{w: stderr}
	g := &Gateway{
		Ceiling:   ceilingRules,
		Forbidden: append(forbid, ownAddresses()...),
		Log:       stdout,
		MaxConns:  *maxConns,
	}
	forbidden := make([]string, len(g.Forbidden))
	for i, p := range g.Forbidden {
		forbidden[i] = p.String()
	}

	if *activityPath == "" && *statePath != "" {
		*activityPath = ActivityBeside(*statePath)
	}
	if *activityPath != "" {
		a, err := newActivityStamp(*activityPath, nil)
		if err != nil {
			// Without it the driver cannot tell when the agent was last
			// used, and says so (never idle): no reason not to serve.
			writeJSONLine(events, struct {
				Time  time.Time `json:"time"`
				Event string    `json:"event"`
				Error string    `json:"error"`
			}{time.Now().UTC(), "activity-stamp-failed", err.Error()})
		}
		g.activity = a
	}

	var wg sync.WaitGroup
	if *rulesPath != "" || *forbidPath != "" || *credsPath != "" {
		// Load the rules before the first request can come.
		w := newWatcher(*rulesPath, *forbidPath, *credsPath, g, events)
		w.statePath = *statePath
		w.check()
		now := make(chan struct{}, 1)
		wg.Go(func() {
			for {
				select {
				case <-ctx.Done():
					return
				case <-hup:
					select {
					case now <- struct{}{}:
					default:
					}
				}
			}
		})
		wg.Go(func() { w.run(ctx, *poll, now) })
	}
	l, err := net.Listen("tcp", *listen)
	if err != nil {
		stop()
		wg.Wait()
		fmt.Fprintf(stderr, "bottlefile gateway: %v\n", err)
		return 1
	}
	var ceilingList []string
	if ceilingRules != nil {
		ceilingList = NewRulesFile("", ceilingRules).Allow
	}
	writeJSONLine(events, struct {
		Time      time.Time `json:"time"`
		Event     string    `json:"event"`
		Address   string    `json:"address"`
		Forbidden []string  `json:"forbidden"`
		Ceiling   []string  `json:"ceiling,omitempty"`
	}{time.Now().UTC(), "listening", l.Addr().String(), forbidden, ceilingList})
	err = g.Serve(ctx, l)
	stop()
	wg.Wait()
	if err != nil {
		fmt.Fprintf(stderr, "bottlefile gateway: %v\n", err)
		return 1
	}
	return 0
}

// CeilingFlag is the -ceiling argument for rules: comma-separated, in
// canonical form (ParseCeiling reads it back).
func CeilingFlag(rules []string) string { return strings.Join(rules, ",") }

// ParseCeiling parses a -ceiling argument: "" is the empty ceiling, which
// allows nothing.
func ParseCeiling(s string) ([]Rule, error) {
	if strings.TrimSpace(s) == "" {
		return []Rule{}, nil
	}
	return ParseRules(strings.Split(s, ","))
}

// listenAddrIn is the address to listen on for -listen-in: the first of
// addrs (this machine's) inside the CIDR in, with listen's port.
func listenAddrIn(listen, in string, addrs func() []netip.Addr) (string, error) {
	p, err := netip.ParsePrefix(in)
	if err != nil {
		return "", err
	}
	_, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "", fmt.Errorf("-listen %q: %v", listen, err)
	}
	for _, a := range addrs() {
		if p.Contains(a) {
			return netip.AddrPortFrom(a, 0).Addr().String() + ":" + port, nil
		}
	}
	return "", fmt.Errorf("this machine has no address in %s", p)
}

// localAddrs are this machine's interface addresses.
func localAddrs() []netip.Addr {
	var out []netip.Addr
	for _, p := range ownAddresses() {
		if p.IsSingleIP() {
			out = append(out, p.Addr())
		}
	}
	return out
}

// prefixList is a repeatable -forbid flag.
type prefixList []netip.Prefix

func (p *prefixList) String() string {
	if p == nil {
		return ""
	}
	s := make([]string, len(*p))
	for i, x := range *p {
		s[i] = x.String()
	}
	return strings.Join(s, ",")
}

func (p *prefixList) Set(s string) error {
	x, err := ParsePrefixOrAddr(s)
	if err != nil {
		return err
	}
	*p = append(*p, x)
	return nil
}

// checkHealth asks the gateway on listen for its health path.
func checkHealth(ctx context.Context, listen string) error {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return err
	}
	if a, err := netip.ParseAddr(host); host == "" || (err == nil && a.IsUnspecified()) {
		host = "127.0.0.1"
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", net.JoinHostPort(host, port))
	if err != nil {
		return err
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	}
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: gateway\r\nConnection: close\r\n\r\n", healthPath); err != nil {
		return err
	}
	status, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if f := strings.Fields(status); len(f) < 2 || f[1] != "200" {
		return fmt.Errorf("answer %q", strings.TrimSpace(status))
	}
	return nil
}

// ownAddresses are the gateway's own interface addresses and its default
// gateways, as full-length prefixes.
func ownAddresses() []netip.Prefix {
	var out []netip.Prefix
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok {
				if ip, ok := netip.AddrFromSlice(ipn.IP); ok {
					ip = ip.Unmap()
					out = append(out, netip.PrefixFrom(ip, ip.BitLen()))
				}
			}
		}
	}
	if b, err := os.ReadFile("/proc/net/route"); err == nil {
		for _, a := range defaultGateways(string(b)) {
			out = append(out, netip.PrefixFrom(a, 32))
		}
	}
	return out
}

// defaultGateways parses /proc/net/route: the gateways of default routes.
func defaultGateways(route string) []netip.Addr {
	var out []netip.Addr
	for _, line := range strings.Split(route, "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 3 || f[1] != "00000000" {
			continue
		}
		b, err := hex.DecodeString(f[2])
		if err != nil || len(b) != 4 {
			continue
		}
		// The kernel prints the network-order word as a host-order number.
		var a [4]byte
		binary.NativeEndian.PutUint32(a[:], binary.BigEndian.Uint32(b))
		if ip := netip.AddrFrom4(a); !ip.IsUnspecified() {
			out = append(out, ip)
		}
	}
	return out
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func writeJSONLine(w io.Writer, v any) {
	if b, err := json.Marshal(v); err == nil {
		w.Write(append(b, '\n'))
	}
}
