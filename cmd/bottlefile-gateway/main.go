// Command bottlefile-gateway is the egress gateway alone: what "bottlefile
// gateway" runs, without the rest of bottlefile. Its image is a tenth of
// the size of one made from the bottlefile binary (client-go, containerd
// and the registry client are not in it), and importing that image was
// most of a first gateway's start (issue 28). The drivers use it when it
// sits beside the bottlefile binary from the same build (make build puts
// it there); they run it as "/bottlefile gateway ARGS", so it takes the
// subcommand's name as its first argument too.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/bottlefile/bottlefile/egress"
)

func main() {
	args := os.Args[1:]
	if len(args) > 0 && args[0] == "gateway" {
		args = args[1:]
	}
	// It may run as PID 1: it stops on the first SIGTERM or SIGINT.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := egress.Main(ctx, args, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
