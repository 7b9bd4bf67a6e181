package command

import (
	"encoding/json"
	"fmt"
	"io"
	"iter"
	"maps"
	"slices"
	"strings"

	"github.com/bottlefile/bottlefile/operations"
	"github.com/bottlefile/bottlefile/planner"
	"github.com/bottlefile/bottlefile/units"
)

// renderPlan writes the human plan: every change with its symbol, the
// attributes that change (marking those that force replacement), a reason
// line for every action not driven by the configuration, and the closing
// Plan: line, or "No changes.". With color, symbols are colored as
// Terraform colors them and reasons are dimmed.
func renderPlan(w io.Writer, p *planner.Plan, color bool) {
	paint := palette(color)
	if len(p.Options.Targets) > 0 {
		fmt.Fprintf(w, "Note: -target is in effect: this plan covers only %s and what they depend on.\nThe rest of the configuration may still differ; use -target only to recover from mistakes.\n\n", strings.Join(p.Options.Targets, ", "))
	}
	if p.Options.NoRefresh {
		fmt.Fprint(w, "Note: -refresh=false: the runtimes were not asked what is live; drift is not shown.\n\n")
	}
	if !p.Applyable() {
		fmt.Fprintln(w, "No changes. Your bottles match the configuration.")
		renderKept(w, p.Kept, p.Options.Destroy)
		renderDue(w, p.Due, now(), p.Options.Tick)
		return
	}
	fmt.Fprintln(w, "bottlefile will perform the following actions:")
	for c, move := range shownChanges(p) {
		if move {
			fmt.Fprintf(w, "\n  # %s\n", paint.bold(c.MoveLine()))
			continue
		}
		fmt.Fprintf(w, "\n  # %s%s %s\n", paint.bold(c.Addr), onNode(c), headline(c))
		for _, r := range c.Reasons {
			fmt.Fprintf(w, "  %s\n", paint.dim("# (because "+r.Text()+")"))
		}
		for _, r := range c.WhatIf {
			fmt.Fprintf(w, "  %s\n", paint.dim("# (what-if: "+r+")"))
		}
		renderChange(w, c, paint)
	}
	renderKept(w, p.Kept, p.Options.Destroy)
	renderDue(w, p.Due, now(), p.Options.Tick)
	fmt.Fprintf(w, "\n%s\n", paint.bold(p.Summary().String()))
}

// shownChanges are the changes a view shows, in plan order: no no-ops,
// and a move only once per agent (what it owns moves with it), with move
// true.
func shownChanges(p *planner.Plan) iter.Seq2[*planner.Change, bool] {
	return func(yield func(*planner.Change, bool) bool) {
		for _, c := range p.Changes {
			if c.Action == planner.NoOp {
				continue
			}
			if c.MoveOnly() {
				if a, ok := operations.AgentOf(c.Addr); ok && a == c.Addr && !yield(c, true) {
					return
				}
				continue
			}
			if !yield(c, false) {
				return
			}
		}
	}
}

// renderKept lists the snapshots a destroy (or the removal of an agent's
// block) keeps, one line each, with how to remove them.
func renderKept(w io.Writer, kept []planner.KeptSnapshot, destroy bool) {
	if len(kept) == 0 {
		return
	}
	fmt.Fprintln(w)
	for _, k := range kept {
		fmt.Fprintf(w, "  # kept: %s\n", keptLine(k))
	}
	if destroy {
		fmt.Fprintln(w, "  # (snapshot_policy.before includes \"destroy\": the next apply resumes from them; destroy -include-snapshots removes them)")
		return
	}
	fmt.Fprintln(w, "  # (the agent's block is removed, and the snapshot_policy it was applied with includes \"destroy\": an agent block of that name resumes from them; snapshot rm or destroy -include-snapshots removes them)")
}

// keptLine describes a kept snapshot: "agent.coder.snapshot.3, 120.0 MiB,
// taken 2026-11-23 09:14 UTC".
func keptLine(k planner.KeptSnapshot) string {
	if k.Created.IsZero() && k.Size < 0 {
		return k.Addr + ", taken by this plan"
	}
	line := k.Addr
	if k.Size >= 0 {
		line += ", " + units.FormatBytes(k.Size)
	}
	if !k.Created.IsZero() {
		line += ", taken " + k.Created.UTC().Format("2006-01-02 15:04 UTC")
	}
	return line
}

// symbol marks a change in the human plan; taking a snapshot is "@".
func symbol(c *planner.Change) string { return c.Symbol() }

// onNode says where a live workload runs, on a runtime of several
// machines: " (on node2)"; "" otherwise.
func onNode(c *planner.Change) string {
	if c.Live == nil || c.Live.Node == "" {
		return ""
	}
	return " (on " + c.Live.Node + ")"
}

func headline(c *planner.Change) string { return c.Headline() }

// attrLine is one attribute row of a change. A "~" row with a value also
// has its two sides in old and new, for views that show them apart.
type attrLine struct {
	sym, name, value, note string
	old, new               string
}

