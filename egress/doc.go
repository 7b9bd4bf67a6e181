// Package egress is the egress gateway of a bottle: an HTTP proxy that lets an
// agent reach the destinations of its allowlist and nothing else.
//
// The agent reaches the gateway on its private network and has HTTP_PROXY and
// HTTPS_PROXY pointing at it. The gateway accepts
//
//   - CONNECT host:port, for TLS and any other TCP protocol on an allowed port;
//   - absolute-form plain HTTP requests (GET http://host:port/path), which it
//     forwards with the hop-by-hop headers (Proxy-Authorization among them)
//     removed.
//
// Anything else (an origin-form request such as GET /, an https:// URL in
// absolute form, OPTIONS *) is answered 400. A refusal is answered 403 with a
// one-line text body that gives the reason:
//
//	bottlefile egress: github.com:22 is not in the allowlist of agent.coder (allowed ports for github.com: 80, 443)
//
// # Rules
//
// A rule names a destination, with an optional port:
//
//	github.com               the name github.com, ports 80 and 443
//	github.com:22            the name github.com, port 22 only
//	*.pythonhosted.org:443   every name below pythonhosted.org (files.pythonhosted.org,
//	                         a.b.pythonhosted.org), port 443; NOT pythonhosted.org itself
//	140.82.112.3:443         the address itself
//	10.0.0.0/8:443           every address of the CIDR; IPv6 as [2001:db8::1]:443 or [2001:db8::/32]:443
//
// A rule without a port allows ports 80 and 443 only, never "any port": that is
// what someone who writes github.com means (the web site and its API), and an
// agent that needs SSH to github.com must say github.com:22. To allow several
// ports, list several rules.
//
// Names are compared case-insensitively and a trailing dot is ignored, so
// GitHub.COM. and github.com are the same rule. A wildcard is only allowed as
// the whole first label ("*.example.com"); "*" alone, "a.*.com", "*example.com"
// are rejected. Name rules match names and address rules match addresses: a
// CONNECT to 140.82.112.3:443 does not match the rule github.com:443, and a
// CONNECT to github.com:443 does not match the rule 140.82.112.3:443 (but see
// the address policy below). Rules are not URLs: a scheme, a path, user info,
// a query or whitespace is an error that says so. [Rule.String] is the canonical
// form (lower case, no trailing dot, IPv6 in brackets), and it parses back to
// the same rule.
//
// # Address policy
//
// The gateway resolves an allowed name itself, checks every address the name
// resolves to, and then dials one of those checked addresses (it never
// resolves twice, so DNS rebinding cannot swap the address after the check).
// A name that is not allowed is never resolved: a proxy request cannot be used
// to smuggle data out through DNS lookups. An allowed name is looked up
// rooted ("name."), so the resolver's search domains never add a lookup of
// another name. (A wildcard rule does allow lookups
// of any name below its suffix, which reach that domain's DNS servers.)
//
// If any address is refused, the request is refused:
//
//   - never, whatever the rules say: the cloud metadata endpoints
//     (169.254.169.254, 169.254.170.2, Alibaba's 100.100.100.200, Azure's
//     168.63.129.16, Oracle's 192.0.0.192, AWS's fd00:ec2::/32), loopback
//     (127.0.0.0/8, ::1), link-local (169.254.0.0/16, fe80::/10),
//     unspecified and "this network" (0.0.0.0/8, ::), multicast,
//     reserved (240.0.0.0/4, broadcast), IPv6 transition prefixes that embed
//     IPv4 addresses (::/96, 6to4 2002::/16, Teredo 2001::/32), and the extra
//     prefixes of [Gateway.Forbidden] and [Gateway.SetForbidden] (the docker
//     host's own addresses, the bottle networks);
//   - private addresses (10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16, the shared
//     100.64.0.0/10, unique local fc00::/7, site-local fec0::/10) and
//     special-purpose ones (192.0.0.0/24, the documentation ranges 192.0.2.0/24,
//     198.51.100.0/24, 203.0.113.0/24, 2001:db8::/32 and 3fff::/20, benchmarking
//     198.18.0.0/15, 192.88.99.0/24, 100::/64, 2001::/23, local-use NAT64
//     64:ff9b:1::/48) only when a rule names the address itself: an address or CIDR rule that contains it and
//     allows the port. The allowlist ["registry.corp:443", "10.1.2.3:443"]
//     lets registry.corp through when it resolves to 10.1.2.3, and
//     ["registry.corp:443"] alone does not;
//   - any other address (public) is allowed when the rule matched.
//
// An address rule opts in the private addresses it contains, so a rule as wide
// as 0.0.0.0/0:443 opts in every private address on port 443.
//
// An IPv6 address that carries an IPv4 address is checked as that IPv4
// address too: IPv4-mapped (::ffff:a.b.c.d), SIIT (::ffff:0:a.b.c.d), NAT64
// (64:ff9b::/96 and the local-use 64:ff9b:1::/48, the IPv4 address in the
// last 32 bits) and ISATAP (an interface identifier ::5efe:a.b.c.d).
//
// # Decisions
//
// Every proxy request is one decision and one JSON line ([Decision]) on
// [Gateway.Log]:
//
//	{"time":"2025-01-02T03:04:05.123456789Z","source":"172.30.0.3:51234","destination":"github.com:22","rule":"","allowed":false,"reason":"github.com:22 is not in the allowlist of agent.coder (allowed ports for github.com: 80, 443)"}
//
// allowed reports the policy: true when a rule matched and every address passed
// the address policy. A request that was allowed but could not be served (the
// name does not resolve, the destination refuses the connection) is logged
// with allowed true, a reason that says what failed, and answered 502.
// allowed false is always a 400 or 403 from the gateway itself. The
// destination of a CONNECT is its target, never a Host header; one the
// gateway could not parse (a 400) is logged as "(unparsed) " and what the
// client wrote.
//
// # Abuse
//
// An agent can at most starve itself. A decision line holds at most
// [MaxDecisionLine] bytes (what the client chose is clipped), and refusals
// and failures are logged at most 20 at once and then 5 a second per
// source, the next line logged counting those left out ("suppressed").
// Allowed lines are limited too (100 at once, then one a second per
// source), the rest aggregated into a line per destination every 30 s
// whose "count" says how many requests it stands for: a flood of allowed
// requests cannot rotate refusals out of a bounded log (log.go).
// The gateway holds at most [Gateway.MaxConns] client connections: a new one
// takes the place of the one idle longest, so a fresh request is served
// however many idle connections an agent opens. Its own answers get a write
// deadline and every response a write timeout, so a client that never
// reads holds nothing for long.
//
// # Credentials
//
// [Gateway.SetCredentials] (or the -credentials file, a [CredentialsFile])
// gives the gateway the bottle's CA (an ECDSA P-256 key the docker driver
// makes and keeps in the state directory; the agent holds only its
// certificate; [NewCA] name-constrains it to the credential hosts) and
// [Credential]s. A CONNECT to a credential's host and port
// that the rules allow is not spliced: the gateway answers 200, terminates
// the agent's TLS with a certificate for the host signed by the CA (HTTP/2
// or HTTP/1.1, as the agent offers), and forwards each request over TLS it
// verifies (against the system's CAs and the file's upstream_cas) to the
// addresses it checked, the credential's header set to prefix+value
// whatever the agent sent in it. The CONNECT is logged with the outcome
// "intercepted", each request with "credential-injected" and the
// credential's name and header, never its value. Every other destination
// stays an untouched tunnel. What the host answers reaches the agent with
// the value masked, in its common encodings (redact.go); TRACE, TRACK and
// protocol switches to it are refused.
//
// The agent holds a placeholder in place of the value. A request that
// carries a credential's placeholder, in any of the forms detect.go
// recognises, in its target, URL, headers or body to any
// destination but that credential's is refused 403 and logged with the
// outcome "credential-elsewhere", "an attempt to use the credential
// elsewhere": in a plain HTTP request, a CONNECT's request, or a request
// of another credential host. The inside of an untouched tunnel is
// encrypted and not looked at; there the placeholder is worth nothing.
//
// New credentials take effect at the next request, open tunnels included;
// a tunnel whose host lost its credential, or that shows a certificate of
// a CA no longer in force, is closed. The "credentials-loaded" event gives
// the file's version and the credentials' names.
//
// # Live reload
//
// [Gateway.SetRules] swaps the allowlist atomically and closes the open
// tunnels (and forwarded exchanges) the new rules no longer allow, returning
// how many; the "rules-loaded" event reports them as tunnels_closed. [WatchRulesFile] polls a [RulesFile]
// (JSON, written by the docker driver into the gateway container) and applies
// it when its content changes; an invalid file is reported and the rules in
// force are kept.
//
// # Activity
//
// With -activity FILE (by default, when -state is given, beside it), the
// gateway keeps the time of its last proxy request, refused ones
// included, as the modification time of FILE, an empty file: the Unix
// epoch before any, moved at most once a second, and every ten seconds
// while a tunnel or forwarded exchange is open (activity.go). It writes
// nothing to its log for it. Drivers read it with one stat to tell when
// an agent last used its gateway (idle policies).
//
// # Command
//
// [Main] is the hidden "bottlefile gateway" command. It needs no shell and no
// file but its rules file (and the /etc/resolv.conf and /etc/hosts Docker
// provides), so it runs as PID 1 in a FROM scratch image: it stops on SIGTERM
// or SIGINT, and checks its rules file at once on SIGHUP. Besides the -forbid
// prefixes, it never connects to its own interface addresses or its default
// gateway (on a docker network, the docker host). "bottlefile gateway -health"
// asks a running gateway for GET /.bottlefile/health (the one origin-form
// request it answers, with 200, unlogged) and exits 0 or 1, for a Docker
// HEALTHCHECK.
package egress
