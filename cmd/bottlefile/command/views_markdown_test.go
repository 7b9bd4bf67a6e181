package command

import (
	"bytes"
	"fmt"
	"html"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	east "github.com/yuin/goldmark/extension/ast"
	"github.com/yuin/goldmark/text"
	"github.com/zclconf/go-cty/cty"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/drivertest"
)

// TestPlanMarkdownGolden renders plans as Markdown for a pull request:
// saved with plan -out, shown with show -markdown, compared with
// testdata/plans-markdown/NAME/plan.md, and printed the same by plan
// -markdown. "review" has a replace that discards work, a removed agent
// whose work and snapshots go, an allowlist and a ceiling widened and a
// credential rotated; its token is a sensitive variable that must appear
// nowhere. Each golden is parsed as GitHub-flavoured Markdown
// (checkMarkdown).
func TestPlanMarkdownGolden(t *testing.T) {
	cases := []struct {
		name  string
		drift func(w *workspace, f *drivertest.Fake, l string)
		// review are the rows the "Review first" table must hold, by
		// their first two cells.
		review []string
	}{
		{name: "review", drift: func(w *workspace, f *drivertest.Fake, l string) {
			// Two snapshots of the tester, taken before replacements,
			// then more work in both agents.
			dir := filepath.Join("testdata", "plans-markdown", "review")
			w.writeFixture(filepath.Join(dir, "before.hcl"))
			for i := range 2 {
				f.WriteFile(l, "agent.tester", fmt.Sprintf("/workspace/%d.txt", i))
				w.must("apply", "-auto-approve", "-replace=agent.tester")
			}
			f.WriteFile(l, "agent.tester", "/workspace/last.txt")
			f.WriteFile(l, "agent.coder", "/workspace/notes.md")
			w.writeFixture(filepath.Join(dir, "after.hcl"))
		}, review: []string{
			"data loss|agent.coder", "data loss|agent.tester", "data loss|agent.tester.snapshot.1", "data loss|agent.tester.snapshot.2",
			"egress widened|agent.coder.gateway", "egress widened|agent.coder.gateway", "credential changed|agent.coder.gateway",
		}},
		{name: "replace-discards", drift: func(_ *workspace, f *drivertest.Fake, l string) {
			f.WriteFile(l, "agent.coder", "/workspace/notes.md")
		}, review: []string{"data loss|agent.coder"}},
		{name: "empty"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join("testdata", "plans-markdown", tc.name)
			w := newWorkspace(t)
			fixedClock(w)
			withGateways(w.fake)
			w.writeFixture(filepath.Join(dir, "before.hcl"))
			w.must("apply", "-auto-approve")
			w.writeFixture(filepath.Join(dir, "after.hcl"))
			if tc.drift != nil {
				tc.drift(w, w.fake, w.lineage())
			}
			planFile := filepath.Join(w.dir, "saved.plan")
			w.must("plan", "-out="+planFile)
			md := w.must("show", "-markdown", planFile)
			golden(t, filepath.Join(dir, "plan.md"), w.normalize(md))
			if direct := w.must("plan", "-markdown"); direct != md {
				t.Errorf("plan -markdown differs from show -markdown of the saved plan:\n%s\n---\n%s", direct, md)
			}
			if strings.Contains(md, "s3cr3t") {
				t.Errorf("a sensitive value reached the Markdown plan:\n%s", md)
			}
			rows := checkMarkdown(t, []byte(md))
			var got []string
			for _, r := range rows {
				got = append(got, strings.Trim(r[0], "*")+"|"+r[1])
			}
			if strings.Join(got, "\n") != strings.Join(tc.review, "\n") {
				t.Errorf("review rows:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.review, "\n"))
			}
		})
	}
}

// withGateways has the fake plan, for an agent with an egress block, a
// gateway object as the docker driver does: its "allow" rules and
// "credentials" change in place, its "ceiling" is the agent's effective
// one; so that plans show what a real driver's do.
func withGateways(f *drivertest.Fake) {
	decl := drivertest.FakeDeclaration()
	decl.Capabilities.Egress.Credentials = true
	f.DeclareResponse = &decl
	f.PlanFn = func(req drivers.PlanRequest) (drivers.PlanResponse, error) {
		resp, err := drivertest.Expand(req.Agent)
		if err != nil {
			return resp, err
		}
		allow := drivers.WorkloadAttr(req.Agent.Workload, "egress")
		creds := drivers.WorkloadAttr(req.Agent.Workload, "credentials")
		if allow.IsNull() && creds.IsNull() {
			return resp, nil
		}
		if allow.IsNull() {
			allow = cty.ListValEmpty(cty.String)
		}
		gw := drivers.Object{
			Addr: req.Agent.Addr + ".gateway", Kind: "gateway",
			Attrs:   map[string]cty.Value{"allow": allow},
			InPlace: []string{"allow", "credentials"},
		}
		if !creds.IsNull() {
			gw.Attrs["credentials"] = creds
		}
		if c := req.Agent.EgressCeiling; c != nil {
			vals := []cty.Value{}
			for _, r := range c {
				vals = append(vals, cty.StringVal(r))
			}
			gw.Attrs["ceiling"] = cty.ListVal(vals)
			gw.InPlace = append(gw.InPlace, "ceiling")
		}
		resp.Objects = append(resp.Objects, gw)
		return resp, nil
	}
}

