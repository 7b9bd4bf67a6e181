package command

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/hashicorp/cli"
	"github.com/hashicorp/hcl/v2"

	"github.com/bottlefile/bottlefile/operations"
)

// EgressCommand groups the egress subcommands.
type EgressCommand struct{ Meta *Meta }

func (c *EgressCommand) Synopsis() string { return "Read what the egress gateways decided" }

func (c *EgressCommand) Help() string {
	return strings.TrimSpace(`
Usage: bottlefile [global options] egress <subcommand> [args]

  denials [ADDR] [-since DUR] [-json]
                        The destinations the gateways refused, per agent,
                        with counts, when last, and the allow rule that
                        would let each through.
`)
}

func (c *EgressCommand) Run(args []string) int { return cli.RunResultHelp }

// EgressDenialsCommand lists what the gateways refused.
type EgressDenialsCommand struct{ Meta *Meta }

func (c *EgressDenialsCommand) Synopsis() string {
	return "List the destinations the egress gateways refused"
}

func (c *EgressDenialsCommand) Help() string {
	return strings.TrimSpace(`
Usage: bottlefile [global options] egress denials [options] [ADDR]

  Reads the decision log of every agent's egress gateway (or of agent
  ADDR's) and lists the destinations it refused, grouped per agent, most
  refused first: how many times, when last, why, and the exact rule to
  add to the agent's egress block to allow it:

    egress { allow = [..., "api.example.com:443"] }

  A destination no rule can allow (a malformed request, a sidecar's name
  sent through the proxy, a credential's placeholder sent where the
  credential does not go) says what to do instead. Then it lists where the
  gateways injected credentials (egress credential blocks): how many
  requests, when last, which credentials, never their values. It reads the
  state and the runtimes and changes nothing.

Options:

  -since=DUR           Only refusals in the last DUR (default 24h).
  -json                Print one JSON document.
  -lock-timeout=DUR    Wait this long for the state lock (default 0s).
  -var NAME=VALUE, -var-file=FILE
                       Set variables the configuration needs, as for plan.
`)
}

func (c *EgressDenialsCommand) Run(args []string) int {
	m := c.Meta
	fs := newFlagSet("egress denials")
	m.noColorFlag(fs)
	asJSON := fs.Bool("json", false, "")
	since := fs.Duration("since", operations.DecisionsKept, "")
	lockTimeout := fs.Duration("lock-timeout", 0, "")
	in := registerInputs(fs)
	pos, err := parseInterleaved(fs, args)
	if err == nil && len(pos) > 1 {
		err = fmt.Errorf("unexpected argument %q", pos[1])
	}
	if err == nil && *since <= 0 {
		err = fmt.Errorf("-since must be positive, not %v", *since)
	}
	if err != nil {
		m.showDiags(nil, hcl.Diagnostics{argError(err.Error())})
		return 1
	}
	agent := ""
	if len(pos) == 1 {
		agent = pos[0]
	}
	op, diags := m.observe(m.Ctx, *lockTimeout, *in)
	defer op.Close()
	if m.showDiags(op.Files(), diags) {
		return 1
	}
	at := now()
	decs, diags := op.Decisions(m.Ctx, agent, at.Add(-*since))
	if m.showDiags(op.Files(), diags) {
		return 1
	}
	denials, injected := operations.Denials(decs), operations.Injections(decs)
	if *asJSON {
		if err := writeDenialsJSON(m.Stdout, denials, injected, *since); err != nil {
			return m.fail("Cannot write the denials", err)
		}
		return 0
	}
	renderDenials(m.Stdout, denials, *since, at)
	renderInjections(m.Stdout, injected, *since)
	return 0
}

// renderInjections prints, after the denials, where the gateways injected
// credentials: a block per agent, a line per destination. Nothing when
// they injected none.
func renderInjections(w io.Writer, injected []operations.Injection, since time.Duration) {
	if len(injected) == 0 {
		return
	}
	agent := ""
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw)
	for _, in := range injected {
		if in.Agent != agent {
			if agent != "" {
				fmt.Fprintln(tw)
			}
			agent = in.Agent
			fmt.Fprintf(tw, "%s (credentials injected in the last %s)\n", agent, since)
		}
		fmt.Fprintf(tw, "  %s\t%d %s\tlast %s\t%s\n", in.Destination, in.Count, map[bool]string{true: "request", false: "requests"}[in.Count == 1],
			in.Last.UTC().Format("2006-01-02 15:04:05 UTC"), in.Reason)
	}
	tw.Flush()
}

// renderDenials prints one block per agent: a line per destination, then
// the rule that would allow it, or that none would.
func renderDenials(w io.Writer, denials []operations.Denial, since time.Duration, at time.Time) {
	if len(denials) == 0 {
		fmt.Fprintf(w, "No denials in the last %s.\n", since)
		return
	}
	agent := ""
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, d := range denials {
		if d.Agent != agent {
			if agent != "" {
				fmt.Fprintln(tw)
			}
			agent = d.Agent
			fmt.Fprintf(tw, "%s (denials in the last %s)\n", agent, since)
		}
		fmt.Fprintf(tw, "  %s\t%d %s\tlast %s\t%s\n", d.Destination, d.Count, map[bool]string{true: "time", false: "times"}[d.Count == 1],
			d.Last.UTC().Format("2006-01-02 15:04:05 UTC"), d.Reason)
		// Without a rule, the refusal is not the allowlist's (a malformed
		// request, a placeholder sent elsewhere, a sidecar asked through
		// the proxy): the reason above says what to do.
		if d.Rule != "" {
			fmt.Fprintf(tw, "    allow with:\tegress { allow = [..., %q] }\n", d.Rule)
		} else {
			fmt.Fprintf(tw, "    no allow rule changes this\n")
		}
	}
	tw.Flush()
}

type denialJSON struct {
	Agent       string    `json:"agent"`
	Destination string    `json:"destination"`
	Count       int       `json:"count"`
	Last        time.Time `json:"last"`
	Reason      string    `json:"reason"`
	Outcome     string    `json:"outcome"`
	Serial      uint64    `json:"allowlist_serial"`
	Rule        string    `json:"rule,omitempty"`
}

type injectionJSON struct {
	Agent       string    `json:"agent"`
	Destination string    `json:"destination"`
	Count       int       `json:"count"`
	Last        time.Time `json:"last"`
	Reason      string    `json:"reason"`
}

func writeDenialsJSON(w io.Writer, denials []operations.Denial, injected []operations.Injection, since time.Duration) error {
	doc := struct {
		Since    string          `json:"since"`
		Denials  []denialJSON    `json:"denials"`
		Injected []injectionJSON `json:"credentials_injected"`
	}{Since: since.String(), Denials: []denialJSON{}, Injected: []injectionJSON{}}
	for _, d := range denials {
		doc.Denials = append(doc.Denials, denialJSON{d.Agent, d.Destination, d.Count, d.Last.UTC(), d.Reason, d.Outcome, d.Serial, d.Rule})
	}
	for _, in := range injected {
		doc.Injected = append(doc.Injected, injectionJSON{in.Agent, in.Destination, in.Count, in.Last.UTC(), in.Reason})
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(doc)
}
