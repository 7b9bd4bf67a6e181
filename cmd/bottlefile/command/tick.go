package command

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/hcl/v2"

	"github.com/bottlefile/bottlefile/operations"
	"github.com/bottlefile/bottlefile/planner"
)

// TickCommand is bottlefile tick: one pass of every time policy due now.
type TickCommand struct{ Meta *Meta }

func (c *TickCommand) Synopsis() string { return "Run the time policies that are due (for cron)" }

func (c *TickCommand) Help() string {
	return strings.TrimSpace(`
Usage: bottlefile [global options] tick [options]

  Makes one pass of every policy that runs on time and is due now:
  snapshot_policy { every } takes a snapshot (skipped when the agent wrote
  nothing since its last one, where the runtime can tell), pruned by the
  policy's keep_last, max_age and max_total_size; idle { stop_after }
  stops an agent nobody used for that long (no request through its
  gateway, no exec session, CPU below the runtime's threshold), recorded
  as stopped for idleness; idle { archive_after } archives it.

  It plans first with the state read, as plan does, and takes the state
  lock only when something is due, for as long as it acts. With nothing
  due it changes nothing and exits 0, so cron or a systemd timer can run
  it as often as it likes. What it does is planned and applied as apply
  does, so a tick cut off is finished by the next.

Options:

  -lock-timeout=DUR    Wait this long for the state lock (default 0s).
  -no-color            Print without color.
  -var NAME=VALUE      Set a variable. Repeatable.
  -var-file=FILE       Set variables from an HCL or JSON file.
`)
}

func (c *TickCommand) Run(args []string) int {
	m := c.Meta
	fs := newFlagSet("tick")
	m.noColorFlag(fs)
	lockTimeout := fs.Duration("lock-timeout", 0, "")
	in := registerInputs(fs)
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return m.fail("Invalid command line", fmt.Errorf("%v. Run with -help to see the options", err))
	}
	if len(pos) > 0 {
		return m.fail("Invalid command line", errors.New("tick takes no arguments"))
	}
	v := newApplyView(m, false)
	open := func(ctx context.Context, readOnly bool) (*operations.Operation, hcl.Diagnostics) {
		return m.open(ctx, readOnly, *lockTimeout, *in)
	}
	shown := false
	planned := func(p *planner.Plan) {
		v.Plan(p, nil)
		v.Starting()
		shown = true
	}
	res, diags := operations.Tick(m.Ctx, open, operations.TickOptions{
		ApplyOptions: operations.ApplyOptions{Hook: newProgressHook(v.Event), Abandon: m.Abandon}, Planned: planned})
	failed := v.Diagnostics(res.Files, diags)
	if res.Plan != nil {
		failed = failed || len(res.Result.Failed) > 0 || len(res.Result.Skipped) > 0
		v.Summary(applyResult(res.Result, false, failed, nil))
	}
	if failed {
		return 1
	}
	if !shown {
		v.Message("Nothing due.")
		var buf strings.Builder
		renderDue(&buf, res.Due, now(), false)
		if buf.Len() > 0 {
			v.Message(strings.TrimPrefix(buf.String(), "\n"))
		}
	}
	return 0
}

// WatchCommand is bottlefile watch: tick in a loop.
type WatchCommand struct{ Meta *Meta }

func (c *WatchCommand) Synopsis() string { return "Run the time policies as they come due" }

func (c *WatchCommand) Help() string {
	return strings.TrimSpace(`
Usage: bottlefile [global options] watch [options]

  Runs bottlefile tick every -interval until it is interrupted (SIGINT or
  SIGTERM), logging each action it takes, one line each, to stderr. An
  interrupt during a tick lets that tick finish and starts no other; a
  second one gives up the steps still running, and the next tick or
  apply finishes what it cut off.
  A tick that fails (the state locked by an apply, a runtime unreachable)
  is logged, and the next one tries again.

Options:

  -interval=DUR        How often to tick (default 30s).
  -lock-timeout=DUR    Wait this long for the state lock (default 0s).
  -log-json            Log JSON lines instead of text.
  -no-color            Print diagnostics without color.
  -var NAME=VALUE      Set a variable. Repeatable.
  -var-file=FILE       Set variables from an HCL or JSON file.
`)
}

func (c *WatchCommand) Run(args []string) int {
	m := c.Meta
	fs := newFlagSet("watch")
	m.noColorFlag(fs)
	interval := fs.Duration("interval", 30*time.Second, "")
	lockTimeout := fs.Duration("lock-timeout", 0, "")
	logJSON := fs.Bool("log-json", false, "")
	in := registerInputs(fs)
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return m.fail("Invalid command line", fmt.Errorf("%v. Run with -help to see the options", err))
	}
	if len(pos) > 0 {
		return m.fail("Invalid command line", errors.New("watch takes no arguments"))
	}
	if *interval <= 0 {
		return m.fail("Invalid command line", fmt.Errorf("-interval=%s: the interval must be more than zero, like 30s or 5m", *interval))
	}
	log := hclog.New(&hclog.LoggerOptions{Name: "bottlefile.watch", Level: hclog.Info, Output: m.Stderr, JSONFormat: *logJSON})
	open := func(ctx context.Context, readOnly bool) (*operations.Operation, hcl.Diagnostics) {
		return m.open(ctx, readOnly, *lockTimeout, *in)
	}
	log.Info("watching", "interval", interval.String())
	t := time.NewTicker(*interval)
	defer t.Stop()
	failures := 0
	for {
		// The first interrupt lets the tick under way finish (its prunes
		// after its snapshots too) and starts no other; the second gives
		// up its running steps, as for apply.
		res, diags := operations.Tick(m.Abandon, open, operations.TickOptions{ApplyOptions: operations.ApplyOptions{Abandon: m.Abandon}})
		if logTick(log, res, diags) {
			failures++
		} else {
			failures = 0
		}
		select {
		case <-m.Ctx.Done():
			log.Info("stopped", "reason", "interrupted")
			if failures > 0 {
				return 1
			}
			return 0
		case <-t.C:
		}
	}
}

// logTick logs what one tick did, one line per action and per problem,
// and reports whether it failed.
func logTick(log hclog.Logger, res operations.TickResult, diags hcl.Diagnostics) bool {
	failed := false
	for _, d := range diags {
		kv := []any{"summary", d.Summary, "detail", d.Detail}
		if d.Severity == hcl.DiagError {
			failed = true
			log.Error("tick failed", kv...)
		} else {
			log.Warn("tick", kv...)
		}
	}
	if res.Plan == nil {
		return failed
	}
	done := map[string]bool{}
	for _, st := range res.Result.Applied {
		done[st.Change.Addr] = true
	}
	for _, c := range res.Plan.Changes {
		if c.Action == planner.NoOp {
			continue
		}
		kv := []any{"address", c.Addr, "action", c.Action.String()}
		if len(c.Reasons) > 0 {
			kv = append(kv, "reason", c.Reasons[0].Text())
		}
		if !done[c.Addr] {
			log.Warn("not done", kv...)
			continue
		}
		log.Info(tickVerb(c), kv...)
	}
	for _, st := range res.Result.Failed {
		failed = true
		log.Error("step failed", "step", st.Name())
	}
	return failed
}

// tickVerb is what a tick's change did, for its log line.
func tickVerb(c *planner.Change) string {
	switch {
	case c.Action == planner.Create:
		return "snapshot taken"
	case c.Action == planner.Delete:
		return "snapshot pruned"
	case c.Action == planner.Stop:
		return "stopped"
	case c.Action == planner.Archive:
		return "archived"
	}
	return c.Action.String()
}