// checkMarkdown parses md as GitHub-flavoured Markdown (goldmark with its
// GFM extension) and fails unless every table parsed as one with each row
// holding the header's cell count, every <details> is closed, and every
// fenced block is closed and a diff. It returns the rows of the tables,
// their cells as plain text.
func checkMarkdown(t *testing.T, md []byte) [][]string {
	t.Helper()
	doc := goldmark.New(goldmark.WithExtensions(extension.GFM)).Parser().Parse(text.NewReader(md))
	var rows [][]string
	var opened, closed, fences int
	ast.Walk(doc, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		switch n := n.(type) {
		case *east.Table:
			want := -1
			for r := n.FirstChild(); r != nil; r = r.NextSibling() {
				cells := 0
				var texts []string
				for c := r.FirstChild(); c != nil; c = c.NextSibling() {
					cells++
					texts = append(texts, cellText(c, md))
				}
				if want < 0 {
					want = cells
					continue
				}
				if cells != want {
					t.Errorf("table row has %d cells, the header %d: %q", cells, want, texts)
				}
				rows = append(rows, texts)
			}
			if want != 3 {
				t.Errorf("the review table has %d columns, want 3", want)
			}
		case *ast.FencedCodeBlock:
			fences++
			if lang := string(n.Language(md)); lang != "diff" {
				t.Errorf("a fenced block is %q, want diff", lang)
			}
		case *ast.HTMLBlock, *ast.RawHTML:
			var b bytes.Buffer
			if h, ok := n.(*ast.HTMLBlock); ok {
				for i := 0; i < h.Lines().Len(); i++ {
					s := h.Lines().At(i)
					b.Write(s.Value(md))
				}
				if h.HasClosure() {
					b.Write(h.ClosureLine.Value(md))
				}
			} else {
				r := n.(*ast.RawHTML)
				for i := 0; i < r.Segments.Len(); i++ {
					s := r.Segments.At(i)
					b.Write(s.Value(md))
				}
			}
			opened += strings.Count(b.String(), "<details>")
			closed += strings.Count(b.String(), "</details>")
		}
		return ast.WalkContinue, nil
	})
	if opened != closed {
		t.Errorf("%d <details> opened, %d closed", opened, closed)
	}
	if want := strings.Count(string(md), "```diff"); fences != want {
		t.Errorf("%d fenced blocks parsed, %d opened", fences, want)
	}
	return rows
}

// cellText is a table cell's text as a reader sees it: rendered to HTML
// by goldmark (escapes resolved, code spans' text), tags stripped.
func cellText(n ast.Node, src []byte) string {
	var b bytes.Buffer
	r := goldmark.New(goldmark.WithExtensions(extension.GFM)).Renderer()
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		if err := r.Render(&b, src, c); err != nil {
			return "render error: " + err.Error()
		}
	}
	return html.UnescapeString(regexp.MustCompile(`<[^>]*>`).ReplaceAllString(b.String(), ""))
}

// TestMarkdownEscapes: text and code put in a table cell stay in it, a
// pipe or a backtick in a value included.
func TestMarkdownEscapes(t *testing.T) {
	values := []string{"a|b", "sh -c 'sleep 1 | cat'", "x`y", "`", "*bold* _it_ <b>", "# heading", "- item", "line\nbreak"}
	var md strings.Builder
	md.WriteString("| | Address | What |\n| --- | --- | --- |\n")
	for _, v := range values {
		md.WriteString("| k | " + mdCode(v) + " | " + mdText(v) + " |\n")
	}
	rows := checkMarkdown(t, []byte(md.String()))
	if len(rows) != len(values) {
		t.Fatalf("%d rows parsed, want %d:\n%s", len(rows), len(values), md.String())
	}
	for i, v := range values {
		want := strings.Join(strings.Fields(v), " ")
		if rows[i][1] != want {
			t.Errorf("code cell of %q reads %q", v, rows[i][1])
		}
		if rows[i][2] != want {
			t.Errorf("text cell of %q reads %q", v, rows[i][2])
		}
	}
}

// TestMarkdownFlags: -markdown takes no -json beside it, and show
// -markdown needs the plan file.
func TestMarkdownFlags(t *testing.T) {
	w := newWorkspace(t)
	w.write("agent \"coder\" {\n  image = \"busybox:1\"\n}\n")
	for _, tc := range []struct {
		cmd  string
		args []string
		want string
	}{
		{"plan", []string{"-json", "-markdown"}, "-json and -markdown cannot be used together"},
		{"show", []string{"-json", "-markdown", "x.plan"}, "-json and -markdown cannot be used together"},
		{"show", []string{"-markdown"}, "-markdown shows a saved plan: give the PLANFILE"},
	} {
		code, out, errs := w.run(tc.cmd, tc.args...)
		if code != 1 || !strings.Contains(errs, tc.want) {
			t.Errorf("%s %v: exit %d, stdout %q, stderr %q; want exit 1 and %q", tc.cmd, tc.args, code, out, errs, tc.want)
		}
	}
}
