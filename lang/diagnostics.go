package lang

import (
	"bytes"
	"encoding/json"
	"io"

	"github.com/hashicorp/hcl/v2"
)

// WriteDiagnostics renders diagnostics for people: severity, summary, the
// file and line, the source with the range underlined, and the detail,
// wrapped at width columns (0 for no wrapping), in color if asked. files
// are the parser's (Parser.Files). Values of sensitive variables are never
// shown.
func WriteDiagnostics(w io.Writer, files map[string]*hcl.File, diags hcl.Diagnostics, width uint, color bool) error {
	return hcl.NewDiagnosticTextWriter(w, files, width, color).WriteDiagnostics(diags)
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
