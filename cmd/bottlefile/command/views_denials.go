package command

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/bottlefile/bottlefile/operations"
)

// denialsReport is what egress denials reports: the refusals and the
// credential injections of the gateways' decisions since At-Since.
type denialsReport struct {
	Denials  []operations.Denial
	Injected []operations.Injection
	Since    time.Duration
	At       time.Time
}

// denialsView renders a denials report: blocks per agent for people, or
// one JSON document.
type denialsView interface {
	Denials(r denialsReport) error
}

func newDenialsView(asJSON bool, w io.Writer) denialsView {
	if asJSON {
		return jsonDenialsView{w}
	}
	return humanDenialsView{w}
}

type humanDenialsView struct{ w io.Writer }

func (v humanDenialsView) Denials(r denialsReport) error {
	renderDenials(v.w, r.Denials, r.Since, r.At)
	renderInjections(v.w, r.Injected, r.Since)
	return nil
}

type jsonDenialsView struct{ w io.Writer }

func (v jsonDenialsView) Denials(r denialsReport) error {
	return writeDenialsJSON(v.w, r.Denials, r.Injected, r.Since)
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
	// Refusal is why the gateway refused it, as a code (egress.Refusal*);
	// left out for a refusal logged by a gateway older than the code.
	Refusal string `json:"refusal,omitempty"`
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
		doc.Denials = append(doc.Denials, denialJSON{d.Agent, d.Destination, d.Count, d.Last.UTC(), d.Reason, d.Outcome, d.Serial, d.Rule, d.Refusal})
	}
	for _, in := range injected {
		doc.Injected = append(doc.Injected, injectionJSON{in.Agent, in.Destination, in.Count, in.Last.UTC(), in.Reason})
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(doc)
}
