package command

import (
	"errors"
	"fmt"
	"strings"

	"github.com/hashicorp/hcl/v2"

	"github.com/bottlefile/bottlefile/addrs"
)

// LogsCommand prints the log of a workload: an agent, a sidecar, or an
// agent's egress gateway (its decisions).
type LogsCommand struct {
	Meta *Meta
}

func (c *LogsCommand) Synopsis() string {
	return "Show the log of an agent, a sidecar or a gateway"
}

func (c *LogsCommand) Help() string {
	return strings.TrimSpace(`
Usage: bottlefile [global options] logs [-f] ADDR

  Prints the log of a workload this state made, as its runtime keeps it:

    bottlefile logs agent.coder               the agent's output
    bottlefile logs agent.coder.sidecar.git   a sidecar's output
    bottlefile logs agent.coder.gateway       the egress gateway: one JSON line
                                              per decision on standard output,
                                              its own events on standard error

  It reads the state and the runtimes and changes nothing; the state is not
  kept locked while it follows.

Options:

  -f, -follow     Keep printing what is written until interrupted.
  -var NAME=VALUE, -var-file=FILE
                  Set variables the configuration needs, as for plan.
`)
}

func (c *LogsCommand) Run(args []string) int {
	m := c.Meta
	fs := newFlagSet("logs")
	var follow bool
	fs.BoolVar(&follow, "f", false, "")
	fs.BoolVar(&follow, "follow", false, "")
	in := registerInputs(fs)
	// Options may come before or after the address.
	var positional []string
	rest := args
	for {
		if err := fs.Parse(rest); err != nil {
			m.showDiags(nil, hcl.Diagnostics{argError(err.Error())})
			return 1
		}
		if fs.NArg() == 0 {
			break
		}
		positional = append(positional, fs.Arg(0))
		rest = fs.Args()[1:]
	}
	switch {
	case len(positional) == 0:
		m.showDiags(nil, hcl.Diagnostics{argError("logs needs the address of a workload, like agent.coder or agent.coder.gateway")})
		return 1
	case len(positional) > 1:
		m.showDiags(nil, hcl.Diagnostics{argError(fmt.Sprintf("unexpected argument %q", positional[1]))})
		return 1
	}
	addr := positional[0]
	// A snapshot or a runtime has no output. An address of no known form
	// goes on to the lookup, which suggests the address it was probably
	// meant to be, or says what is wrong with it.
	if a, err := addrs.Parse(addr); err == nil && a.Agent() == "" {
		return m.fail("Not a workload address", fmt.Errorf("%q is not the address of an agent, a sidecar or a gateway (agent.NAME, agent.NAME.sidecar.NAME, agent.NAME.gateway)", addr))
	}

	op, diags := m.open(m.Ctx, true, 0, *in)
	defer op.Close()
	if m.showDiags(op.Files(), diags) {
		return 1
	}
	if op.Lineage() == "" {
		return m.fail("Nothing applied yet", errors.New("this state has no lineage: nothing was ever applied here, so there is no log to show"))
	}
	live, diags := op.FindLive(m.Ctx, addr)
	if m.showDiags(op.Files(), diags) {
		return 1
	}
	// The state is not needed any more: do not hold its lock while following.
	op.ReleaseState()
	if m.showDiags(op.Files(), live.Logs(m.Ctx, follow, m.Stdout, m.Stderr)) {
		return 1
	}
	return 0
}
