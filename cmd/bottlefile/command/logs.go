package command

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/bottlefile/bottlefile/addrs"
	"github.com/bottlefile/bottlefile/operations"
)

// LogsCommand prints the log of a workload: an agent's merged with its
// sidecars' and its gateway's, one sidecar's, or a gateway's (its
// decisions); with -previous, the saved logs of workloads that are gone.
type LogsCommand struct {
	Meta *Meta
}

func (c *LogsCommand) Synopsis() string {
	return "Show the logs of a bottle, a sidecar or a gateway"
}

func (c *LogsCommand) Help() string {
	return strings.TrimSpace(`
Usage: bottlefile [global options] logs [options] ADDR

  Prints the log of workloads this state made, as their runtime keeps it:

    bottlefile logs agent.coder               the agent, its sidecars and its
                                              gateway merged in time order,
                                              each line prefixed with its
                                              workload and time
    bottlefile logs agent.coder.sidecar.git   one sidecar's output
    bottlefile logs agent.coder.gateway       the egress gateway: one JSON line
                                              per decision on standard output,
                                              its own events on standard error
    bottlefile logs -previous agent.coder     the logs saved when workloads of
                                              agent.coder were removed

  Before apply removes a workload (replace, destroy, migrate) it saves the
  workload's log under .bottlefile/logs/, so a session can be read after
  destroy with -previous.

  It reads the state and the runtimes and changes nothing; the state is not
  kept locked while it follows.

Options:

  -f, -follow     Keep printing what is written until interrupted.
  -since=WHEN     Only lines written since WHEN: a duration before now
                  (10m, 2h) or an RFC 3339 time.
  -tail=N         Only the last N lines of each workload.
  -no-prefix      Print the lines alone, without workload and time.
  -previous       The saved logs of workloads that were removed.
  -var NAME=VALUE, -var-file=FILE
                  Set variables the configuration needs, as for plan.
`)
}

func (c *LogsCommand) Run(args []string) int {
	m := c.Meta
	fs := newFlagSet("logs")
	m.noColorFlag(fs)
	var follow bool
	fs.BoolVar(&follow, "f", false, "")
	fs.BoolVar(&follow, "follow", false, "")
	since := fs.String("since", "", "")
	tail := fs.Int("tail", 0, "")
	noPrefix := fs.Bool("no-prefix", false, "")
	previous := fs.Bool("previous", false, "")
	in := registerInputs(fs)
	// Options may come before or after the address.
	positional, err := parseInterleaved(fs, args)
	if err != nil {
		m.showDiags(nil, hcl.Diagnostics{argError(err.Error())})
		return 1
	}
	switch {
	case len(positional) == 0:
		m.showDiags(nil, hcl.Diagnostics{argError("logs needs the address of a workload, like agent.coder or agent.coder.gateway")})
		return 1
	case len(positional) > 1:
		m.showDiags(nil, hcl.Diagnostics{argError(fmt.Sprintf("unexpected argument %q", positional[1]))})
		return 1
	case *previous && follow:
		m.showDiags(nil, hcl.Diagnostics{argError("-previous shows saved logs, which do not grow: it cannot be followed")})
		return 1
	}
	opts := operations.LogOptions{Follow: follow, Tail: *tail}
	if *since != "" {
		t, err := parseSince(*since, now())
		if err != nil {
			m.showDiags(nil, hcl.Diagnostics{argError(err.Error())})
			return 1
		}
		opts.Since = t
	}
	addr := positional[0]
	// A snapshot or a runtime has no output. An address of no known form
	// goes on to the lookup, which suggests the address it was probably
	// meant to be, or says what is wrong with it.
	if a, err := addrs.Parse(addr); err == nil && a.Agent() == "" {
		return m.fail("Not a workload address", fmt.Errorf("%q is not the address of an agent, a sidecar or a gateway (agent.NAME, agent.NAME.sidecar.NAME, agent.NAME.gateway)", addr))
	}
	print := logPrinter(m.Stdout, *noPrefix)

	if *previous {
		dir, err := m.dir()
		if err != nil {
			return m.fail("Cannot find the working directory", err)
		}
		lines, err := operations.PreviousLogs(dir, addr, opts)
		if err != nil {
			return m.fail("Cannot read the saved logs", err)
		}
		if len(lines) == 0 {
			fmt.Fprintf(m.Stderr, "No saved log of %s: logs are saved when apply or destroy removes a workload.\n", addr)
			return 0
		}
		for _, ln := range lines {
			print(ln)
		}
		return 0
	}

	op, diags := m.observe(m.Ctx, 0, *in)
	defer op.Close()
	if m.showDiags(op.Files(), diags) {
		return 1
	}
	if op.Lineage() == "" {
		return m.fail("Nothing applied yet", errors.New("this state has no lineage: nothing was ever applied here, so there is no log to show"))
	}
	live, diags := op.FindLive(m.Ctx, addr)
	if m.showDiags(op.Files(), m.previousLogsHint(addr, diags)) {
		return 1
	}
	if isAgent(addr) {
		// The state is released once the workloads are found.
		if m.showDiags(op.Files(), op.AgentLogs(m.Ctx, addr, opts, print)) {
			return 1
		}
		return 0
	}
	// The state is not needed any more: do not hold its lock while following.
	op.ReleaseState()
	if m.showDiags(op.Files(), live.LogsWith(m.Ctx, opts, m.Stdout, m.Stderr)) {
		return 1
	}
	return 0
}

// previousLogsHint adds to the error for an address no runtime has (an
// agent destroyed or replaced) that its saved logs are there to read.
func (m *Meta) previousLogsHint(addr string, diags hcl.Diagnostics) hcl.Diagnostics {
	if !diags.HasErrors() {
		return diags
	}
	dir, err := m.dir()
	if err != nil {
		return diags
	}
	if lines, err := operations.PreviousLogs(dir, addr, operations.LogOptions{Tail: 1}); err != nil || len(lines) == 0 {
		return diags
	}
	for _, d := range diags {
		if d.Severity == hcl.DiagError {
			d.Detail += fmt.Sprintf(" Its log was saved when it was removed: bottlefile logs -previous %s", addr)
			break
		}
	}
	return diags
}

// isAgent reports whether addr is an agent's own address (agent.NAME).
func isAgent(addr string) bool {
	a, err := addrs.Parse(addr)
	return err == nil && a.IsAgent()
}

// logPrinter prints merged log lines: "WORKLOAD | TIME TEXT", or the text
// alone with noPrefix.
func logPrinter(w io.Writer, noPrefix bool) func(operations.LogLine) {
	return func(ln operations.LogLine) {
		if noPrefix {
			fmt.Fprintln(w, ln.Text)
			return
		}
		stamp := "-"
		if !ln.Time.IsZero() {
			stamp = ln.Time.UTC().Format("2006-01-02T15:04:05.000Z07:00")
		}
		fmt.Fprintf(w, "%s | %s %s\n", ln.Addr, stamp, ln.Text)
	}
}

// parseSince reads -since: a duration before at, or an RFC 3339 time.
func parseSince(s string, at time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil {
		if d < 0 {
			return time.Time{}, fmt.Errorf("-since=%s: a duration before now must not be negative", s)
		}
		return at.Add(-d), nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("-since=%s is neither a duration (10m, 2h) nor an RFC 3339 time (2026-11-25T10:00:00Z)", s)
}
