package command

import (
	"encoding/json"
	"fmt"
	"html"
	"io"
	"slices"
	"strings"

	"github.com/bottlefile/bottlefile/operations"
	"github.com/bottlefile/bottlefile/planner"
)

// renderPlanMarkdown writes a plan as GitHub-flavoured Markdown for a pull
// request comment: the Plan: line, then, called out first in one table,
// what a reviewer must not miss (work discarded and snapshots deleted,
// egress widened, credentials and other sensitive values changed), then
// every change in a collapsible block with its attribute diff. It reads the
// same structured plan as the human and JSON views; values are the plan's
// own, already redacted, so no sensitive value can appear.
func renderPlanMarkdown(w io.Writer, p *planner.Plan) {
	fmt.Fprint(w, "## bottlefile plan\n\n")
	if len(p.Options.Targets) > 0 {
		fmt.Fprintf(w, "> **Note:** `-target` is in effect: this plan covers only %s and what they depend on.\n\n", codeList(p.Options.Targets))
	}
	if p.Options.NoRefresh {
		fmt.Fprint(w, "> **Note:** `-refresh=false`: the runtimes were not asked what is live; drift is not shown.\n\n")
	}
	if !p.Applyable() {
		fmt.Fprint(w, "**No changes.** Your bottles match the configuration.\n")
		renderKeptMarkdown(w, p.Kept)
		return
	}
	fmt.Fprintf(w, "**%s**\n", mdText(p.Summary().String()))

	if rows := reviewRows(p); len(rows) > 0 {
		fmt.Fprint(w, "\n### Review first\n\n")
		fmt.Fprint(w, "| | Address | What |\n| --- | --- | --- |\n")
		for _, r := range rows {
			fmt.Fprintf(w, "| %s | %s | %s |\n", r.kind, mdCode(r.addr), r.what)
		}
	}

	fmt.Fprint(w, "\n### Changes\n")
	for c, move := range shownChanges(p) {
		if move {
			fmt.Fprintf(w, "\n- %s\n", mdText(c.MoveLine()))
			continue
		}
		renderChangeMarkdown(w, c)
	}
	renderKeptMarkdown(w, p.Kept)
}

// renderChangeMarkdown is one change: a <details> block whose summary is
// the human plan's headline, holding the reasons and the attribute diff.
func renderChangeMarkdown(w io.Writer, c *planner.Change) {
	fmt.Fprintf(w, "\n<details><summary><code>%s</code> <code>%s</code> (%s)%s %s</summary>\n\n",
		html.EscapeString(strings.TrimSpace(symbol(c))), html.EscapeString(c.Addr), html.EscapeString(c.Kind),
		html.EscapeString(onNode(c)), html.EscapeString(headline(c)))
	var body []string
	for _, r := range c.Reasons {
		body = append(body, "# (because "+r.Text()+")")
	}
	for _, r := range c.WhatIf {
		body = append(body, "# (what-if: "+r+")")
	}
	for _, l := range changeLines(c) {
		body = append(body, diffLines(l)...)
	}
	if len(body) > 0 {
		fence := fenceFor(strings.Join(body, "\n"))
		fmt.Fprintf(w, "%sdiff\n%s\n%s\n\n", fence, strings.Join(body, "\n"), fence)
	}
	fmt.Fprint(w, "</details>\n")
}

// diffLines is an attribute row in diff form: "+"/"-" in the first column,
// so GitHub colours it; a changed value is its old line and its new one.
func diffLines(l attrLine) []string {
	switch {
	case l.name == "" && l.value == "]":
		return []string{"  ]"}
	case l.name == "":
		return []string{l.sym + "   " + l.value + ","}
	case l.value == "":
		return []string{"! " + l.name + l.note}
	case l.sym == "~" && l.old == "" && l.new == "":
		// An allowlist's opening: its rules follow, one a line.
		return []string{"  " + l.name + " = " + l.value}
	case l.sym == "~":
		return []string{"- " + l.name + " = " + l.old, "+ " + l.name + " = " + l.new + l.note}
	}
	return []string{l.sym + " " + l.name + " = " + l.value + l.note}
}

// reviewRow is one line of the "Review first" table; what is Markdown,
// escaped for a table cell.
type reviewRow struct {
	kind, addr, what string
}

const (
	reviewDataLoss   = "**data loss**"
	reviewEgress     = "**egress widened**"
	reviewCredential = "**credential changed**"
)

// reviewRows are what a reviewer must see first, in plan order by kind:
// data loss, then egress widenings, then credential changes.
func reviewRows(p *planner.Plan) []reviewRow {
	var loss, egress, creds []reviewRow
	for _, c := range p.Changes {
		if c.Action == planner.NoOp || c.MoveOnly() {
			continue
		}
		for _, r := range c.Reasons {
			if r.DiscardsWork() {
				loss = append(loss, reviewRow{reviewDataLoss, c.Addr, mdText(r.Text())})
			}
		}
		if c.Kind == operations.KindSnapshot && (c.Action == planner.Delete || c.Action == planner.Replace) {
			what := "snapshot deleted"
			if len(c.Reasons) > 0 {
				what += ": " + mdText(c.Reasons[0].Text())
			}
			loss = append(loss, reviewRow{reviewDataLoss, c.Addr, what})
		}
		egress = append(egress, egressWidenings(c)...)
		creds = append(creds, sensitiveChanges(c)...)
	}
	return slices.Concat(loss, egress, creds)
}

