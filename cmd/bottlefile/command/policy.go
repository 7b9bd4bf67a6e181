package command

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/bottlefile/bottlefile/operations"
)

// PolicyCommand shows the operator's egress policy in force and where it
// comes from.
type PolicyCommand struct {
	Meta *Meta
}

func (c *PolicyCommand) Synopsis() string {
	return "Show the operator's egress policy that bounds every runtime"
}

func (c *PolicyCommand) Help() string {
	return strings.TrimSpace(`
Usage: bottlefile policy [-json]

  Shows the operator's egress policy (a file outside the Bottlefile that
  bounds the egress of every runtime) and the file it comes from:
  $BOTTLEFILE_POLICY when set, else the first of
  $XDG_CONFIG_HOME/bottlefile/policy.hcl (~/.config) and
  /etc/bottlefile/policy.hcl that exists.

Options:

  -json   Print the policy as a JSON object.
`)
}

func (c *PolicyCommand) Run(args []string) int {
	m := c.Meta
	fs := newFlagSet("policy")
	m.noColorFlag(fs)
	asJSON := fs.Bool("json", false, "")
	if m.showDiags(nil, finishParse(fs, args, 0)) {
		return 1
	}
	v, diags := operations.EgressPolicy()
	if m.showDiags(nil, diags) {
		return 1
	}
	if *asJSON {
		data, _ := json.Marshal(v)
		fmt.Fprintln(m.Stdout, string(data))
		return 0
	}
	switch {
	case v.Source == "":
		fmt.Fprintf(m.Stdout, "No egress policy: none found (looked for %s).\nEvery runtime is bounded only by its own egress_ceiling.\n", strings.Join(v.Searched, ", then "))
	case v.Ceiling == nil:
		fmt.Fprintf(m.Stdout, "Egress policy: %s\nIt sets no egress_ceiling: every runtime is bounded only by its own.\n", v.Source)
	case len(v.Ceiling) == 0:
		fmt.Fprintf(m.Stdout, "Egress policy: %s\negress_ceiling = []: no agent on any runtime may open anything.\n", v.Source)
	default:
		fmt.Fprintf(m.Stdout, "Egress policy: %s\nEvery agent and sidecar, on every runtime, may open only what these allow (a runtime's egress_ceiling may narrow them):\n", v.Source)
		for _, r := range v.Ceiling {
			fmt.Fprintf(m.Stdout, "  %s\n", r)
		}
	}
	return 0
}
