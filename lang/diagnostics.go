package lang

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
)

// WriteDiagnostics renders diagnostics for people, in the layout of hcl's
// diagnostic text writer (hcl.NewDiagnosticTextWriter), plus a caret line
// under the range, which hcl's writer marks only with color:
//
//	Error: Invalid memory size
//
//	  on Bottlefile line 8, in agent "coder":
//	   8:   memory = "4 GB please"
//	                 ^^^^^^^^^^^^^
//
//	"4 GB please" has an unknown unit ...
//
// files are the parser's (Parser.Files); the detail is wrapped at width
// columns (0 for no wrapping); color adds ANSI colors. The values of the
// variables an expression uses are shown, except sensitive ones.
func WriteDiagnostics(w io.Writer, files map[string]*hcl.File, diags hcl.Diagnostics, width uint, color bool) error {
	bw := bufio.NewWriter(w)
	for _, d := range diags {
		writeDiagnostic(bw, files, d, width, color)
	}
	return bw.Flush()
}

const (
	ansiReset     = "\x1b[0m"
	ansiBold      = "\x1b[1m"
	ansiRed       = "\x1b[1;31m"
	ansiYellow    = "\x1b[1;33m"
	ansiUnderline = "\x1b[4m"
)

func writeDiagnostic(w *bufio.Writer, files map[string]*hcl.File, d *hcl.Diagnostic, width uint, color bool) {
	label, ansi := "Error", ansiRed
	if d.Severity == hcl.DiagWarning {
		label, ansi = "Warning", ansiYellow
	}
	if color {
		fmt.Fprintf(w, "%s%s: %s%s%s%s\n\n", ansi, label, ansiReset, ansiBold, d.Summary, ansiReset)
	} else {
		fmt.Fprintf(w, "%s: %s\n\n", label, d.Summary)
	}

	if d.Subject != nil {
		writeSnippet(w, files[d.Subject.Filename], d, color)
		writeExprValues(w, d)
	}
	if d.Detail != "" {
		detail := d.Detail
		if width > 0 {
			detail = wrap(detail, int(width))
		}
		fmt.Fprintf(w, "%s\n\n", detail)
	}
}

// writeSnippet writes the "on FILE line N" header, the source lines of the
// subject (from the start of the context, when there is one), and a caret
// line under each line's part of the subject.
func writeSnippet(w *bufio.Writer, f *hcl.File, d *hcl.Diagnostic, color bool) {
	subj := *d.Subject
	ctxStr := ""
	if f != nil {
		if cs, ok := f.Nav.(interface{ ContextString(int) string }); ok {
			if s := cs.ContextString(subj.Start.Byte); s != "" {
				ctxStr = ", in " + s
			}
		}
	}
	fmt.Fprintf(w, "  on %s line %d%s:\n", subj.Filename, subj.Start.Line, ctxStr)
	if f == nil || subj.Start.Byte < 0 || subj.End.Byte > len(f.Bytes) || subj.Start.Byte > subj.End.Byte {
		w.WriteString("  (source code not available)\n\n")
		return
	}

	shown := subj
	if d.Context != nil && d.Context.Filename == subj.Filename && d.Context.Start.Byte <= subj.Start.Byte {
		shown = hcl.RangeOver(subj, *d.Context)
	}
	src := f.Bytes
	lineStart := bytes.LastIndexByte(src[:shown.Start.Byte], '\n') + 1
	numWidth := len(fmt.Sprint(shown.End.Line))
	for line := shown.Start.Line; lineStart <= len(src); line++ {
		lineEnd := len(src)
		if i := bytes.IndexByte(src[lineStart:], '\n'); i >= 0 {
			lineEnd = lineStart + i
		}
		text := strings.TrimRight(string(src[lineStart:lineEnd]), "\r")
		// The part of this line inside the subject, as byte offsets in text.
		hs, he := -1, -1
		if subj.Start.Byte <= lineStart+len(text) && subj.End.Byte >= lineStart {
			hs = max(subj.Start.Byte-lineStart, 0)
			he = min(subj.End.Byte-lineStart, len(text))
		}
		prefix := fmt.Sprintf("  %*d: ", numWidth+1, line)
		if color && hs >= 0 && he > hs {
			fmt.Fprintf(w, "%s%s%s%s%s%s\n", prefix, text[:hs], ansiUnderline, text[hs:he], ansiReset, text[he:])
		} else {
			fmt.Fprintf(w, "%s%s\n", prefix, text)
		}
		if hs >= 0 && !(hs == he && subj.End.Byte > subj.Start.Byte) {
			fmt.Fprintf(w, "%s%s%s\n", strings.Repeat(" ", len(prefix)), padLike(text[:hs]), strings.Repeat("^", max(1, utf8.RuneCountInString(text[hs:he]))))
		}
		if line >= shown.End.Line || lineEnd >= len(src) {
			break
		}
		lineStart = lineEnd + 1
	}
	w.WriteString("\n")
}

