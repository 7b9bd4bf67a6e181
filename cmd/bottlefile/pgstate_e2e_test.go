package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/docker/dockertest"
	"github.com/bottlefile/bottlefile/state/pgtest"
)

// pgAgent is one agent; %s is the backend block (or nothing), then the
// image and the agent's ROLE.
const pgAgent = `%s
agent "coder" {
  image   = %q
  command = ["sleep", "600"]
  env     = { ROLE = %q }
}
`

// pgRun runs the binary in dir with env, failing the test if it cannot
// be run at all.
func pgRun(t *testing.T, dir string, env []string, args ...string) result {
	t.Helper()
	r, timedOut, err := runBinary(3*time.Minute, dir, env, args...)
	if err != nil || timedOut {
		t.Fatalf("bottlefile %s: %v (timed out: %v) %s", strings.Join(args, " "), err, timedOut, r)
	}
	return r
}

func pgMustRun(t *testing.T, dir string, env []string, args ...string) result {
	t.Helper()
	r := pgRun(t, dir, env, args...)
	if r.code != 0 {
		t.Fatalf("bottlefile %s: %s", strings.Join(args, " "), r)
	}
	return r
}

// pulledLineage is the lineage of a state pull's document.
func pulledLineage(t *testing.T, doc string) string {
	t.Helper()
	var st struct {
		Lineage string `json:"lineage"`
	}
	if err := json.Unmarshal([]byte(doc), &st); err != nil || st.Lineage == "" {
		t.Fatalf("state pull printed no lineage (%v):\n%s", err, doc)
	}
	return st.Lineage
}

// TestE2EPGStateMigrateShared (issue 30): a fleet applied with the file
// state is migrated to PostgreSQL (the connection from
// BOTTLEFILE_PG_CONN_STR); state pull of the database state equals that
// of the file it came from, in the directory it came from and in
// another; the other directory's plan says "No changes." and its destroy
// removes the bottles the first one made.
func TestE2EPGStateMigrateShared(t *testing.T) {
	parallel(t)
	cli := dockertest.Client(t)
	srv := pgtest.Start(t)
	image := dockertest.BusyboxImage(t, cli)
	env := []string{"BOTTLEFILE_PG_CONN_STR=" + srv.ConnStr}
	const backend = `backend "pg" {
  name = "fleet"
}`
	a, b := t.TempDir(), t.TempDir()
	writeBottlefile(t, a, pgAgent, "", image, "team")
	pgMustRun(t, a, env, "apply", "-auto-approve")
	lineage := lineageOf(t, cli, a)
	fromFile := pgMustRun(t, a, env, "state", "pull").stdout

	writeBottlefile(t, a, pgAgent, backend, image, "team")
	writeBottlefile(t, b, pgAgent, backend, image, "team")
	// Without the connection, the state cannot be opened: nothing falls
	// back to the file.
	r := pgRun(t, b, []string{"PGHOST=/nonexistent", "BOTTLEFILE_PG_CONN_STR="}, "plan")
	if r.code == 0 || !strings.Contains(r.stderr, `opening PostgreSQL state "fleet"`) {
		t.Errorf("plan with no database to reach: %s", r)
	}
	r = pgMustRun(t, a, env, "state", "migrate", "-to=pg")
	if !strings.Contains(r.stdout, "Copied lineage "+lineage) || strings.Contains(r.stdout+r.stderr, srv.ConnStr) {
		t.Errorf("state migrate -to=pg: %s", r)
	}
	for _, dir := range []string{a, b} {
		if fromPG := pgMustRun(t, dir, env, "state", "pull").stdout; fromPG != fromFile {
			t.Errorf("state pull of the database state differs from the file's:\n--- file\n%s--- pg\n%s", fromFile, fromPG)
		}
	}
	wantNoChangesEnv(t, b, env, "the other directory, after the migration")

	// Another directory's file state, of another lineage, is refused
	// rather than written over the database's.
	c := t.TempDir()
	writeBottlefile(t, c, pgAgent, "", image, "other")
	pgMustRun(t, c, env, "apply", "-auto-approve")
	lineageOf(t, cli, c)
	writeBottlefile(t, c, pgAgent, backend, image, "other")
	if r := pgRun(t, c, env, "state", "migrate", "-to=pg"); r.code == 0 || !strings.Contains(r.stderr, "has lineage "+lineage) {
		t.Errorf("migrating another lineage over the database state: %s", r)
	}

	pgMustRun(t, b, env, "destroy", "-auto-approve")
	if left := containersWith(t, cli, drivers.LabelLineage+"="+lineage); len(left) != 0 {
		t.Errorf("destroy from the other directory left %d containers", len(left))
	}
}

