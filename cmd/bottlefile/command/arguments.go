package command

import (
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/hashicorp/hcl/v2"
)

// planArgs are the options plan, apply and destroy share.
type planArgs struct {
	Destroy          bool
	DetailedExitCode bool
	JSON             bool
	NoColor          bool
	LockTimeout      time.Duration
	Parallelism      int
}

// applyArgs are apply's and destroy's options.
type applyArgs struct {
	planArgs
	AutoApprove bool
}

func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

func (a *planArgs) register(fs *flag.FlagSet) {
	fs.BoolVar(&a.NoColor, "no-color", false, "")
	fs.BoolVar(&a.JSON, "json", false, "")
	fs.BoolVar(&a.Destroy, "destroy", a.Destroy, "")
	fs.DurationVar(&a.LockTimeout, "lock-timeout", 0, "")
	fs.IntVar(&a.Parallelism, "parallelism", 10, "")
}

func parsePlanArgs(args []string) (*planArgs, hcl.Diagnostics) {
	a := &planArgs{}
	fs := newFlagSet("plan")
	a.register(fs)
	fs.BoolVar(&a.DetailedExitCode, "detailed-exitcode", false, "")
	return a, finishParse(fs, args, 0)
}

func parseApplyArgs(args []string, destroy bool) (*applyArgs, hcl.Diagnostics) {
	a := &applyArgs{}
	a.Destroy = destroy
	fs := newFlagSet("apply")
	a.register(fs)
	fs.BoolVar(&a.AutoApprove, "auto-approve", false, "")
	return a, finishParse(fs, args, 0)
}

// finishParse parses and checks the flags, allowing at most maxArgs positional arguments.
func finishParse(fs *flag.FlagSet, args []string, maxArgs int) hcl.Diagnostics {
	var diags hcl.Diagnostics
	if err := fs.Parse(args); err != nil {
		return append(diags, argError(err.Error()))
	}
	if fs.NArg() > maxArgs {
		diags = append(diags, argError(fmt.Sprintf("unexpected argument %q", fs.Arg(maxArgs))))
	}
	if p := fs.Lookup("parallelism"); p != nil {
		if n := p.Value.(flag.Getter).Get().(int); n < 1 {
			diags = append(diags, argError(fmt.Sprintf("-parallelism must be at least 1, not %d", n)))
		}
	}
	return diags
}

func argError(detail string) *hcl.Diagnostic {
	return &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid command line", Detail: detail + ". Run with -help to see the options."}
}