// padLike is blanks as wide as s, keeping its tabs so a caret lines up.
func padLike(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r == '\t' {
			b.WriteByte('\t')
		} else {
			b.WriteByte(' ')
		}
	}
	return b.String()
}

// writeExprValues writes, for an error about an expression, the values of
// the variables it uses: "with var.x as "y"". Unknown and sensitive values
// are left out.
func writeExprValues(w *bufio.Writer, d *hcl.Diagnostic) {
	if d.Expression == nil || d.EvalContext == nil {
		return
	}
	seen := map[string]bool{}
	var stmts []string
	for _, t := range d.Expression.Variables() {
		name := traversalString(t)
		if seen[name] {
			continue
		}
		v, diags := t.TraverseAbs(d.EvalContext)
		if diags.HasErrors() || !v.IsKnown() || IsSensitive(v) || v.ContainsMarked() {
			continue
		}
		seen[name] = true
		if v.IsNull() {
			stmts = append(stmts, name+" set to null")
		} else {
			stmts = append(stmts, name+" as "+valueString(v))
		}
	}
	if len(stmts) == 0 {
		return
	}
	sort.Strings(stmts)
	for i, s := range stmts {
		lead := "     "
		if i == 0 {
			lead = "with "
		}
		end := ",\n"
		if i == len(stmts)-1 {
			end = ".\n\n"
		}
		w.WriteString(lead + s + end)
	}
}

// valueString is a short rendering of a known, unmarked value.
func valueString(v cty.Value) string {
	ty := v.Type()
	switch {
	case ty == cty.String:
		return fmt.Sprintf("%q", v.AsString())
	case ty == cty.Number:
		return v.AsBigFloat().Text('f', -1)
	case ty == cty.Bool:
		if v.True() {
			return "true"
		}
		return "false"
	case ty.IsListType():
		return fmt.Sprintf("list of %s with %s", ty.ElementType().FriendlyName(), count(v.LengthInt(), "element"))
	case ty.IsSetType():
		return fmt.Sprintf("set of %s with %s", ty.ElementType().FriendlyName(), count(v.LengthInt(), "element"))
	case ty.IsMapType():
		return fmt.Sprintf("map of %s with %s", ty.ElementType().FriendlyName(), count(v.LengthInt(), "element"))
	case ty.IsTupleType():
		return fmt.Sprintf("tuple with %s", count(v.LengthInt(), "element"))
	case ty.IsObjectType():
		return fmt.Sprintf("object with %s", count(len(ty.AttributeTypes()), "attribute"))
	}
	return ty.FriendlyName()
}

// wrap breaks text into lines of at most width columns at spaces, keeping
// its own line breaks. Words longer than width stay whole.
func wrap(text string, width int) string {
	var b strings.Builder
	for i, para := range strings.Split(text, "\n") {
		if i > 0 {
			b.WriteByte('\n')
		}
		col := 0
		for j, word := range strings.Fields(para) {
			n := utf8.RuneCountInString(word)
			switch {
			case j == 0:
			case col+1+n > width:
				b.WriteByte('\n')
				col = 0
			default:
				b.WriteByte(' ')
				col++
			}
			b.WriteString(word)
			col += n
		}
	}
	return b.String()
}