// egressRuleAttrs are the attributes that hold egress rules a gateway lets
// through: an agent's allowlist, and its effective ceiling.
var egressRuleAttrs = []string{"allow", "ceiling"}

// egressWidenings are the rules a change lets through that were not let
// through before: rules added to an allowlist (all of a new one's), and a
// ceiling that gained rules or was lifted.
func egressWidenings(c *planner.Change) []reviewRow {
	if c.Action == planner.Delete || c.Action == planner.Forget {
		return nil
	}
	var rows []reviewRow
	for _, name := range egressRuleAttrs {
		after, ok := c.After[name]
		if !ok {
			continue
		}
		created := c.Action == planner.Create || c.Action == planner.Adopt
		if !created && !slices.Contains(c.Changed, name) {
			continue
		}
		var before []string
		if !created {
			before, _ = jsonStrings(c.Before[name])
		}
		if isNull(after) {
			if name == "ceiling" && !created && !isNull(c.Before[name]) {
				rows = append(rows, reviewRow{reviewEgress, c.Addr, "`ceiling` removed: the agent's rules are no longer bounded"})
			}
			continue
		}
		rules, ok := jsonStrings(after)
		if !ok {
			continue
		}
		var added []string
		for _, r := range rules {
			if !slices.Contains(before, r) {
				added = append(added, r)
			}
		}
		if len(added) > 0 {
			rows = append(rows, reviewRow{reviewEgress, c.Addr, fmt.Sprintf("%s adds %s", mdCode(name), codeList(added))})
		}
	}
	return rows
}

// sensitiveChanges are a change's credential changes, and every other
// attribute whose change is a sensitive value: it is said to have
// changed, and its value is never read (the plan holds it redacted).
func sensitiveChanges(c *planner.Change) []reviewRow {
	if c.Action != planner.Update && c.Action != planner.Replace && c.Action != planner.Migrate {
		return nil
	}
	var rows []reviewRow
	for _, name := range c.Changed {
		rotated := attrValue(name, c.Before[name]) == attrValue(name, c.After[name])
		switch {
		case name == "credentials" && rotated:
			rows = append(rows, reviewRow{reviewCredential, c.Addr, "`credentials`: a credential's value changed (rotated; the value is not shown)"})
		case name == "credentials":
			rows = append(rows, reviewRow{reviewCredential, c.Addr, "`credentials` changed: a credential added, removed or pointed elsewhere (see the diff)"})
		case rotated:
			rows = append(rows, reviewRow{reviewCredential, c.Addr, fmt.Sprintf("%s: a sensitive value changed (not shown)", mdCode(name))})
		}
	}
	return rows
}

// renderKeptMarkdown lists the snapshots a destroy or a removed agent
// block keeps.
func renderKeptMarkdown(w io.Writer, kept []planner.KeptSnapshot) {
	if len(kept) == 0 {
		return
	}
	fmt.Fprint(w, "\n### Snapshots kept\n\n")
	for _, k := range kept {
		fmt.Fprintf(w, "- %s\n", mdText(keptLine(k)))
	}
}

func jsonStrings(raw json.RawMessage) ([]string, bool) {
	var s []string
	if isNull(raw) || json.Unmarshal(raw, &s) != nil {
		return nil, false
	}
	return s, true
}

// mdText escapes the characters Markdown would read as inline markup, the
// pipe of a table cell among them, and a first character that would start
// a block; and keeps the text on one line.
func mdText(s string) string {
	var b strings.Builder
	for i, r := range strings.Join(strings.Fields(s), " ") {
		if strings.ContainsRune("\\`*_[]<>|~&", r) || (i == 0 && strings.ContainsRune("#-+=>", r)) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// mdCode is s as an inline code span on one line, safe in a table cell: a
// backtick run in s gets a longer delimiter, and a pipe is escaped (GFM
// reads a table's cells before the code spans in them).
func mdCode(s string) string {
	s = strings.ReplaceAll(strings.Join(strings.Fields(s), " "), "|", `\|`)
	delim := "`"
	for strings.Contains(s, delim) {
		delim += "`"
	}
	if strings.HasPrefix(s, "`") || strings.HasSuffix(s, "`") {
		s = " " + s + " "
	}
	return delim + s + delim
}

func codeList(items []string) string {
	out := make([]string, len(items))
	for i, s := range items {
		out[i] = mdCode(s)
	}
	return strings.Join(out, ", ")
}

// fenceFor is a code fence longer than any backtick run in body.
func fenceFor(body string) string {
	fence := "```"
	for strings.Contains(body, fence) {
		fence += "`"
	}
	return fence
}
