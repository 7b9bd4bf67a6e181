package command

import (
	"fmt"
	"strings"

	"github.com/hashicorp/cli"
	"github.com/hashicorp/hcl/v2"

	"github.com/bottlefile/bottlefile/operations"
)

// EgressCommand groups the egress subcommands.
type EgressCommand struct{ Meta *Meta }

func (c *EgressCommand) Synopsis() string { return "Read what the egress gateways decided" }

func (c *EgressCommand) Help() string {
	return strings.TrimSpace(`
Usage: bottlefile [global options] egress <subcommand> [args]

  denials [ADDR] [-since DUR] [-json]
                        The destinations the gateways refused, per agent,
                        with counts, when last, and the allow rule that
                        would let each through.
`)
}

func (c *EgressCommand) Run(args []string) int { return cli.RunResultHelp }

// EgressDenialsCommand lists what the gateways refused.
type EgressDenialsCommand struct{ Meta *Meta }

func (c *EgressDenialsCommand) Synopsis() string {
	return "List the destinations the egress gateways refused"
}

func (c *EgressDenialsCommand) Help() string {
	return strings.TrimSpace(`
Usage: bottlefile [global options] egress denials [options] [ADDR]

  Reads the decision log of every agent's egress gateway (or of agent
  ADDR's) and lists the destinations it refused, grouped per agent, most
  refused first: how many times, when last, why, and the exact rule to
  add to the agent's egress block to allow it:

    egress { allow = [..., "api.example.com:443"] }

  A destination no rule can allow (a malformed request, a sidecar's name
  sent through the proxy, a credential's placeholder sent where the
  credential does not go) says what to do instead. Then it lists where the
  gateways injected credentials (egress credential blocks): how many
  requests, when last, which credentials, never their values. It reads the
  state and the runtimes and changes nothing.

Options:

  -since=DUR           Only refusals in the last DUR (default 24h).
  -json                Print one JSON document.
  -lock-timeout=DUR    Wait this long for the state lock (default 0s).
  -var NAME=VALUE, -var-file=FILE
                       Set variables the configuration needs, as for plan.
`)
}

func (c *EgressDenialsCommand) Run(args []string) int {
	m := c.Meta
	fs := newFlagSet("egress denials")
	m.noColorFlag(fs)
	asJSON := fs.Bool("json", false, "")
	since := fs.Duration("since", operations.DecisionsKept, "")
	lockTimeout := fs.Duration("lock-timeout", 0, "")
	in := registerInputs(fs)
	pos, err := parseInterleaved(fs, args)
	if err == nil && len(pos) > 1 {
		err = fmt.Errorf("unexpected argument %q", pos[1])
	}
	if err == nil && *since <= 0 {
		err = fmt.Errorf("-since must be positive, not %v", *since)
	}
	if err != nil {
		m.showDiags(nil, hcl.Diagnostics{argError(err.Error())})
		return 1
	}
	agent := ""
	if len(pos) == 1 {
		agent = pos[0]
	}
	op, diags := m.observe(m.Ctx, *lockTimeout, *in)
	defer op.Close()
	if m.showDiags(op.Files(), diags) {
		return 1
	}
	at := now()
	decs, diags := op.Decisions(m.Ctx, agent, at.Add(-*since))
	if m.showDiags(op.Files(), diags) {
		return 1
	}
	r := denialsReport{Denials: operations.Denials(decs), Injected: operations.Injections(decs), Since: *since, At: at}
	if err := newDenialsView(*asJSON, m.Stdout).Denials(r); err != nil {
		return m.fail("Cannot write the denials", err)
	}
	return 0
}
