package command

import (
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
)

// VersionCommand prints bottlefile's version.
type VersionCommand struct {
	Meta *Meta
}

func (c *VersionCommand) Synopsis() string { return "Show the version" }

func (c *VersionCommand) Help() string {
	return strings.TrimSpace(`
Usage: bottlefile version [-json]

Options:

  -json   Print the version as a JSON object.
`)
}

func (c *VersionCommand) Run(args []string) int {
	m := c.Meta
	fs := newFlagSet("version")
	m.noColorFlag(fs)
	asJSON := fs.Bool("json", false, "")
	if m.showDiags(nil, finishParse(fs, args, 0)) {
		return 1
	}
	if *asJSON {
		data, _ := json.Marshal(map[string]string{"version": Version, "go": runtime.Version(), "platform": runtime.GOOS + "/" + runtime.GOARCH})
		fmt.Fprintln(m.Stdout, string(data))
		return 0
	}
	fmt.Fprintf(m.Stdout, "bottlefile v%s\non %s/%s, built with %s\n", Version, runtime.GOOS, runtime.GOARCH, runtime.Version())
	return 0
}
