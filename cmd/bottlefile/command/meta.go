package command

import (
	"context"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strconv"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/hcl/v2"

	"github.com/bottlefile/bottlefile/lang"
	"github.com/bottlefile/bottlefile/operations"
)

// Version is bottlefile's version.
const Version = "0.1.0"

// Meta is what every command shares: where output goes, the logger, the
// driver registry and the contexts interrupts cancel.
type Meta struct {
	Stdout, Stderr io.Writer
	Stdin          io.Reader
	Log            hclog.Logger
	Registry       operations.Registry
	// Ctx is cancelled by the first interrupt: start nothing new.
	Ctx context.Context
	// Abandon is cancelled by the second interrupt: give up running work.
	Abandon context.Context
	// Color enables ANSI color in human output.
	Color bool
	// Dir is the directory holding the Bottlefile and its state; "" means
	// the working directory (main has already applied -chdir).
	Dir string
}

// loadDir is the directory as the parser is given it: relative when it is
// the working directory, so diagnostics name "Bottlefile", not a long path.
func (m *Meta) loadDir() string {
	if m.Dir == "" {
		return "."
	}
	return m.Dir
}

// dir is the Bottlefile's directory as an absolute path.
func (m *Meta) dir() (string, error) {
	if m.Dir != "" {
		return filepath.Abs(m.Dir)
	}
	return os.Getwd()
}

// showDiags prints diagnostics with source snippets and reports whether any
// is an error.
func (m *Meta) showDiags(files map[string]*hcl.File, diags hcl.Diagnostics) bool {
	if len(diags) == 0 {
		return false
	}
	if err := lang.WriteDiagnostics(m.Stderr, files, diags, 100, m.Color); err != nil {
		m.Log.Error("rendering diagnostics", "error", err)
	}
	return diags.HasErrors()
}

// noColorFlag registers -no-color, which turns color off for the rest of
// the command. Every command that prints diagnostics takes it (plan,
// apply, destroy and status with their other options);
// TestEveryCommandTakesNoColor walks them all.
func (m *Meta) noColorFlag(fs *flag.FlagSet) {
	fs.BoolFunc("no-color", "", func(v string) error {
		off, err := strconv.ParseBool(v)
		if off {
			m.Color = false
		}
		return err
	})
}

// noColorFlags is the flag set of a command whose only option is
// -no-color.
func (m *Meta) noColorFlags(name string) *flag.FlagSet {
	fs := newFlagSet(name)
	m.noColorFlag(fs)
	return fs
}

// fail prints one error and returns the exit code for it.
func (m *Meta) fail(summary string, err error) int {
	m.showDiags(nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: summary, Detail: err.Error()}})
	return 1
}
