package command

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/hashicorp/hcl/v2"

	"github.com/bottlefile/bottlefile/lang"
)

// FmtCommand rewrites Bottlefiles in the canonical format.
type FmtCommand struct {
	Meta *Meta
}

func (c *FmtCommand) Synopsis() string { return "Rewrite Bottlefiles in the canonical format" }

func (c *FmtCommand) Help() string {
	return strings.TrimSpace(`
Usage: bottlefile [global options] fmt [options] [PATH]

  Rewrites the Bottlefile and *.bottle.hcl files in PATH (a directory,
  default the working one, or one file) in the canonical format and lists
  the files it changed. JSON files are left alone.

Options:

  -check       Change nothing; exit 3 if any file is not formatted.
  -diff        Show the changes as a unified diff.
  -no-color    Print without color.
  -recursive   Also format the files in subdirectories.
`)
}

// exitNotFormatted is fmt -check's exit code for unformatted files, as
// Terraform users expect.
const exitNotFormatted = 3

func (c *FmtCommand) Run(args []string) int {
	m := c.Meta
	fs := newFlagSet("fmt")
	m.noColorFlag(fs)
	check := fs.Bool("check", false, "")
	diff := fs.Bool("diff", false, "")
	recursive := fs.Bool("recursive", false, "")
	if m.showDiags(nil, finishParse(fs, args, 1)) {
		return 1
	}
	target := m.loadDir()
	if fs.NArg() == 1 {
		target = fs.Arg(0)
		if m.Dir != "" && !filepath.IsAbs(target) {
			target = filepath.Join(m.Dir, target)
		}
	}
	files, err := formatTargets(target, *recursive)
	if err != nil {
		return m.fail("Cannot find the files to format", err)
	}
	var diags hcl.Diagnostics
	// The sources read, so that a syntax error shows its snippet.
	sources := map[string]*hcl.File{}
	unformatted := 0
	for _, path := range files {
		src, err := os.ReadFile(path)
		if err != nil {
			return m.fail("Cannot read a file", err)
		}
		out, moreDiags := lang.FormatFile(src, path)
		diags = append(diags, moreDiags...)
		sources[path] = &hcl.File{Bytes: src}
		if moreDiags.HasErrors() || bytes.Equal(src, out) {
			continue
		}
		unformatted++
		fmt.Fprintln(m.Stdout, path)
		if *diff {
			fmt.Fprint(m.Stdout, unifiedDiff(path, string(src), string(out)))
		}
		if !*check {
			if err := os.WriteFile(path, out, 0o644); err != nil {
				return m.fail("Cannot write a file", err)
			}
		}
	}
	if m.showDiags(sources, diags) {
		return 1
	}
	if *check && unformatted > 0 {
		return exitNotFormatted
	}
	return 0
}

// formatTargets lists the native-syntax configuration files at path.
func formatTargets(path string, recursive bool) ([]string, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !info.IsDir() {
		return []string{path}, nil
	}
	var out []string
	err = filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != path && (!recursive || strings.HasPrefix(d.Name(), ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if d.Name() == lang.Bottlefile || strings.HasSuffix(d.Name(), lang.HCLFileSuffix) {
			out = append(out, p)
		}
		return nil
	})
	return out, err
}

// unifiedDiff is a small line diff (longest common subsequence) in unified
// form with three lines of context, enough for fmt -diff.
func unifiedDiff(name, a, b string) string {
	split := func(s string) []string {
		lines := strings.SplitAfter(s, "\n")
		if len(lines) > 0 && lines[len(lines)-1] == "" {
			lines = lines[:len(lines)-1]
		}
		return lines
	}
	x, y := split(a), split(b)
	n, m := len(x), len(y)
	lcs := make([][]int, n+1)
	for i := range lcs {
		lcs[i] = make([]int, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if x[i] == y[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	type line struct {
		op   byte
		text string
	}
	var lines []line
	for i, j := 0, 0; i < n || j < m; {
		switch {
		case i < n && j < m && x[i] == y[j]:
			lines = append(lines, line{' ', x[i]})
			i, j = i+1, j+1
		case i < n && (j == m || lcs[i+1][j] >= lcs[i][j+1]):
			lines = append(lines, line{'-', x[i]})
			i++
		default:
			lines = append(lines, line{'+', y[j]})
			j++
		}
	}
	var out strings.Builder
	fmt.Fprintf(&out, "--- old/%s\n+++ new/%s\n", name, name)
	const context = 3
	for start := 0; start < len(lines); {
		if lines[start].op == ' ' {
			start++
			continue
		}
		lo := max(0, start-context)
		hi := start
		for k := start; k < len(lines); k++ {
			if lines[k].op != ' ' {
				hi = k
			} else if k-hi > 2*context {
				break
			}
		}
		hi = min(len(lines)-1, hi+context)
		oldStart, newStart, oldLen, newLen := 1, 1, 0, 0
		for _, l := range lines[:lo] {
			if l.op != '+' {
				oldStart++
			}
			if l.op != '-' {
				newStart++
			}
		}
		for _, l := range lines[lo : hi+1] {
			if l.op != '+' {
				oldLen++
			}
			if l.op != '-' {
				newLen++
			}
		}
		fmt.Fprintf(&out, "@@ -%d,%d +%d,%d @@\n", oldStart, oldLen, newStart, newLen)
		for _, l := range lines[lo : hi+1] {
			text := l.text
			if !strings.HasSuffix(text, "\n") {
				text += "\n"
			}
			out.WriteByte(l.op)
			out.WriteString(text)
		}
		start = hi + 1
	}
	return out.String()
}
