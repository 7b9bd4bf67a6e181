package command

import (
	"strings"

	"github.com/hashicorp/hcl/v2"
)

// StatusCommand shows each bottle and its workloads as the runtimes report
// them now.
type StatusCommand struct {
	Meta *Meta
}

func (c *StatusCommand) Synopsis() string {
	return "Show each bottle and its workloads: running, exited, uptime"
}

func (c *StatusCommand) Help() string {
	return strings.TrimSpace(`
Usage: bottlefile [global options] status [options] [ADDR...]

  Prints one line per bottle and one per workload in it (the agent, its
  sidecars, its gateway): running and for how long, exited with its code
  and when, never started, or missing from its runtime; what the agent
  booted from (an image or a snapshot), its newest snapshot and its age,
  the egress rules in force and the gateway's denials in the last hour,
  and the bytes each workload wrote since it was created.

  With ADDR (agent.NAME, or one of its workloads' addresses), only those
  bottles. It reads the state and asks each runtime once, with one list
  call per object kind, then reads each gateway's decision log of the last
  hour (8 at a time); it changes nothing.

Options:

  -json                Print one JSON document.
  -lock-timeout=DUR    Wait this long for the state lock (default 0s).
  -no-color            Print without color.
  -var NAME=VALUE, -var-file=FILE
                       Set variables the configuration needs, as for plan.
`)
}

func (c *StatusCommand) Run(args []string) int {
	m := c.Meta
	fs := newFlagSet("status")
	asJSON := fs.Bool("json", false, "")
	noColor := fs.Bool("no-color", false, "")
	lockTimeout := fs.Duration("lock-timeout", 0, "")
	in := registerInputs(fs)
	addrs, err := parseInterleaved(fs, args)
	if err != nil {
		m.showDiags(nil, hcl.Diagnostics{argError(err.Error())})
		return 1
	}
	m.Color = m.Color && !*noColor
	op, diags := m.observe(m.Ctx, *lockTimeout, *in)
	defer op.Close()
	if m.showDiags(op.Files(), diags) {
		return 1
	}
	op.Clock = now
	bottles, diags := op.Status(m.Ctx, addrs)
	if m.showDiags(op.Files(), diags) {
		return 1
	}
	if err := newStatusView(*asJSON, m.Stdout).Status(bottles, now()); err != nil {
		return m.fail("Cannot write the status", err)
	}
	return 0
}
