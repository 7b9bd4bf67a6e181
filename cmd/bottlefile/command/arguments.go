package command

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/bottlefile/bottlefile/operations"
	"github.com/bottlefile/bottlefile/planner"
)

// planArgs are the options plan, apply and destroy share.
type planArgs struct {
	Destroy          bool
	IncludeSnapshots bool // with Destroy: delete the snapshots a policy keeps
	DetailedExitCode bool
	JSON             bool
	Markdown         bool // plan -markdown
	NoColor          bool
	Refresh          bool
	RefreshOnly      bool
	LockTimeout      time.Duration
	Parallelism      int
	Targets          stringList
	Replace          stringList
	Vars             stringList // -var name=value, in order
	VarFiles         stringList
	Out              string // plan -out=FILE
}

// applyArgs are apply's and destroy's options.
type applyArgs struct {
	planArgs
	AutoApprove bool
	PlanFile    string
	// Wait is how long a started workload is watched for an early exit;
	// 0 turns watching off.
	Wait time.Duration
}

// WaitEnv, when set to a duration, is the default of apply's -wait.
const WaitEnv = "BOTTLEFILE_APPLY_WAIT"

// defaultWait is apply's -wait when neither the flag nor WaitEnv says.
const defaultWait = operations.DefaultWait

// waitOption is -wait as operations.ApplyOptions takes it: zero there
// means its default, negative means off.
func (a *applyArgs) waitOption() time.Duration {
	if a.Wait == 0 {
		return -1
	}
	return a.Wait
}

// stringList is a repeatable flag.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

func (a *planArgs) register(fs *flag.FlagSet) {
	fs.BoolVar(&a.NoColor, "no-color", false, "")
	fs.BoolVar(&a.JSON, "json", false, "")
	fs.BoolVar(&a.Destroy, "destroy", a.Destroy, "")
	fs.BoolVar(&a.IncludeSnapshots, "include-snapshots", false, "")
	fs.BoolVar(&a.Refresh, "refresh", true, "")
	fs.BoolVar(&a.RefreshOnly, "refresh-only", false, "")
	fs.DurationVar(&a.LockTimeout, "lock-timeout", 0, "")
	fs.IntVar(&a.Parallelism, "parallelism", 10, "")
	fs.Var(&a.Targets, "target", "")
	fs.Var(&a.Replace, "replace", "")
	fs.Var(&a.Vars, "var", "")
	fs.Var(&a.VarFiles, "var-file", "")
}

// options are the planner's modes the flags ask for.
func (a *planArgs) options() planner.Options {
	return planner.Options{
		Destroy: a.Destroy, NoRefresh: !a.Refresh, RefreshOnly: a.RefreshOnly,
		Targets: a.Targets, Replace: a.Replace, IncludeSnapshots: a.IncludeSnapshots,
	}
}

// inputs are the variable values the flags give.
func (a *planArgs) inputs() operations.Inputs {
	return operations.Inputs{Vars: a.Vars, VarFiles: a.VarFiles}
}

// format is the form the plan is printed in.
func (a *planArgs) format() planFormat {
	switch {
	case a.JSON:
		return formatJSON
	case a.Markdown:
		return formatMarkdown
	}
	return formatHuman
}

// check reports flag combinations that make no sense together.
func (a *planArgs) check() hcl.Diagnostics {
	var diags hcl.Diagnostics
	if a.Destroy && a.RefreshOnly {
		diags = append(diags, argError("-destroy and -refresh-only cannot be used together"))
	}
	if a.RefreshOnly && !a.Refresh {
		diags = append(diags, argError("-refresh-only and -refresh=false cannot be used together"))
	}
	if a.IncludeSnapshots && !a.Destroy {
		diags = append(diags, argError("-include-snapshots needs -destroy: only a destroy keeps snapshots"))
	}
	if a.Destroy && len(a.Replace) > 0 {
		diags = append(diags, argError("-destroy and -replace cannot be used together"))
	}
	for _, v := range a.Vars {
		if !strings.Contains(v, "=") {
			diags = append(diags, argError(fmt.Sprintf("-var %q must be name=value", v)))
		}
	}
	return diags
}

func parsePlanArgs(args []string) (*planArgs, hcl.Diagnostics) {
	a := &planArgs{}
	fs := newFlagSet("plan")
	a.register(fs)
	fs.BoolVar(&a.DetailedExitCode, "detailed-exitcode", false, "")
	fs.StringVar(&a.Out, "out", "", "")
	fs.BoolVar(&a.Markdown, "markdown", false, "")
	diags := finishParse(fs, args, 0)
	if a.JSON && a.Markdown {
		diags = append(diags, argError("-json and -markdown cannot be used together"))
	}
	return a, append(diags, a.check()...)
}

func parseApplyArgs(args []string, destroy bool) (*applyArgs, hcl.Diagnostics) {
	a := &applyArgs{}
	a.Destroy = destroy
	fs := newFlagSet("apply")
	a.register(fs)
	fs.BoolVar(&a.AutoApprove, "auto-approve", false, "")
	wait := defaultWait
	var envDiags hcl.Diagnostics
	if v := os.Getenv(WaitEnv); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			envDiags = append(envDiags, argError(fmt.Sprintf("%s=%q is not a duration such as 3s", WaitEnv, v)))
		} else {
			wait = d
		}
	}
	fs.DurationVar(&a.Wait, "wait", wait, "")
	max := 1
	if destroy {
		max = 0
	}
	diags := append(envDiags, finishParse(fs, args, max)...)
	if a.Wait < 0 {
		diags = append(diags, argError(fmt.Sprintf("-wait must not be negative, not %v", a.Wait)))
	}
	if fs.NArg() == 1 {
		a.PlanFile = fs.Arg(0)
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		for _, name := range []string{"destroy", "include-snapshots", "refresh", "refresh-only", "target", "replace"} {
			if set[name] {
				diags = append(diags, argError(fmt.Sprintf("-%s cannot be used with a saved plan: the plan already fixes it", name)))
			}
		}
	}
	return a, append(diags, a.check()...)
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
