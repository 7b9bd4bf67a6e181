package lang

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
)

// FuzzLoad feeds arbitrary bytes to the parser and decoder, as a Bottlefile
// or, when the input starts with '{', as a .bottle.json file, then
// evaluates and renders whatever it got. Nothing may panic.
func FuzzLoad(f *testing.F) {
	for _, pattern := range []string{"testdata/valid/*/*", "testdata/invalid/*/*", "testdata/golden/*/*"} {
		paths, _ := filepath.Glob(pattern)
		for _, path := range paths {
			if strings.HasSuffix(path, ".golden") || strings.HasSuffix(path, ".txt") {
				continue
			}
			if src, err := os.ReadFile(path); err == nil {
				f.Add(src)
			}
		}
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		name := "proj/Bottlefile"
		if bytes.HasPrefix(bytes.TrimSpace(src), []byte("{")) {
			name = "proj/main.bottle.json"
		}
		fsys := fstest.MapFS{
			name:              {Data: src},
			"proj/file.txt":   {Data: []byte("text\n")},
			"proj/tmpl.tftpl": {Data: []byte("${x}")},
		}
		p := NewParserFS(fsys)
		cfg, diags := p.LoadDir("proj")
		renderAll(t, p, diags)
		if diags.HasErrors() {
			return
		}
		vals := map[string]cty.Value{}
		for name, v := range cfg.Variables {
			if v.Required() {
				vals[name] = cty.UnknownVal(v.Type)
			}
		}
		s, diags := cfg.NewScope(vals)
		renderAll(t, p, diags)
		for _, name := range cfg.AgentNames() {
			_, diags := s.EvalAgent(cfg.Agents[name])
			renderAll(t, p, diags)
			s.SetAgent(name, cty.ObjectVal(map[string]cty.Value{"id": cty.StringVal("id-" + name)}))
			_ = cfg.Agents[name].References()
		}
		for _, name := range cfg.SnapshotNames() {
			_, diags := s.EvalSnapshot(cfg.Snapshots[name])
			renderAll(t, p, diags)
		}
		for _, name := range cfg.OutputNames() {
			_, diags := s.EvalOutput(cfg.Outputs[name])
			renderAll(t, p, diags)
		}
		_ = Format(src)
	})
}

func renderAll(t *testing.T, p *Parser, diags hcl.Diagnostics) {
	t.Helper()
	var buf bytes.Buffer
	if err := WriteDiagnostics(&buf, p.Files(), diags, 78, true); err != nil {
		t.Fatal(err)
	}
	if _, err := DiagnosticsJSON(p.Files(), diags); err != nil {
		t.Fatal(err)
	}
}
