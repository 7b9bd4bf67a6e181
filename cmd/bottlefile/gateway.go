package main

import (
	"context"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/bottlefile/bottlefile/cmd/bottlefile/command"
	"github.com/bottlefile/bottlefile/egress"
)

// GatewayCommand is the hidden "bottlefile gateway": the egress proxy that
// runs, as PID 1 of a FROM scratch container built from this very binary,
// in every bottle. Operators do not run it by hand; the docker driver does.
type GatewayCommand struct {
	Meta *command.Meta
}

func (c *GatewayCommand) Synopsis() string {
	return "Run a bottle's egress gateway (started by the docker driver, not by hand)"
}

func (c *GatewayCommand) Help() string {
	return strings.TrimSpace(`
Usage: bottlefile gateway [-listen ADDR] [-rules FILE] [-forbid CIDR]... [-poll DUR]
       bottlefile gateway -health [-listen ADDR]
       bottlefile gateway -print-addrs

  The egress gateway of a bottle: an HTTP proxy (CONNECT, and absolute-form
  plain HTTP) that lets an agent reach the destinations of its allowlist and
  nothing else. The docker driver runs it inside every bottle; it is not
  meant to be run by hand.

  Every decision is one JSON line on standard output; the gateway's own
  events (listening, rules loaded or rejected) are JSON lines on standard
  error. SIGHUP re-reads the rules file at once; SIGTERM or SIGINT stops it.

Options:

  -listen ADDR    Proxy address (default ":3128").
  -listen-in CIDR Listen on this machine's address inside CIDR, on -listen's port.
  -rules FILE     Rules file to load and watch: {"agent": ..., "allow": [...]}.
                  Without one, every request is denied.
  -forbid CIDR    An address or CIDR never to connect to (repeatable).
  -poll DUR       How often to check the rules file (default 1s).
  -health         Check that a gateway answers on -listen; exit 0 if so.
  -print-addrs    Print this network namespace's own addresses and default
                  gateways, one per line, and exit (the docker driver runs it
                  in the engine host's namespace to forbid them).
`)
}

func (c *GatewayCommand) Run(args []string) int {
	// main's interrupt handler talks to a person at a terminal; the gateway
	// stops on the first SIGTERM or SIGINT, quietly, even as PID 1.
	signal.Reset(os.Interrupt, syscall.SIGTERM)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return egress.Main(ctx, args, c.Meta.Stdout, c.Meta.Stderr)
}
