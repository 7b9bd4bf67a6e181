package command

import (
	"errors"
	"fmt"
	"strings"

	"github.com/hashicorp/cli"

	"github.com/bottlefile/bottlefile/planner"
)

// LifecycleCommand is bottlefile stop, start, restart and archive: the
// workloads of the named agents (their own, their sidecars', their
// gateways') stopped, started, both, or archived (committed to a snapshot
// and removed), as planned actions under the state lock, recorded, so
// that plan leaves a stopped or archived agent as it is.
type LifecycleCommand struct {
	Meta *Meta
	Verb string // "stop", "start", "restart" or "archive"
}

func (c *LifecycleCommand) Synopsis() string {
	switch c.Verb {
	case "stop":
		return "Stop agents, keeping them and their files"
	case "start":
		return "Start stopped agents again, or resume archived ones"
	case "archive":
		return "Archive agents: snapshot them, then remove their workloads"
	}
	return "Stop agents and start them again"
}

func (c *LifecycleCommand) Help() string {
	what := map[string]string{
		"stop": `Stops each agent ADDR (agent.NAME) with its sidecars and its gateway,
  keeping them and what they wrote, and records them as stopped: plan
  and apply leave a stopped agent stopped (it is not drift) until
  bottlefile start. A configuration change is planned as usual: one that
  replaces the agent runs the new workload; one in place leaves it
  stopped.`,
		"start": `Starts each agent ADDR (agent.NAME) stopped with bottlefile stop (or
  found stopped), with its sidecars and its gateway, with the files they
  had. An archived agent is resumed: created again from its archive
  snapshot, with its network, sidecars and gateway. An agent whose
  configuration changed since it was applied is refused: run bottlefile
  apply.`,
		"archive": `Archives each agent ADDR (agent.NAME): its filesystem is committed to a
  policy snapshot (agent.NAME.snapshot.N, trigger "archive"), then its
  container, sidecars, gateway and network are removed; their records
  stay, marked archived. plan and apply leave an archived agent archived
  (it is not drift), and retention keeps its snapshot, until bottlefile
  start, bottlefile exec or an apply that changes it resumes it from
  that snapshot. status shows "archived 3d ago". A destroy forgets it;
  the snapshot follows its snapshot_policy.`,
		"restart": `Stops each agent ADDR (agent.NAME) with its sidecars and its gateway,
  then starts them again, keeping what they wrote.`,
	}[c.Verb]
	return strings.TrimSpace(fmt.Sprintf(`
Usage: bottlefile [global options] %s [options] ADDR...

  %s

  Nothing else changes. It applies without asking, holding the state
  lock, and prints each step and a summary, as apply does.

Options:

  -lock-timeout=DUR    Wait this long for the state lock (default 0s).
  -no-color            Print without color.
  -var NAME=VALUE      Set a variable. Repeatable.
  -var-file=FILE       Set variables from an HCL or JSON file.
`, c.Verb, what))
}

func (c *LifecycleCommand) Run(args []string) int {
	m := c.Meta
	fs := newFlagSet(c.Verb)
	m.noColorFlag(fs)
	lockTimeout := fs.Duration("lock-timeout", 0, "")
	in := registerInputs(fs)
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return m.fail("Invalid command line", fmt.Errorf("%v. Run with -help to see the options", err))
	}
	if len(pos) == 0 {
		return m.fail("Invalid command line", errors.New(c.Verb+" needs at least one agent address, like agent.coder"))
	}
	op, diags := m.open(m.Ctx, false, *lockTimeout, *in)
	defer op.Close()
	v := newApplyView(m, false)
	if v.Diagnostics(op.Files(), diags) {
		return 1
	}
	plans := []func() (*planner.Plan, string){}
	stop := func() (*planner.Plan, string) {
		p, diags := op.PlanStop(m.Ctx, pos)
		if v.Diagnostics(op.Files(), diags) {
			return nil, ""
		}
		return p, "stopped already"
	}
	start := func() (*planner.Plan, string) {
		p, diags := op.PlanStart(m.Ctx, pos)
		if v.Diagnostics(op.Files(), diags) {
			return nil, ""
		}
		return p, "running already"
	}
	archive := func() (*planner.Plan, string) {
		p, diags := op.PlanArchive(m.Ctx, pos)
		if v.Diagnostics(op.Files(), diags) {
			return nil, ""
		}
		return p, "archived already"
	}
	switch c.Verb {
	case "stop":
		plans = append(plans, stop)
	case "start":
		plans = append(plans, start)
	case "archive":
		plans = append(plans, archive)
	default:
		plans = append(plans, stop, start)
	}
	for _, plan := range plans {
		p, already := plan()
		if p == nil {
			return 1
		}
		if !p.Applyable() {
			v.Message(fmt.Sprintf("No changes. %s %s.", strings.Join(pos, ", "), already))
			continue
		}
		if code := applyPlan(m, op, p, v, false, 0, 0); code != 0 {
			return code
		}
	}
	return 0
}

// aliasCommand is another name of a command (ps for status), shown as one.
type aliasCommand struct {
	cli.Command
	of string
}

func (a aliasCommand) Synopsis() string { return "Alias of " + a.of }
