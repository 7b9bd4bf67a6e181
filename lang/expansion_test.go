package lang

import (
	"slices"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
)

// TestExpandInstances: NewScope replaces blocks with for_each or count by
// their instances, each with its key, each.value and count.index in its
// expressions, sidecars that belong to it, and references to the block
// that depend on every instance.
func TestExpandInstances(t *testing.T) {
	p := NewParser()
	cfg, diags := p.LoadDir("testdata/valid/for-each")
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	s, diags := cfg.NewScope(nil)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	want := []string{`coder["backend"]`, `coder["frontend"]`, `pair["a"]`, `pair["b"]`, `pair["c"]`, "worker[0]", "worker[1]"}
	if got := cfg.AgentNames(); !slices.Equal(got, want) {
		t.Fatalf("agents = %q, want %q", got, want)
	}
	fe := cfg.Agents[`coder["frontend"]`]
	if fe.Addr() != `agent.coder["frontend"]` || fe.BlockName() != "coder" || fe.Sidecars[0].Addr() != `agent.coder["frontend"].sidecar.git` {
		t.Errorf("instance = %s (block %s), sidecar %s", fe.Addr(), fe.BlockName(), fe.Sidecars[0].Addr())
	}
	v, diags := s.EvalAgent(fe)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	if mem := v.Workload.GetAttr("memory"); !mem.RawEquals(cty.NumberIntVal(512 << 20)) {
		t.Errorf("memory = %#v, want each.value.memory", mem)
	}
	if env := v.Workload.GetAttr("env").Index(cty.StringVal("TEAM")); env.AsString() != "frontend" {
		t.Errorf("env.TEAM = %#v", env)
	}
	if env := v.Sidecars[0].Workload.GetAttr("env").Index(cty.StringVal("FOR")); env.AsString() != "frontend" {
		t.Errorf("sidecar env.FOR = %#v", env)
	}
	w, diags := s.EvalAgent(cfg.Agents["worker[1]"])
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	if got := w.Workload.GetAttr("env").Index(cty.StringVal("INDEX")).AsString(); got != "1" {
		t.Errorf("count.index = %q", got)
	}
	if got := cfg.Agents[`pair["b"]`].References(); !slices.Contains(got, `agent.coder["frontend"]`) || !slices.Contains(got, `agent.coder["backend"]`) || slices.Contains(got, "agent.coder") {
		t.Errorf("pair's references = %q; want every coder instance", got)
	}
	if got := cfg.SnapshotNames(); !slices.Equal(got, []string{"first", `nightly["backend"]`, `nightly["frontend"]`}) {
		t.Errorf("snapshots = %q", got)
	}
	if sn := cfg.Snapshots[`nightly["backend"]`]; sn.AgentName != `coder["backend"]` || sn.Addr() != `snapshot.nightly["backend"]` {
		t.Errorf("nightly[backend] snapshots %q", sn.AgentName)
	}
	if sn := cfg.Snapshots["first"]; sn.AgentName != "worker[0]" {
		t.Errorf("first snapshots %q", sn.AgentName)
	}
	// Another scope expands again from the blocks: one key fewer, one
	// instance fewer.
	_, diags = cfg.NewScope(map[string]cty.Value{"team": cty.MapVal(map[string]cty.Value{
		"backend": cty.ObjectVal(map[string]cty.Value{"memory": cty.StringVal("1GiB")}),
	})})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	if got := cfg.AgentNames(); slices.Contains(got, `coder["frontend"]`) || !slices.Contains(got, `coder["backend"]`) {
		t.Errorf("after removing a key: %q", got)
	}
}

// TestExpandErrors: keys that are unknown when planning, or that a
// variable's value makes invalid, are errors at the for_each line.
func TestExpandErrors(t *testing.T) {
	dir := "testdata/foreach-scope/unknown"
	p := NewParser()
	cfg, diags := p.LoadDir(dir)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	_, diags = cfg.NewScope(map[string]cty.Value{"names": cty.SetVal([]cty.Value{cty.StringVal("ok"), cty.StringVal("not/ok")})})
	want := expectedDiags(t, dir)
	var got []expectedDiag
	for _, d := range diags {
		if d.Severity == hcl.DiagError && d.Subject != nil {
			got = append(got, expectedDiag{File: "Bottlefile", Line: d.Subject.Start.Line, Summary: d.Summary})
		}
	}
	sortExpected(got)
	if !slices.Equal(got, want) {
		t.Errorf("errors = %v, want %v\n%v", got, want, diags)
	}
}
