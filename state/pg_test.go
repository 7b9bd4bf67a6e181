package state

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/bottlefile/bottlefile/state/pgtest"
)

// TestPGStateContract: a database state keeps the file's contract: a
// lineage, a serial bumped by every write, one row per object, intents
// resolved with their result, the previous serial kept as the backup; and
// two directories naming it share it.
func TestPGStateContract(t *testing.T) {
	t.Parallel()
	srv := pgtest.Start(t)
	pg := &PG{ConnStr: srv.ConnStr, Name: "team"}
	s, err := Open(t.TempDir(), Options{PG: pg})
	if err != nil {
		t.Fatal(err)
	}
	lineage, err := s.Init()
	if err != nil {
		t.Fatal(err)
	}
	if s.Serial() != 1 {
		t.Errorf("serial after Init = %d, want 1", s.Serial())
	}
	attrs := map[string]json.RawMessage{"env": json.RawMessage(`{"B":"2","A":"1"}`)}
	if err := s.PutIntent(Intent{Addr: "agent.a", Kind: "container"}); err != nil {
		t.Fatal(err)
	}
	for _, addr := range []string{"agent.a", "agent.b"} {
		if err := s.Put(Record{Addr: addr, Kind: "container", ID: "id-" + addr, Attrs: attrs}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Delete("agent.b"); err != nil {
		t.Fatal(err)
	}
	if got := s.Serial(); got != 4 {
		t.Errorf("serial after 3 writes = %d, want 4", got)
	}
	if in, err := s.Intents(); err != nil || len(in) != 0 {
		t.Errorf("intents after Put = %v, %v; want none (the result resolved it)", in, err)
	}
	s.Close()

	// Another directory, read-only: the same state.
	r, err := Open(t.TempDir(), Options{PG: pg, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	recs, err := r.Records()
	if err != nil {
		t.Fatal(err)
	}
	if r.Lineage() != lineage || len(recs) != 1 || recs[0].Addr != "agent.a" {
		t.Fatalf("other directory reads lineage %s, %+v; want %s with agent.a", r.Lineage(), recs, lineage)
	}
	// Records read back byte for byte (json, not jsonb): attributes are
	// compared as written.
	if got := string(recs[0].Attrs["env"]); got != `{"B":"2","A":"1"}` {
		t.Errorf("attribute read back as %s", got)
	}
	r.Close()

	// Opening for writing keeps serial 4 as the backup.
	w, err := Open(t.TempDir(), Options{PG: pg})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Put(Record{Addr: "agent.c"}); err != nil {
		t.Fatal(err)
	}
	w.Close()
	conn := connect(t, srv.ConnStr)
	var serial int
	var objects string
	if err := conn.QueryRow(context.Background(), `SELECT serial, objects::text FROM bottlefile_backups WHERE state = 'team'`).Scan(&serial, &objects); err != nil {
		t.Fatal(err)
	}
	if serial != 4 || !strings.Contains(objects, "agent.a") || strings.Contains(objects, "agent.c") {
		t.Errorf("backup is serial %d with %s; want serial 4 with agent.a only", serial, objects)
	}
	// Another name in the same database is another state.
	o, err := Open(t.TempDir(), Options{PG: &PG{ConnStr: srv.ConnStr, Name: "other"}, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	if recs, _ := o.Records(); o.Lineage() != "" || len(recs) != 0 {
		t.Errorf("state \"other\" reads lineage %q and %d records; want none", o.Lineage(), len(recs))
	}
}

// TestPGLockNamesHolder: while one command holds the advisory lock for
// writing, another is refused after its -lock-timeout, naming the holder;
// one that waits long enough gets the lock once the holder closes.
func TestPGLockNamesHolder(t *testing.T) {
	t.Parallel()
	srv := pgtest.Start(t)
	pg := &PG{ConnStr: srv.ConnStr}
	holder, err := Open(t.TempDir(), Options{PG: pg})
	if err != nil {
		t.Fatal(err)
	}
	for _, ro := range []bool{false, true} {
		start := time.Now()
		_, err := Open(t.TempDir(), Options{PG: pg, ReadOnly: ro, LockTimeout: 300 * time.Millisecond})
		if !errors.Is(err, ErrLocked) {
			t.Fatalf("read-only %v: second open: %v, want ErrLocked", ro, err)
		}
		if time.Since(start) < 300*time.Millisecond {
			t.Errorf("read-only %v: refused before the lock timeout", ro)
		}
		host, _ := os.Hostname()
		for _, want := range []string{fmt.Sprintf("pid %d on host %s, writing", os.Getpid(), host), "Held by:", `PostgreSQL state "default"`} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("read-only %v: error does not say %q:\n%v", ro, want, err)
			}
		}
	}
	// Readers share the lock.
	holder.Close()
	r1, err := Open(t.TempDir(), Options{PG: pg, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	r2, err := Open(t.TempDir(), Options{PG: pg, ReadOnly: true})
	if err != nil {
		t.Fatalf("a second reader: %v", err)
	}
	r1.Close()
	go func() {
		time.Sleep(300 * time.Millisecond)
		r2.Close()
	}()
	w, err := Open(t.TempDir(), Options{PG: pg, LockTimeout: 20 * time.Second})
	if err != nil {
		t.Fatalf("a writer waiting for the readers: %v", err)
	}
	w.Close()
}

// TestPGLockEndsWithSession: a holder whose session ends (a killed
// process's connection closes) holds nothing; its lock record is shown
// as left by a process that is gone, and the next holder removes it.
func TestPGLockEndsWithSession(t *testing.T) {
	t.Parallel()
	srv := pgtest.Start(t)
	pg := &PG{ConnStr: srv.ConnStr}
	holder, err := Open(t.TempDir(), Options{PG: pg})
	if err != nil {
		t.Fatal(err)
	}
	// End the holder's session from outside, as a crash does.
	conn := connect(t, srv.ConnStr)
	var session int
	if err := conn.QueryRow(context.Background(), `SELECT session FROM bottlefile_locks`).Scan(&session); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(context.Background(), `SELECT pg_terminate_backend($1)`, session); err != nil {
		t.Fatal(err)
	}
	w, err := Open(t.TempDir(), Options{PG: pg, LockTimeout: 5 * time.Second})
	if err != nil {
		t.Fatalf("after the holder's session ended: %v", err)
	}
	var n int
	conn.QueryRow(context.Background(), `SELECT count(*) FROM bottlefile_locks WHERE session = $1`, session).Scan(&n)
	if n != 0 {
		t.Errorf("the gone holder's lock record is still there")
	}
	w.Close()
	holder.Close()
}

// TestPGBadConnStr: a connection string that is not one, or a server
// that is not there, is a clear error, not a file state in its place.
func TestPGBadConnStr(t *testing.T) {
	t.Parallel()
	_, err := Open(t.TempDir(), Options{PG: &PG{ConnStr: "host=/nonexistent port=1 user=u password=hunter2 connect_timeout=2"}})
	if err == nil || !strings.Contains(err.Error(), `opening PostgreSQL state "default"`) || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("unreachable server: %v", err)
	}
	_, err = Open(t.TempDir(), Options{PG: &PG{ConnStr: "postgres://u:hunter2@host:notaport/db"}})
	if err == nil || !strings.Contains(err.Error(), "connection string is not valid") || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("bad connection string: %v", err)
	}
}

func connect(t *testing.T, connStr string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), connStr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// TestPGReadWriteRole: once the tables exist, a role that may only read
// and write them (no CREATE, not a superuser) uses the state and its lock,
// and a waiter still names the holder.
func TestPGReadWriteRole(t *testing.T) {
	t.Parallel()
	srv := pgtest.Start(t)
	first, err := Open(t.TempDir(), Options{PG: &PG{ConnStr: srv.ConnStr}, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	first.Close()
	conn := connect(t, srv.ConnStr)
	for _, q := range []string{
		`CREATE ROLE fleet LOGIN`,
		`GRANT SELECT, INSERT, UPDATE, DELETE ON bottlefile_states, bottlefile_objects, bottlefile_intents, bottlefile_backups, bottlefile_locks TO fleet`,
	} {
		if _, err := conn.Exec(context.Background(), q); err != nil {
			t.Fatal(err)
		}
	}
	pg := &PG{ConnStr: strings.Replace(srv.ConnStr, "user=postgres", "user=fleet", 1)}
	s, err := Open(t.TempDir(), Options{PG: pg})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Init(); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(Record{Addr: "agent.a"}); err != nil {
		t.Fatal(err)
	}
	_, err = Open(t.TempDir(), Options{PG: pg, LockTimeout: 200 * time.Millisecond})
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), fmt.Sprintf("pid %d on host", os.Getpid())) || strings.Contains(err.Error(), "Not holders") {
		t.Errorf("a second writer as the same role: %v", err)
	}
}
