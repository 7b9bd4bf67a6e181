package command

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/moby/term"

	"github.com/bottlefile/bottlefile/addrs"
	"github.com/bottlefile/bottlefile/operations"
)

// ExecCommand runs a command in an agent or a sidecar.
type ExecCommand struct {
	Meta *Meta
}

func (c *ExecCommand) Synopsis() string {
	return "Run a command in an agent or a sidecar"
}

func (c *ExecCommand) Help() string {
	return strings.TrimSpace(`
Usage: bottlefile [global options] exec [options] ADDR [-- CMD ARGS...]

  Runs a command in a running workload this state made: the agent
  (agent.NAME) or one of its sidecars (agent.NAME.sidecar.NAME). Without a
  command it opens the image's shell, /bin/sh.

  When standard input is a terminal, the command gets one (interactive,
  as docker exec -it); otherwise standard input is passed to the command
  as it is (a pipe, a file) and its output and errors stay separate.
  bottlefile exits with the command's exit code.

    bottlefile exec agent.coder                       a shell in the agent
    bottlefile exec agent.coder -- git status         one command
    echo hi | bottlefile exec agent.coder -- cat      stdin piped in

  An archived agent (bottlefile archive) is resumed first, as bottlefile
  start does, from its archive snapshot with its files; what the resume
  prints goes to standard error.

Options:

  -T              Do not give the command a terminal, even when standard
                  input is one.
  -lock-timeout=DUR
                  Wait this long for the state lock when the agent is
                  archived and must be resumed first (default 0s).
  -var NAME=VALUE, -var-file=FILE
                  Set variables the configuration needs, as for plan.
`)
}

func (c *ExecCommand) Run(args []string) int {
	m := c.Meta
	fs := newFlagSet("exec")
	m.noColorFlag(fs)
	noTTY := fs.Bool("T", false, "")
	lockTimeout := fs.Duration("lock-timeout", 0, "")
	in := registerInputs(fs)
	// Options come before the address; everything after it is the command.
	if err := fs.Parse(args); err != nil {
		m.showDiags(nil, hcl.Diagnostics{argError(err.Error())})
		return 1
	}
	rest := fs.Args()
	if len(rest) == 0 || rest[0] == "--" {
		m.showDiags(nil, hcl.Diagnostics{argError("exec needs the address of an agent or a sidecar, like agent.coder or agent.coder.sidecar.db")})
		return 1
	}
	addr, command := rest[0], rest[1:]
	if len(command) > 0 && command[0] == "--" {
		command = command[1:]
	}
	if a, err := addrs.Parse(addr); err != nil || (a.Kind() != addrs.AgentKind && a.Kind() != addrs.SidecarKind) {
		return m.fail("Not an agent or a sidecar", fmt.Errorf("%q is not the address of an agent or a sidecar (agent.NAME, agent.NAME.sidecar.NAME): commands run in those", addr))
	}

	op, diags := m.observe(m.Ctx, 0, *in)
	defer func() { op.Close() }()
	if m.showDiags(op.Files(), diags) {
		return 1
	}
	archived, diags := op.Archived(addr)
	if m.showDiags(op.Files(), diags) {
		return 1
	}
	if archived {
		// Resumed first, as bottlefile start would, under the state lock
		// (so the state is closed here and opened again after).
		op.Close()
		op = nil
		if code := c.resume(addr, *in, *lockTimeout); code != 0 {
			return code
		}
		op, diags = m.observe(m.Ctx, 0, *in)
		if m.showDiags(op.Files(), diags) {
			return 1
		}
	}
	live, diags := op.FindLive(m.Ctx, addr)
	if m.showDiags(op.Files(), diags) {
		return 1
	}
	// Do not hold the state's lock for as long as a shell stays open.
	op.ReleaseState()

	opts := operations.ExecOptions{Command: command, Stdin: m.Stdin, Stdout: m.Stdout, Stderr: m.Stderr}
	if f, ok := m.Stdin.(*os.File); ok && !*noTTY && term.IsTerminal(f.Fd()) {
		opts.TTY = true
		if ws, err := term.GetWinsize(f.Fd()); err == nil {
			opts.Height, opts.Width = uint(ws.Height), uint(ws.Width)
		}
		restore, err := rawTerminal(f)
		if err != nil {
			return m.fail("Cannot set up the terminal", err)
		}
		defer restore()
	}
	code, diags := live.Exec(m.Ctx, opts)
	if m.showDiags(op.Files(), diags) {
		return 1
	}
	return code
}

// resume resumes the archived agent of addr (bottlefile start), printing
// its steps on standard error: standard output is the command's.
func (c *ExecCommand) resume(addr string, in operations.Inputs, lockTimeout time.Duration) int {
	m := c.Meta
	agent, _ := addrs.AgentOf(addr)
	op, diags := m.open(m.Ctx, false, lockTimeout, in)
	defer op.Close()
	v := humanApplyView{m: m, print: humanEvents(m.Stderr)}
	if v.Diagnostics(op.Files(), diags) {
		return 1
	}
	p, diags := op.PlanStart(m.Ctx, []string{agent.String()})
	if v.Diagnostics(op.Files(), diags) {
		return 1
	}
	if !p.Applyable() {
		return 0 // resumed meanwhile
	}
	fmt.Fprintf(m.Stderr, "%s is archived: resuming it first.\n", agent)
	res, diags := op.Apply(m.Ctx, p, operations.ApplyOptions{Hook: newProgressHook(v.Event), Abandon: m.Abandon})
	if v.Diagnostics(op.Files(), diags) || len(res.Failed) > 0 || len(res.Skipped) > 0 {
		return 1
	}
	return 0
}

// rawTerminal puts the terminal f in raw mode, so keystrokes (Ctrl-C among
// them) go to the command, and returns what puts it back.
func rawTerminal(f *os.File) (func(), error) {
	st, err := term.SetRawTerminal(f.Fd())
	if err != nil {
		return nil, err
	}
	return func() { term.RestoreTerminal(f.Fd(), st) }, nil
}
