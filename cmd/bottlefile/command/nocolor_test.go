package command

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/cli"
)

// TestEveryCommandTakesNoColor walks every registered command and runs it
// with -no-color, color on: each must accept the flag (not refuse it as
// undefined) and turn color off, since each prints diagnostics. Only the
// parents of subcommands (state, snapshot, egress), which print their
// help, are exempt. A command added later without -no-color fails here.
func TestEveryCommandTakesNoColor(t *testing.T) {
	dir := t.TempDir()
	names := func() []string {
		var out []string
		for name := range Commands(&Meta{}) {
			out = append(out, name)
		}
		slices.Sort(out)
		return out
	}()
	for _, name := range names {
		t.Run(strings.ReplaceAll(name, " ", "-"), func(t *testing.T) {
			var out, errb bytes.Buffer
			w := &workspace{t: t, dir: dir}
			m := &Meta{
				Stdout: &out, Stderr: &errb, Stdin: strings.NewReader(""),
				Log: w.logger(), Registry: newWorkspace(t).registry(),
				Ctx: context.Background(), Abandon: context.Background(),
				Dir: dir, Color: true,
			}
			if name == "watch" {
				// watch ticks until it is interrupted: interrupt it
				// after its first tick.
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				defer cancel()
				m.Ctx = ctx
			}
			c, err := Commands(m)[name]()
			if err != nil {
				t.Fatal(err)
			}
			code := c.Run([]string{"-no-color"})
			if code == cli.RunResultHelp {
				return // a parent: it prints its help, no diagnostics
			}
			if strings.Contains(errb.String(), "flag provided but not defined") {
				t.Fatalf("%s refuses -no-color (exit %d):\n%s", name, code, errb.String())
			}
			if m.Color {
				t.Errorf("%s -no-color left color on (exit %d)", name, code)
			}
			if strings.Contains(out.String()+errb.String(), "\x1b[") {
				t.Errorf("%s -no-color printed color:\n%s%s", name, out.String(), errb.String())
			}
		})
	}
}
