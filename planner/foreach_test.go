package planner_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/bottlefile/bottlefile/planner"
)

// writeFixture makes testdata/foreach/NAME the bench's Bottlefile.
func (b *bench) writeFixture(name string) {
	b.t.Helper()
	src, err := os.ReadFile(filepath.Join("testdata", "foreach", name))
	if err != nil {
		b.t.Fatal(err)
	}
	b.write(string(src))
}

// TestForEachKeys: for_each over three names makes three bottles; adding
// a key plans one bottle more and nothing else; removing a key plans
// exactly that bottle's removal, its snapshots kept as for any removed
// agent whose policy includes "destroy".
func TestForEachKeys(t *testing.T) {
	b := newBench(t)
	b.writeFixture("three.bf")
	p := b.apply(planner.Options{})
	if s := p.Summary(); s.Add != 6 {
		t.Errorf("three names add %d objects, want 6 (3 agents, 3 networks):\n%s", s.Add, p)
	}
	for _, k := range []string{"a", "b", "c"} {
		addr := `agent.coder["` + k + `"]`
		if _, ok := b.records()[addr]; !ok {
			t.Errorf("no record of %s: %v", addr, b.live())
		}
		if _, ok := b.records()[addr+".network"]; !ok {
			t.Errorf("no record of %s.network", addr)
		}
	}
	if p := b.plan(planner.Options{}); p.Applyable() {
		t.Errorf("a second plan has changes:\n%s", p)
	}

	b.writeFixture("four.bf")
	p = b.plan(planner.Options{})
	want := "+ agent.coder[\"d\"]\n+ agent.coder[\"d\"].network"
	if got := pending(p); got != want {
		t.Errorf("adding a key plans:\n%s\nwant:\n%s", got, want)
	}

	b.writeFixture("two.bf")
	p = b.apply(planner.Options{})
	var changed []string
	for _, c := range p.Changes {
		if c.Action != planner.NoOp {
			changed = append(changed, c.Action.String()+" "+c.Addr)
		}
	}
	wantChanged := []string{`delete agent.coder["b"]`, `delete agent.coder["b"].network`, `create agent.coder["b"].snapshot.1`}
	slices.Sort(changed)
	slices.Sort(wantChanged)
	if !slices.Equal(changed, wantChanged) {
		t.Errorf("removing a key changes %q, want %q:\n%s", changed, wantChanged, p)
	}
	if text := p.String(); !strings.Contains(text, `agent.coder["b"] is no longer an instance of agent.coder, and`) || strings.Contains(text, "block was removed") {
		t.Errorf("the removal does not say the key left agent.coder:\n%s", text)
	}
	if len(p.Kept) != 1 || p.Kept[0].Addr != `agent.coder["b"].snapshot.1` {
		t.Errorf("kept = %v, want the removed instance's snapshot", p.Kept)
	}
	if p := b.plan(planner.Options{}); p.Applyable() {
		t.Errorf("the plan after the removal has changes:\n%s", p)
	}
}

// TestForEachTarget: -target takes an instance address, and the block's
// address takes all its instances.
func TestForEachTarget(t *testing.T) {
	b := newBench(t)
	b.writeFixture("three.bf")
	p := b.plan(planner.Options{Targets: []string{`agent.coder["b"]`}})
	if got, want := pending(p), "+ agent.coder[\"b\"]\n+ agent.coder[\"b\"].network"; got != want {
		t.Errorf("-target agent.coder[\"b\"] plans:\n%s\nwant:\n%s", got, want)
	}
}

// TestForEachAdopt: a moved block from agent.coder to agent.coder["a"]
// adopts a single agent into the for_each: it keeps its objects, and only
// the new key is created.
func TestForEachAdopt(t *testing.T) {
	b := newBench(t)
	b.writeFixture("single.bf")
	b.apply(planner.Options{})
	b.writeFixture("adopted.bf")
	p := b.apply(planner.Options{})
	for _, c := range p.Changes {
		if c.Action == planner.Delete || c.Action == planner.Replace || (c.Action == planner.Create && c.Addr == `agent.coder["a"]`) {
			t.Errorf("adoption %s %s:\n%s", c.Action, c.Addr, p)
		}
	}
	recs := b.records()
	if _, ok := recs[`agent.coder["a"]`]; !ok {
		t.Errorf("no record at agent.coder[\"a\"]: %v", slices.Sorted(mapsKeys(recs)))
	}
	if _, ok := recs["agent.coder"]; ok {
		t.Errorf("agent.coder is still recorded")
	}
	if p := b.plan(planner.Options{}); p.Applyable() {
		t.Errorf("a plan after adoption has changes:\n%s", p)
	}
}

func mapsKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// TestCountTargetBlock: count makes numbered instances, and -target of the
// block's address takes them all.
func TestCountTargetBlock(t *testing.T) {
	b := newBench(t)
	b.write(`
agent "worker" {
  count   = 2
  image   = "busybox:1"
  command = ["sleep", "600"]
}

agent "other" {
  image   = "busybox:1"
  command = ["sleep", "600"]
}
`)
	p := b.plan(planner.Options{Targets: []string{"agent.worker"}})
	want := "+ agent.worker[0]\n+ agent.worker[0].network\n+ agent.worker[1]\n+ agent.worker[1].network"
	if got := pending(p); got != want {
		t.Errorf("-target agent.worker plans:\n%s\nwant:\n%s", got, want)
	}
}
