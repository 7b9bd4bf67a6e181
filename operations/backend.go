package operations

import (
	"fmt"
	"os"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/bottlefile/bottlefile/lang"
	"github.com/bottlefile/bottlefile/state"
)

// PGConnStrEnv gives the pg backend's connection string when its block
// has no conn_str; without it, the PG* environment (PGHOST, PGDATABASE,
// PGUSER, PGPASSWORD...) does, as for psql.
const PGConnStrEnv = "BOTTLEFILE_PG_CONN_STR"

// stateBackend is where the state of cfg is kept: nil for the file in the
// directory, or the PostgreSQL database its backend block names.
func stateBackend(cfg *lang.Config, scope *lang.Scope) (*state.PG, hcl.Diagnostics) {
	if cfg == nil || cfg.Backend == nil {
		return nil, nil
	}
	conn, diags := scope.EvalBackendConnStr(cfg.Backend)
	if diags.HasErrors() {
		return nil, diags
	}
	if conn == "" {
		conn = os.Getenv(PGConnStrEnv)
	}
	return &state.PG{ConnStr: conn, Name: cfg.Backend.Name}, diags
}

// backendOf reads the backend of the configuration in dir for a command
// that works on the state alone: only the backend block and the
// variables it refers to are read, their values from the environment
// (BOTTLEFILE_VAR_NAME) or defaults.
func backendOf(dir string) (*state.PG, hcl.Diagnostics) {
	p := lang.NewParser()
	cfg, diags := p.LoadBackend(dir)
	if diags.HasErrors() || cfg.Backend == nil {
		return nil, diags
	}
	vals, moreDiags := p.VariableValues(cfg, lang.VarInputs{Env: environment()})
	diags = append(diags, moreDiags...)
	if diags.HasErrors() {
		return nil, diags
	}
	scope, moreDiags := cfg.NewPartialScope(vals)
	diags = append(diags, moreDiags...)
	if diags.HasErrors() {
		return nil, diags
	}
	pg, moreDiags := stateBackend(cfg, scope)
	return pg, append(diags, moreDiags...)
}

// openState opens the state of dir where its configuration keeps it.
func openState(dir string, opts state.Options) (*state.Store, hcl.Diagnostics) {
	pg, diags := backendOf(dir)
	if diags.HasErrors() {
		return nil, diags
	}
	opts.PG = pg
	s, err := state.Open(dir, opts)
	if err != nil {
		return nil, append(diags, errorDiag("Cannot open state", err.Error()))
	}
	return s, diags
}

// StatePush writes st (what state pull printed, perhaps edited) as the
// whole state of dir, where its configuration keeps it. It refuses a
// state of another lineage, and one older than the state it replaces.
func StatePush(dir string, st *State, lockTimeout time.Duration) hcl.Diagnostics {
	s, diags := openState(dir, state.Options{LockTimeout: lockTimeout})
	if diags.HasErrors() {
		return diags
	}
	defer s.Close()
	if err := s.Replace(st.Lineage, st.Serial, st.Records, nil); err != nil {
		return append(diags, errorDiag("Cannot push the state", err.Error()))
	}
	return diags
}

// Backend names for StateMigrate.
const (
	BackendFile = "file"
	BackendPG   = lang.BackendPG
)

// Migration says what StateMigrate copied.
type Migration struct {
	From, To string // where, as messages name the states
	State    State  // what was copied
}

// StateMigrate copies the state of dir between the file in the directory
// and the PostgreSQL database the backend block names, to the backend
// named by to ("pg" or "file"): the same lineage, serial, records and
// intents, so the bottles keep their state. Both states stay locked while
// it copies. The destination must be empty or hold an older serial of
// the same lineage; a state of another lineage is never written over.
// The source is left as it was.
func StateMigrate(dir, to string, lockTimeout time.Duration) (Migration, hcl.Diagnostics) {
	var m Migration
	if to != BackendFile && to != BackendPG {
		return m, hcl.Diagnostics{errorDiag("Unknown backend", fmt.Sprintf("-to=%q: the backends are %q (the file .bottlefile/state.db) and %q (the database the backend \"pg\" block names)", to, BackendFile, BackendPG))}
	}
	pg, diags := backendOf(dir)
	if diags.HasErrors() {
		return m, diags
	}
	if pg == nil {
		return m, append(diags, errorDiag("No backend block", "state migrate copies the state between the file .bottlefile/state.db and the PostgreSQL database a backend \"pg\" block names; the configuration has no backend block. Add one (see the README's Backends section), then migrate."))
	}
	fromPG, toPG := pg, (*state.PG)(nil)
	if to == BackendPG {
		fromPG, toPG = nil, pg
	}
	src, err := state.Open(dir, state.Options{ReadOnly: true, LockTimeout: lockTimeout, PG: fromPG})
	if err != nil {
		return m, append(diags, errorDiag("Cannot open the state to migrate", err.Error()))
	}
	defer src.Close()
	m.From = src.Path()
	recs, err := src.Records()
	if err != nil {
		return m, append(diags, errorDiag("Cannot read the state to migrate", err.Error()))
	}
	intents, err := src.Intents()
	if err != nil {
		return m, append(diags, errorDiag("Cannot read the state to migrate", err.Error()))
	}
	m.State = State{Lineage: src.Lineage(), Serial: src.Serial(), Records: recs}
	if m.State.Lineage == "" {
		return m, append(diags, errorDiag("Nothing to migrate", fmt.Sprintf("%s holds no state (nothing was applied with it).", m.From)))
	}
	dst, err := state.Open(dir, state.Options{LockTimeout: lockTimeout, PG: toPG})
	if err != nil {
		return m, append(diags, errorDiag("Cannot open the state to migrate to", err.Error()))
	}
	defer dst.Close()
	m.To = dst.Path()
	if err := dst.Replace(m.State.Lineage, m.State.Serial, recs, intents); err != nil {
		return m, append(diags, errorDiag("Cannot migrate the state", err.Error()))
	}
	return m, diags
}

// FileStateOnly refuses a command that works on the state file itself
// (restore-backup, relocate) where the configuration keeps the state in
// PostgreSQL: it would act on a file bottlefile does not read.
func FileStateOnly(dir, command string) hcl.Diagnostics {
	pg, diags := backendOf(dir)
	if pg != nil {
		diags = append(diags, errorDiag("Not a file state", fmt.Sprintf("%s works on the state file .bottlefile/state.db; this configuration keeps its state in PostgreSQL (its backend \"pg\" block). There, the backup of each state's previous serial is the row of table bottlefile_backups, and a state belongs to no directory.", command)))
	}
	return diags
}
