package operations

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/zclconf/go-cty/cty"

	"github.com/bottlefile/bottlefile/lang"
	"github.com/bottlefile/bottlefile/state"
	"github.com/bottlefile/bottlefile/state/pgtest"
)

// fileState writes a file state with the given records in dir and
// returns its lineage.
func fileState(t *testing.T, dir string, addrs ...string) string {
	t.Helper()
	s, err := state.Open(dir, state.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	lineage, err := s.Init()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if err := s.Put(state.Record{Addr: a, Kind: "container", ID: "id-" + a}); err != nil {
			t.Fatal(err)
		}
	}
	return lineage
}

func writeBottlefile(t *testing.T, dir, src string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "Bottlefile"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestStateMigrate: a file state migrated to the database reads back the
// same (lineage, serial, records) from any directory naming it; a file
// state of another lineage is refused rather than written over it; an
// older push is refused; and the database state migrates back to a file.
func TestStateMigrate(t *testing.T) {
	srv := pgtest.Start(t)
	t.Setenv("BOTTLEFILE_VAR_pg", srv.ConnStr)
	const withBackend = `
variable "pg" {
  type      = string
  sensitive = true
}
backend "pg" {
  conn_str = var.pg
  name     = "fleet"
}
`
	a := t.TempDir()
	fileState(t, a, "agent.a", "agent.b")
	before, diags := StatePull(a)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	writeBottlefile(t, a, withBackend)
	if _, diags := StateMigrate(a, "pg", 0); diags.HasErrors() {
		t.Fatal(diags)
	}
	b := t.TempDir()
	writeBottlefile(t, b, withBackend)
	after, diags := StatePull(b)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	if diff := cmp.Diff(before, after); diff != "" {
		t.Errorf("the migrated state differs (-file +pg):\n%s", diff)
	}
	// Idempotent: the same serial again.
	if _, diags := StateMigrate(a, "pg", 0); diags.HasErrors() {
		t.Errorf("migrating the same state again: %v", diags)
	}

	// Another lineage is refused; the database state stays.
	c := t.TempDir()
	fileState(t, c, "agent.other")
	writeBottlefile(t, c, withBackend)
	_, diags = StateMigrate(c, "pg", 0)
	if !diags.HasErrors() || !strings.Contains(diags.Error(), "has lineage "+before.Lineage+", not ") {
		t.Errorf("migrating another lineage over it: %v", diags)
	}
	if now, _ := StatePull(b); now.Lineage != before.Lineage || len(now.Records) != 2 {
		t.Errorf("after the refused migration the database holds %+v", now)
	}

	// An older serial is refused.
	old := *before
	old.Serial--
	if diags := StatePush(b, &old, 0); !diags.HasErrors() || !strings.Contains(diags.Error(), "newer than serial") {
		t.Errorf("pushing an older serial: %v", diags)
	}
	// A newer one, with a record less, is written.
	newer := *before
	newer.Serial++
	newer.Records = newer.Records[:1]
	if diags := StatePush(b, &newer, 0); diags.HasErrors() {
		t.Fatal(diags)
	}
	if now, _ := StatePull(a); now.Serial != newer.Serial || len(now.Records) != 1 {
		t.Errorf("after push the database holds serial %d with %d records", now.Serial, len(now.Records))
	}

	// Back to a file, in a directory that had none.
	if _, diags := StateMigrate(b, "file", 0); diags.HasErrors() {
		t.Fatal(diags)
	}
	os.Remove(filepath.Join(b, "Bottlefile"))
	if back, _ := StatePull(b); back.Lineage != before.Lineage || back.Serial != newer.Serial || len(back.Records) != 1 {
		t.Errorf("migrated back to a file: %+v", back)
	}
	// Without a backend block there is nothing to migrate between.
	if _, diags := StateMigrate(b, "pg", 0); !diags.HasErrors() || !strings.Contains(diags.Error(), "has no backend block") {
		t.Errorf("migrating without a backend block: %v", diags)
	}
}

// A saved plan keeps no value of a variable the backend's conn_str refers
// to, sensitive or not.
func TestSaveValuesLeavesConnStrOut(t *testing.T) {
	dir := t.TempDir()
	writeBottlefile(t, dir, `
variable "pg" {
  type = string
}
variable "role" {
  type = string
}
backend "pg" {
  conn_str = var.pg
}
`)
	p := lang.NewParser()
	cfg, diags := p.LoadDir(dir)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	saved := saveValues(cfg, map[string]cty.Value{"pg": cty.StringVal("host=db password=hunter2"), "role": cty.StringVal("x")})
	if _, ok := saved["pg"]; ok || saved["role"] == nil {
		t.Errorf("saved values: %v; want role only", saved)
	}
}