// JSONDiagnostic is a diagnostic for machines: what DiagnosticsJSON writes.
type JSONDiagnostic struct {
	Severity string       `json:"severity"` // "error" or "warning"
	Summary  string       `json:"summary"`
	Detail   string       `json:"detail,omitempty"`
	Range    *JSONRange   `json:"range,omitempty"`
	Snippet  *JSONSnippet `json:"snippet,omitempty"`
}

// JSONRange is a range in a source file. Lines and columns count from 1,
// bytes from 0; End is exclusive.
type JSONRange struct {
	Filename string  `json:"filename"`
	Start    JSONPos `json:"start"`
	End      JSONPos `json:"end"`
}

// JSONPos is a position in a source file.
type JSONPos struct {
	Line   int `json:"line"`
	Column int `json:"column"`
	Byte   int `json:"byte"`
}

// JSONSnippet is the source around a diagnostic's range.
type JSONSnippet struct {
	Context   string `json:"context,omitempty"` // the enclosing block, like `agent "coder"`
	Code      string `json:"code"`              // whole lines, from StartLine through the range's last line
	StartLine int    `json:"start_line"`
	// The range within Code, as byte offsets.
	HighlightStartOffset int `json:"highlight_start_offset"`
	HighlightEndOffset   int `json:"highlight_end_offset"`
}

// JSONDiagnostics converts diagnostics to their JSON form, with snippets
// from files (Parser.Files).
func JSONDiagnostics(files map[string]*hcl.File, diags hcl.Diagnostics) []JSONDiagnostic {
	out := make([]JSONDiagnostic, 0, len(diags))
	for _, d := range diags {
		jd := JSONDiagnostic{Summary: d.Summary, Detail: d.Detail, Severity: "error"}
		if d.Severity == hcl.DiagWarning {
			jd.Severity = "warning"
		}
		if d.Subject != nil {
			r := *d.Subject
			jd.Range = &JSONRange{
				Filename: r.Filename,
				Start:    JSONPos{Line: r.Start.Line, Column: r.Start.Column, Byte: r.Start.Byte},
				End:      JSONPos{Line: r.End.Line, Column: r.End.Column, Byte: r.End.Byte},
			}
			jd.Snippet = snippet(files[r.Filename], r)
		}
		out = append(out, jd)
	}
	return out
}

// DiagnosticsJSON renders diagnostics as a JSON array of JSONDiagnostic,
// with snippets from files (Parser.Files).
func DiagnosticsJSON(files map[string]*hcl.File, diags hcl.Diagnostics) ([]byte, error) {
	return json.MarshalIndent(JSONDiagnostics(files, diags), "", "  ")
}

// snippet is the source lines of r in f, or nil when f does not hold them.
func snippet(f *hcl.File, r hcl.Range) *JSONSnippet {
	if f == nil || r.Start.Byte < 0 || r.End.Byte > len(f.Bytes) || r.Start.Byte > r.End.Byte {
		return nil
	}
	src := f.Bytes
	start := bytes.LastIndexByte(src[:r.Start.Byte], '\n') + 1
	end := len(src)
	from := r.End.Byte
	if r.End.Byte > r.Start.Byte && src[r.End.Byte-1] == '\n' {
		from = r.End.Byte - 1
	}
	if i := bytes.IndexByte(src[from:], '\n'); i >= 0 {
		end = from + i
	}
	if end < start {
		end = start
	}
	sn := &JSONSnippet{
		Code:                 string(bytes.TrimRight(src[start:end], "\r")),
		StartLine:            r.Start.Line,
		HighlightStartOffset: r.Start.Byte - start,
		HighlightEndOffset:   r.End.Byte - start,
	}
	if sn.HighlightEndOffset > len(sn.Code) {
		sn.HighlightEndOffset = len(sn.Code)
	}
	if cs, ok := f.Nav.(interface{ ContextString(int) string }); ok {
		sn.Context = cs.ContextString(r.Start.Byte)
	}
	return sn
}

// count is "1 element", "2 elements": a count with its noun, singular for one.
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
