package smolvm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"

	"github.com/bottlefile/bottlefile/drivers"
)

var _ drivers.Execer = (*Driver)(nil)

// attachRunner runs smolvm with the caller's streams, for a command whose
// output and input belong to the user: machine exec.
type attachRunner interface {
	// attach runs smolvm with args, copying stdin (when not nil) in and
	// its output out as it comes, and returns its exit code. An error
	// means smolvm could not be run.
	attach(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) (int, error)
}

func (r execRunner) attach(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	cmd := exec.CommandContext(ctx, r.binary, args...)
	cmd.Env = append(os.Environ(), r.env...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
	cmd.WaitDelay = waitDelay
	err := cmd.Run()
	var exitErr *exec.ExitError
	switch {
	case err == nil:
		return 0, nil
	case errors.As(err, &exitErr) && exitErr.Exited():
		return exitErr.ExitCode(), nil
	case ctx.Err() != nil:
		return 0, ctx.Err()
	}
	return 0, fmt.Errorf("running %s: %w", r.binary, err)
}

// Exec runs a command in an agent's machine with smolvm machine exec
// (--name has no short form there). Output is streamed (--stream, so
// it is not capped at 11 MiB) unless a TTY is asked for (-t, which is
// interactive already); stdin is forwarded (-i) when given. smolvm exits
// with the guest command's code, which is returned; a machine that is not
// running is smolvm's own error on stderr, exit 1.
func (d *Driver) Exec(ctx context.Context, lineage string, obj drivers.LiveObject, req drivers.ExecRequest) (int, error) {
	if obj.Kind != kindMachine {
		return 0, fmt.Errorf("%s is a smolvm %s; commands run in machines", obj.Addr, obj.Kind)
	}
	if len(req.Command) == 0 {
		return 0, errors.New("no command to run")
	}
	run, err := d.cli()
	if err != nil {
		return 0, err
	}
	ar, ok := run.(attachRunner)
	if !ok {
		return 0, errors.New("this smolvm runner cannot attach a command's streams")
	}
	args := []string{"machine", "exec", "--name", obj.ID}
	if req.Stdin != nil {
		args = append(args, "-i")
	}
	if req.TTY {
		args = append(args, "-t")
	} else {
		args = append(args, "--stream")
	}
	args = append(append(args, "--"), req.Command...)
	return ar.attach(ctx, args, req.Stdin, orDiscard(req.Stdout), orDiscard(req.Stderr))
}

func orDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}
