// Command bottlefile makes sandboxes for AI coding agents declarative.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"

	"github.com/hashicorp/cli"
	"github.com/hashicorp/go-hclog"

	"github.com/bottlefile/bottlefile/cmd/bottlefile/command"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	args, chdir, err := globalArgs(args)
	if err != nil {
		fmt.Fprintln(os.Stderr, "Error:", err)
		return 1
	}
	if chdir != "" {
		if err := os.Chdir(chdir); err != nil {
			fmt.Fprintf(os.Stderr, "Error: -chdir=%s: %v\n", chdir, err)
			return 1
		}
	}

	ctx, abandon, stop := signalContexts()
	defer stop()

	meta := &command.Meta{
		Stdout:   os.Stdout,
		Stderr:   os.Stderr,
		Stdin:    os.Stdin,
		Log:      logger(),
		Registry: crashHook(registry()), // a no-op unless the test-only BOTTLEFILE_TEST_CRASH_AFTER is set
		Ctx:      ctx,
		Abandon:  abandon,
		Color:    colorWanted(),
	}
	commands := Commands(meta)
	// gateway is what the egress gateway container runs, not a command for
	// people.
	hidden := []string{"gateway"}
	// The CLI would print the usage for a command it does not know, and
	// exit 127, without saying which word it did not know.
	if code, unknown := command.UnknownCommand(meta, commands, hidden, args); unknown {
		return code
	}
	c := &cli.CLI{
		Name:           "bottlefile",
		Version:        command.Version,
		Args:           args,
		Commands:       commands,
		HelpFunc:       helpFunc,
		HiddenCommands: hidden,
		HelpWriter:     os.Stdout,
		ErrorWriter:    os.Stderr,
		Autocomplete:   false,
	}
	code, err := c.Run()
	if err != nil {
		fmt.Fprintln(os.Stderr, "Error:", err)
		return 1
	}
	return code
}

// globalArgs takes the options that come before the command name.
func globalArgs(args []string) ([]string, string, error) {
	chdir := ""
	for len(args) > 0 && strings.HasPrefix(args[0], "-chdir") {
		a := args[0]
		switch {
		case strings.HasPrefix(a, "-chdir="):
			chdir = strings.TrimPrefix(a, "-chdir=")
			args = args[1:]
		case a == "-chdir" && len(args) > 1:
			chdir = args[1]
			args = args[2:]
		default:
			return nil, "", fmt.Errorf("-chdir needs a directory: -chdir=DIR")
		}
		if chdir == "" {
			return nil, "", fmt.Errorf("-chdir needs a directory: -chdir=DIR")
		}
	}
	return args, chdir, nil
}

// signalContexts returns a context cancelled by the first interrupt (stop
// starting new work) and one cancelled by the second (abandon running work).
func signalContexts() (ctx, abandon context.Context, stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	abandon, cancelAbandon := context.WithCancel(context.Background())
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	go func() {
		n := 0
		for range ch {
			n++
			if n == 1 {
				fmt.Fprintln(os.Stderr, "\nInterrupt received: no new actions will start; running ones finish and are recorded. Interrupt again to abandon them.")
				cancel()
				continue
			}
			fmt.Fprintln(os.Stderr, "\nSecond interrupt: abandoning running actions.")
			cancelAbandon()
		}
	}()
	return ctx, abandon, func() { signal.Stop(ch); cancel(); cancelAbandon() }
}

// logger follows BOTTLEFILE_LOG=trace|debug|info|warn|error; off by default.
func logger() hclog.Logger {
	level := hclog.LevelFromString(os.Getenv("BOTTLEFILE_LOG"))
	if level == hclog.NoLevel {
		return hclog.NewNullLogger()
	}
	return hclog.New(&hclog.LoggerOptions{Name: "bottlefile", Level: level, Output: os.Stderr})
}

func colorWanted() bool {
	if os.Getenv("NO_COLOR") != "" {
		return false
	}
	fi, err := os.Stdout.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// helpFunc lists the main commands first, then the others, as Terraform does.
func helpFunc(commands map[string]cli.CommandFactory) string {
	var b strings.Builder
	b.WriteString("Usage: bottlefile [-chdir=DIR] <command> [options] [args]\n\n")
	b.WriteString("Main commands:\n")
	width := 0
	for name := range commands {
		width = max(width, len(name))
	}
	line := func(name string) {
		c, err := commands[name]()
		if err != nil {
			return
		}
		fmt.Fprintf(&b, "  %-*s  %s\n", width, name, c.Synopsis())
	}
	primary := map[string]bool{}
	for _, name := range PrimaryCommands {
		primary[name] = true
		line(name)
	}
	b.WriteString("\nAll other commands:\n")
	var others []string
	for name := range commands {
		if !primary[name] && !strings.Contains(name, " ") && name != "gateway" {
			others = append(others, name)
		}
	}
	sort.Strings(others)
	for _, name := range others {
		line(name)
	}
	b.WriteString("\nGlobal options:\n  -chdir=DIR  Use the Bottlefile in DIR (its state lives in DIR/.bottlefile).\n")
	return b.String()
}