func renderChange(w io.Writer, c *planner.Change, paint palette) {
	lines := changeLines(c)
	fmt.Fprintf(w, "%s %s (%s)", paint.symbol(fmt.Sprintf("%3s", symbol(c))), c.Addr, c.Kind)
	if len(lines) == 0 {
		fmt.Fprintln(w)
		return
	}
	fmt.Fprintln(w, " {")
	width := 0
	for _, l := range lines {
		width = max(width, len(l.name))
	}
	for _, l := range lines {
		switch {
		case l.name == "" && l.value == "]":
			fmt.Fprintf(w, "        %*s]\n", width+3, "")
		case l.name == "":
			fmt.Fprintf(w, "        %*s%s %s,\n", width+3, "", paint.symbol(l.sym), l.value)
		case l.value == "":
			fmt.Fprintf(w, "      %s %s%s\n", paint.symbol(l.sym), l.name, paint.note(l.note))
		default:
			fmt.Fprintf(w, "      %s %-*s = %s%s\n", paint.symbol(l.sym), width, l.name, l.value, paint.note(l.note))
		}
	}
	fmt.Fprintln(w, "    }")
}

// changeLines are the attribute rows of a change, as every view shows
// them: what is added, removed, kept, and changed (an allowlist rule by
// rule), with the attributes that force replacement noted.
func changeLines(c *planner.Change) []attrLine {
	var lines []attrLine
	switch c.Shows() {
	case planner.ShowsAfter:
		for _, name := range sortedNames(c.After) {
			if isNull(c.After[name]) {
				continue
			}
			lines = append(lines, attrLine{sym: "+", name: name, value: attrValue(name, c.After[name])})
		}
	case planner.ShowsBefore:
		for _, name := range sortedNames(c.Before) {
			if isNull(c.Before[name]) {
				continue
			}
			lines = append(lines, attrLine{sym: "-", name: name, value: attrValue(name, c.Before[name])})
		}
	case planner.ShowsDiff:
		for _, name := range sortedNames(c.After) {
			before, after := c.Before[name], c.After[name]
			if !slices.Contains(c.Changed, name) {
				if !isNull(after) {
					lines = append(lines, attrLine{sym: " ", name: name, value: attrValue(name, after)})
				}
				continue
			}
			note := ""
			if slices.Contains(c.Forcing, name) {
				note = " # forces replacement"
			}
			if rows, ok := listDiff(before, after); ok && name == "allow" {
				// An allowlist is a set: it shows rule by rule,
				// "+ github.com:443".
				lines = append(lines, attrLine{sym: "~", name: name, value: "[" + note})
				lines = append(lines, rows...)
				lines = append(lines, attrLine{sym: " ", name: "", value: "]"})
				continue
			}
			b, a := attrValue(name, before), attrValue(name, after)
			if b == a {
				// Both sides read the same: what changed is a
				// sensitive value, shown as (sensitive value) on both.
				if note != "" {
					note = " # a sensitive value changed: forces replacement"
				} else {
					a += " # a sensitive value changed"
				}
			}
			lines = append(lines, attrLine{sym: "~", name: name, value: b + " -> " + a, note: note, old: b, new: a})
		}
		if len(c.Forcing) > 0 && !slices.ContainsFunc(lines, func(l attrLine) bool { return l.note != "" }) {
			for _, f := range c.Forcing {
				if _, ok := c.After[f]; !ok {
					lines = append(lines, attrLine{sym: "~", name: f, note: " # forces replacement"})
				}
			}
		}
	}
	return lines
}

// sizeAttrs are the attributes that hold a size in bytes: the plan shows
// them in binary units ("512 MiB"); the JSON plan and the state keep bytes.
var sizeAttrs = map[string]bool{"memory": true}

// attrValue is an attribute's value as the human plan shows it.
func attrValue(name string, raw json.RawMessage) string {
	if sizeAttrs[name] {
		var n int64
		if err := json.Unmarshal(raw, &n); err == nil && n >= 0 {
			return units.FormatSize(n)
		}
	}
	return planner.FormatJSON(raw)
}

func isNull(raw json.RawMessage) bool { return len(raw) == 0 || string(raw) == "null" }

func sortedNames[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}

// listDiff renders a change of a set of strings element by element:
// removed ones with "-", added ones with "+", kept ones plain.
func listDiff(before, after json.RawMessage) ([]attrLine, bool) {
	var b, a []string
	if json.Unmarshal(before, &b) != nil || json.Unmarshal(after, &a) != nil || b == nil || a == nil {
		return nil, false
	}
	var rows []attrLine
	for _, x := range b {
		if !slices.Contains(a, x) {
			rows = append(rows, attrLine{sym: "-", name: "", value: planner.Quote(x)})
		}
	}
	for _, x := range a {
		sym := " "
		if !slices.Contains(b, x) {
			sym = "+"
		}
		rows = append(rows, attrLine{sym: sym, value: planner.Quote(x)})
	}
	return rows, true
}
