package state

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

func TestLifecycle(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if s.Lineage() != "" || s.Serial() != 0 {
		t.Fatalf("fresh state: lineage %q serial %d", s.Lineage(), s.Serial())
	}
	lineage, err := s.Init()
	if err != nil {
		t.Fatal(err)
	}
	again, err := s.Init()
	if err != nil || again != lineage {
		t.Fatalf("Init is not stable: %q then %q (%v)", lineage, again, err)
	}
	serial := s.Serial()
	if err := s.Put(Record{Addr: "agent.b", Kind: "container", ID: "c1", Hash: "h1"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(Record{Addr: "agent.a.network", Kind: "network", ID: "n1"}); err != nil {
		t.Fatal(err)
	}
	if s.Serial() != serial+2 {
		t.Errorf("serial: want %d, got %d", serial+2, s.Serial())
	}
	recs, err := s.Records()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 || recs[0].Addr != "agent.a.network" || recs[1].Addr != "agent.b" {
		t.Fatalf("records not sorted by address: %+v", recs)
	}
	created := recs[1].CreatedAt
	if err := s.Put(Record{Addr: "agent.b", Kind: "container", ID: "c2", Hash: "h2"}); err != nil {
		t.Fatal(err)
	}
	r, ok, err := s.Get("agent.b")
	if err != nil || !ok || r.ID != "c2" || !r.CreatedAt.Equal(created) {
		t.Fatalf("rewrite: %+v ok=%v err=%v (created %v)", r, ok, err, created)
	}
	if err := s.Delete("agent.b"); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := s.Get("agent.b"); ok {
		t.Fatal("deleted record still there")
	}
	s.Close()

	// Everything survives a reopen.
	s, err = Open(dir, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Lineage() != lineage || s.Serial() != serial+4 {
		t.Errorf("after reopen: lineage %q serial %d", s.Lineage(), s.Serial())
	}
	if err := s.Put(Record{Addr: "x"}); err == nil {
		t.Error("a read-only state accepted a write")
	}
}

func TestReadOnlyDoesNotCreate(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if recs, err := s.Records(); err != nil || len(recs) != 0 {
		t.Fatalf("empty state: %v %v", recs, err)
	}
	if _, err := os.Stat(filepath.Join(dir, Dir)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a read-only open created %s", Dir)
	}
}

func TestLockedFailsAtOnce(t *testing.T) {
	dir := t.TempDir()
	held, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	for _, opts := range []Options{{}, {ReadOnly: true}, {LockTimeout: 100 * time.Millisecond}} {
		_, err := Open(dir, opts)
		if !errors.Is(err, ErrLocked) {
			t.Fatalf("%+v: want ErrLocked, got %v", opts, err)
		}
		if !strings.Contains(err.Error(), Path(dir)) {
			t.Errorf("the lock error does not name the file: %v", err)
		}
	}
}

func TestBadDatabases(t *testing.T) {
	tests := []struct {
		name string
		prep func(db *bolt.DB) error
		want string
	}{
		{"newer format", func(db *bolt.DB) error {
			return db.Update(func(tx *bolt.Tx) error {
				b, _ := tx.CreateBucketIfNotExists(bucketMeta)
				return b.Put(keyVersion, []byte("99"))
			})
		}, "format version"},
		{"corrupt record", func(db *bolt.DB) error {
			return db.Update(func(tx *bolt.Tx) error {
				b, _ := tx.CreateBucketIfNotExists(bucketObjects)
				return b.Put([]byte("agent.x"), []byte("{not json"))
			})
		}, `record "agent.x" is not valid`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.MkdirAll(filepath.Join(dir, Dir), 0o755); err != nil {
				t.Fatal(err)
			}
			db, err := bolt.Open(Path(dir), 0o600, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := tt.prep(db); err != nil {
				t.Fatal(err)
			}
			db.Close()
			s, err := Open(dir, Options{})
			if err == nil {
				_, err = s.Records()
				s.Close()
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("want an error containing %q, got %v", tt.want, err)
			}
		})
	}
	// A file that is not a bbolt database at all.
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, Dir), 0o755)
	os.WriteFile(Path(dir), []byte("not a database"), 0o600)
	if _, err := Open(dir, Options{}); !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), "not a bottlefile state") {
		t.Fatalf("garbage state: want a clear error, got %v", err)
	}
}
