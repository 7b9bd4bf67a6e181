package smolvm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

// runner runs the smolvm CLI. execRunner runs the real program; unit
// tests may inject their own.
type runner interface {
	// run executes smolvm with args and returns its standard output. env
	// adds KEY=VALUE entries to the process environment (for -e KEY
	// forwarding). Standard input is empty. A non-zero exit is a
	// *cliError.
	run(ctx context.Context, args []string, env []string) ([]byte, error)
}

// execRunner runs one binary.
type execRunner struct {
	binary string
	// env is added to every invocation's environment (tests point the
	// fake at its state directory with it).
	env []string
}

// waitDelay bounds how long a cancelled invocation may keep its output
// pipes open.
const waitDelay = 5 * time.Second

func (r execRunner) run(ctx context.Context, args []string, env []string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, r.binary, args...)
	cmd.Env = append(append(os.Environ(), r.env...), env...)
	cmd.Stdin = nil // /dev/null: nothing ever waits on a prompt
	cmd.WaitDelay = waitDelay
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err == nil {
		return stdout.Bytes(), nil
	}
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) && exitErr.Exited() {
		return stdout.Bytes(), &cliError{Args: args, Code: exitErr.ExitCode(), Stdout: stdout.String(), Stderr: stderr.String()}
	}
	if ctxErr := ctx.Err(); ctxErr != nil {
		return nil, fmt.Errorf("smolvm %s: %w", subcommand(args), ctxErr)
	}
	return nil, fmt.Errorf("running %s: %w", r.binary, err)
}

// cliError is a non-zero exit of the smolvm CLI.
type cliError struct {
	Args   []string
	Code   int
	Stdout string
	Stderr string
}

// Error is smolvm's own message (the "Error: ..." it prints on stderr, or
// clap's "error: ..." for a usage error) and the exit status.
func (e *cliError) Error() string {
	return fmt.Sprintf("%s (smolvm exit status %d)", e.Message(), e.Code)
}

// Message extracts smolvm's error message from its stderr: the text from
// the first line that starts "Error: " to the end, lines joined by "; ".
// Usage errors (exit 2) start "error: " instead. Without either, the last
// line of stderr stands in, then the last line of stdout.
func (e *cliError) Message() string {
	lines := strings.Split(strings.ReplaceAll(e.Stderr, "\r\n", "\n"), "\n")
	for i, l := range lines {
		l = strings.TrimSpace(l)
		msg, ok := strings.CutPrefix(l, "Error: ")
		if !ok {
			msg, ok = strings.CutPrefix(l, "error: ")
			if ok {
				// A clap error: the first line says it; the usage follows.
				return msg
			}
			continue
		}
		parts := []string{msg}
		for _, more := range lines[i+1:] {
			if more = strings.TrimSpace(more); more != "" {
				parts = append(parts, more)
			}
		}
		return strings.Join(parts, "; ")
	}
	for _, out := range []string{e.Stderr, e.Stdout} {
		if l := lastLine(out); l != "" {
			return l
		}
	}
	return "no error message"
}

// isRuntimeError reports whether smolvm itself failed (it printed
// "Error: ..."), as opposed to a guest command of exec exiting non-zero.
func (e *cliError) isRuntimeError() bool {
	for _, l := range strings.Split(e.Stderr, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "Error: ") {
			return true
		}
	}
	return false
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// subcommand names an invocation for messages: "machine create".
func subcommand(args []string) string {
	var words []string
	for _, a := range args {
		if strings.HasPrefix(a, "-") || len(words) == 2 {
			break
		}
		words = append(words, a)
	}
	if len(words) == 0 && len(args) > 0 {
		return args[0]
	}
	return strings.Join(words, " ")
}