// wantNoChangesEnv is wantNoChanges with environment variables.
func wantNoChangesEnv(t *testing.T, dir string, env []string, when string) {
	t.Helper()
	if r := pgMustRun(t, dir, env, "plan"); !strings.Contains(r.stdout, "No changes.") {
		t.Errorf("%s: the plan is not empty:\n%s", when, r)
	}
}

// TestE2EPGStateLock (issue 30): two directories share a database state
// (the connection from a sensitive variable). While one applies, the
// other's apply fails after its -lock-timeout naming the holder, or waits
// with a longer one and then finds nothing left to do; a holder killed
// with SIGKILL releases the lock, as its session ends.
func TestE2EPGStateLock(t *testing.T) {
	parallel(t)
	cli := dockertest.Client(t)
	srv := pgtest.Start(t)
	image := dockertest.BusyboxImage(t, cli)
	env := []string{"BOTTLEFILE_VAR_pg_conn_str=" + srv.ConnStr}
	const backend = `variable "pg_conn_str" {
  type      = string
  sensitive = true
}
backend "pg" {
  conn_str = var.pg_conn_str
}`
	a, b := t.TempDir(), t.TempDir()
	for _, dir := range []string{a, b} {
		writeBottlefile(t, dir, pgAgent, backend, image, "v1")
	}
	pgMustRun(t, a, env, "apply", "-auto-approve")
	lineage := pulledLineage(t, pgMustRun(t, b, env, "state", "pull").stdout)
	dockertest.Cleanup(t, cli, lineage)
	wantNoChangesEnv(t, b, env, "the other directory, after the first apply")

	for _, dir := range []string{a, b} {
		writeBottlefile(t, dir, pgAgent, backend, image, "v2")
	}
	held := startHeldApplyEnv(t, a, env)
	r := pgRun(t, b, env, "apply", "-auto-approve", "-lock-timeout=1s")
	out := strings.Join(strings.Fields(r.stdout+r.stderr), " ")
	for _, want := range []string{"state is locked", `PostgreSQL state "default"`, fmt.Sprintf("pid %d on host", held.cmd.Process.Pid), "writing since", "apply"} {
		if r.code == 0 || !strings.Contains(out, want) {
			t.Errorf("apply while the other directory's apply holds the lock does not say %q: %s", want, r)
		}
	}
	if strings.Contains(out, srv.ConnStr) {
		t.Errorf("the lock error shows the connection string: %s", out)
	}

	// One that waits long enough applies after the holder, with nothing
	// left to do.
	waited := make(chan result, 1)
	go func() {
		r, _, _ := runBinary(3*time.Minute, b, env, "apply", "-auto-approve", "-lock-timeout=3m")
		waited <- r
	}()
	time.Sleep(time.Second)
	select {
	case r := <-waited:
		t.Fatalf("an apply ran while the other held the lock: %s", r)
	default:
	}
	if _, err := held.stdin.Write([]byte("yes\n")); err != nil {
		t.Fatal(err)
	}
	if err := <-held.done; err != nil {
		t.Fatalf("the held apply: %v\n%s\n%s", err, held.stdout(), held.errb.String())
	}
	if r := <-waited; r.code != 0 || !strings.Contains(r.stdout, "No changes.") {
		t.Errorf("the waiting apply, after the holder applied: %s", r)
	}

	// SIGKILL the holder: its session ends, and with it the lock.
	for _, dir := range []string{a, b} {
		writeBottlefile(t, dir, pgAgent, backend, image, "v3")
	}
	held = startHeldApplyEnv(t, a, env)
	if r := pgRun(t, b, env, "plan"); r.code == 0 {
		t.Fatalf("plan ran while the apply held the lock: %s", r)
	}
	if err := held.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-held.done
	r = pgMustRun(t, b, env, "plan", "-lock-timeout=30s")
	if !strings.Contains(r.stdout, "agent.coder") {
		t.Errorf("plan after the holder was killed does not show the pending change: %s", r)
	}
	pgMustRun(t, b, env, "destroy", "-auto-approve")
	if left := containersWith(t, cli, drivers.LabelLineage+"="+lineage); len(left) != 0 {
		t.Errorf("destroy left %d containers", len(left))
	}
}
