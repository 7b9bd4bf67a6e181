package state

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/bottlefile/bottlefile/atomicfile"
)

// Dir and File name where state lives, relative to the Bottlefile's directory.
const (
	Dir  = ".bottlefile"
	File = "state.db"
)

var (
	bucketMeta    = []byte("meta")
	bucketObjects = []byte("objects")
	keyLineage    = []byte("lineage")
	keySerial     = []byte("serial")
	keyVersion    = []byte("version")
	keyDirectory  = []byte("directory")
)

// formatVersion is the layout of the database; a newer one is refused.
const formatVersion = 1

// ErrLocked is returned when another process holds the state lock.
var ErrLocked = errors.New("state is locked")

// Record is one object bottlefile created.
type Record struct {
	Addr    string `json:"address"`
	Kind    string `json:"kind"`
	Driver  string `json:"driver"`
	Runtime string `json:"runtime"`
	// Engine is the identity of the engine the runtime reached when the
	// object was recorded (drivers.EngineIdentifier); "" when unknown.
	// A runtime renamed on the same engine is then known to be the same.
	Engine    string   `json:"engine,omitempty"`
	ID        string   `json:"id"`
	Hash      string   `json:"config_hash"`
	Workload  bool     `json:"workload,omitempty"`
	DependsOn []string `json:"depends_on,omitempty"`
	// Attrs is the configuration the object was created from, sensitive
	// values already redacted, as JSON per attribute.
	Attrs map[string]json.RawMessage `json:"attributes,omitempty"`
	// AttrHashes hash each attribute's full value, so a change to a
	// sensitive value shows in the plan without the value being stored.
	AttrHashes map[string]string `json:"attribute_hashes,omitempty"`
	// Computed holds what the runtime assigned (address, subnet, image id).
	Computed       map[string]string `json:"computed,omitempty"`
	PreventDestroy bool              `json:"prevent_destroy,omitempty"`
	CreatedAt      time.Time         `json:"created_at"`
	UpdatedAt      time.Time         `json:"updated_at"`
}

// Options tune Open.
type Options struct {
	// ReadOnly opens with a shared lock and never creates the file: plan uses it.
	ReadOnly bool
	// LockTimeout is how long to wait for the lock; zero fails at once.
	LockTimeout time.Duration
	// AcceptMove opens for writing a state recorded as belonging to
	// another directory (state relocate uses it, then records this one).
	AcceptMove bool
	// PG keeps the state in a PostgreSQL database instead of the file in
	// the directory (a backend "pg" block); nil is the file.
	PG *PG
}

// Errors Open returns, wrapped with what is wrong and what to do.
var (
	// ErrDamaged: the file is empty, truncated, overwritten, or not a state.
	ErrDamaged = errors.New("state is damaged")
	// ErrRolledBack: the state is older than its own backup.
	ErrRolledBack = errors.New("state is older than its backup")
	// ErrMoved: the state records another directory as its own.
	ErrMoved = errors.New("state belongs to another directory")
)

// Store is an open state. A nil st means no state exists yet (read-only
// open of a fresh directory): it reads as empty.
type Store struct {
	path string // the file, or the PostgreSQL state named as messages name it
	dir  string
	st   storage
	// recordsDir: the state records the directory it belongs to (a file
	// does; a database state is shared by every directory naming it).
	recordsDir bool
	warnings   []string

	mu       sync.Mutex // guards writeErr
	writeErr error
}

// Path is the state file for a Bottlefile directory.
func Path(dir string) string { return filepath.Join(dir, Dir, File) }

// Open opens (or, unless read-only, creates) the state of a Bottlefile
// directory. The file is checked before bbolt maps it: an empty,
// truncated, overwritten or foreign file is an ErrDamaged error naming
// what is wrong and how to restore the backup, never a panic and never a
// fresh state in its place. Opening for writing first keeps the state as
// it is as state.db.backup.
func Open(dir string, opts Options) (*Store, error) {
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	if opts.PG != nil {
		return openPG(dir, opts)
	}
	path := Path(dir)
	s := &Store{path: path, dir: dir}
	_, statErr := os.Stat(path)
	switch {
	case errors.Is(statErr, os.ErrNotExist):
		if err := checkBackupOfMissing(path, ""); err != nil {
			return nil, err
		}
		if opts.ReadOnly {
			return s, nil
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, fmt.Errorf("creating state directory: %w", err)
		}
		if err := createFresh(path); err != nil {
			return nil, fmt.Errorf("creating state %s: %w", path, err)
		}
	case statErr != nil:
		return nil, fmt.Errorf("opening state %s: %w", path, statErr)
	}
	timeout := opts.LockTimeout
	if timeout <= 0 {
		timeout = time.Nanosecond // bbolt treats 0 as "wait forever"
	}
	// Check the file under the lock, so a write in progress is not
	// mistaken for damage; then let bbolt take the lock itself.
	start := time.Now()
	release, err := preLock(path, !opts.ReadOnly, opts.LockTimeout)
	if err != nil {
		return nil, s.openError(err)
	}
	_, err = validateFile(path)
	release()
	if err != nil {
		return nil, s.damaged(err)
	}
	timeout = max(timeout-time.Since(start), time.Nanosecond)
	db, err := safeBoltOpen(path, &bolt.Options{Timeout: timeout, ReadOnly: opts.ReadOnly})
	if err != nil {
		return nil, s.openError(err)
	}
	fst := &fileStorage{s: s, db: db}
	s.st, s.recordsDir = fst, true
	if !opts.ReadOnly {
		makePrivate(filepath.Dir(path))
		fst.lockInfo = writeLockInfo(path, true)
	} else if _, err := os.Stat(filepath.Dir(path)); err == nil {
		fst.lockInfo = writeLockInfo(path, false)
	}
	if err := s.check(db, opts); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// makePrivate takes group and other permissions away from the state
// directory and everything in it (the state, its backup, lock records,
// saved logs, the bottles' CAs, a driver's snapshots), as they were left
// by an older bottlefile or a copy: names of bottles, the commands that
// ran and the CA keys are the user's alone. Symbolic links are not
// followed. It only narrows modes, and failures are ignored: a file the
// user cannot change is no reason to refuse to work.
func makePrivate(dir string) {
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.Type()&fs.ModeSymlink != 0 {
			return nil
		}
		if info, err := d.Info(); err == nil && info.Mode().Perm()&0o077 != 0 {
			os.Chmod(p, info.Mode().Perm()&^0o077)
		}
		return nil
	})
}

// openError explains why bbolt would not open the file.
func (s *Store) openError(err error) error {
	if errors.Is(err, berrors.ErrTimeout) || errors.Is(err, errLockBusy) {
		return fmt.Errorf("%w: another bottlefile process holds the lock on %s (the bbolt file lock); wait for it to finish, or pass -lock-timeout to wait. %s", ErrLocked, s.path, describeHolders(s.path))
	}
	if errors.Is(err, ErrDamaged) {
		return fmt.Errorf("%w\n\n%s", err, restoreHint(s.path))
	}
	return fmt.Errorf("opening state %s: %w", s.path, err)
}

// damaged is the error for a file validateFile refused.
func (s *Store) damaged(err error) error {
	var p *fileProblem
	if !errors.As(err, &p) {
		return fmt.Errorf("opening state %s: %w", s.path, err)
	}
	what := ""
	if p.Foreign {
		what = " is not a bottlefile state"
	}
	return fmt.Errorf("%w: %s%s: %s. It is refused rather than taken as a new, empty state, which would lose track of every bottle it recorded.\n\n%s",
		ErrDamaged, s.path, what, p.Detail, restoreHint(s.path))
}

// createFresh makes an empty bbolt database at path all at once: bbolt
// writes its first pages in place, so a crash or a full disk while it
// does would leave a file that every later command fails (or faults) on.
// It is made beside path and linked into place only once complete.
func createFresh(path string) error {
	tmp := fmt.Sprintf("%s.new-%d", path, os.Getpid())
	os.Remove(tmp)
	db, err := bolt.Open(tmp, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		os.Remove(tmp)
		return err
	}
	if err := db.Close(); err != nil {
		os.Remove(tmp)
		return err
	}
	defer os.Remove(tmp)
	if err := os.Link(tmp, path); err != nil && !errors.Is(err, os.ErrExist) {
		// No hard links here: rename, unless another process got there first.
		if _, statErr := os.Stat(path); statErr == nil {
			return nil
		}
		if err := os.Rename(tmp, path); err != nil {
			return err
		}
	}
	atomicfile.SyncDir(filepath.Dir(path))
	return nil
}

// check refuses a database written by a newer bottlefile or not by one at
// all, one that went back behind its backup, and, for writing, one that
// belongs to another directory; for reading that is a warning. Opening for
// writing then keeps the state as it is as the backup.
func (s *Store) check(db *bolt.DB, opts Options) error {
	var lineage, recorded string
	var serial uint64
	err := safeView(db, func(tx *bolt.Tx) error {
		var foreign []string
		tx.ForEach(func(name []byte, _ *bolt.Bucket) error {
			if n := string(name); n != string(bucketMeta) && n != string(bucketObjects) && n != string(bucketIntents) {
				foreign = append(foreign, n)
			}
			return nil
		})
		if len(foreign) > 0 {
			return fmt.Errorf("%w: %s is not a bottlefile state: it is a bbolt database holding buckets %q; it is refused rather than written over", ErrDamaged, s.path, foreign)
		}
		meta := tx.Bucket(bucketMeta)
		if meta == nil {
			return nil
		}
		if v := meta.Get(keyVersion); v != nil {
			n, err := strconv.Atoi(string(v))
			if err != nil || n > formatVersion {
				return fmt.Errorf("state %s has format version %q; this bottlefile reads version %d", s.path, v, formatVersion)
			}
		}
		lineage = string(meta.Get(keyLineage))
		recorded = string(meta.Get(keyDirectory))
		serial, _ = strconv.ParseUint(string(meta.Get(keySerial)), 10, 64)
		return nil
	})
	if err != nil {
		return err
	}
	if err := checkBackupOf(s.path, lineage, serial); err != nil {
		return err
	}
	if recorded != "" && !sameDir(recorded, s.dir) {
		if opts.ReadOnly || !opts.AcceptMove {
			msg := fmt.Sprintf("The state in %s records %s as its directory, not %s: it was copied or moved here. "+
				"Its lineage names the bottles of %s, so applying here would take them over (and destroying here would delete them). "+
				"If you moved the directory, run `bottlefile state relocate` to record the new place. "+
				"If you copied it, remove %s here to start a new state, and manage those bottles from %s.",
				s.path, recorded, s.dir, recorded, filepath.Join(s.dir, Dir), recorded)
			if !opts.ReadOnly {
				return fmt.Errorf("%w: %s", ErrMoved, msg)
			}
			s.warnings = append(s.warnings, msg)
		}
	}
	if lineage != "" {
		if err := s.verify(db); err != nil {
			return err
		}
	}
	if !opts.ReadOnly && lineage != "" {
		if err := s.writeBackup(db); err != nil {
			return err
		}
	}
	return nil
}

// checkBackupOf refuses a state that is behind its backup: the same
// lineage with a lower serial (bbolt fell back to an older meta page, or
// an older copy was put in place), or no lineage at all where the backup
// records objects (an emptied or re-created state).
func checkBackupOf(path, lineage string, serial uint64) error {
	backup := path + BackupSuffix
	if _, err := os.Stat(backup); err != nil {
		return nil
	}
	sum, err := ReadSummary(backup)
	if err != nil || sum.Lineage == "" {
		return nil // a damaged backup does not stop a good state
	}
	if lineage == "" {
		return checkBackupOfMissing(path, "has no lineage")
	}
	if sum.Lineage == lineage && serial < sum.Serial {
		return fmt.Errorf("%w: %s has serial %d, but its backup %s, taken before the last write, has serial %d. "+
			"The state went back in time: bbolt fell back to its older meta page after the newest was damaged, or an older copy of the file was put in place. "+
			"It is refused, since writes made after that point are missing from it.\n\n%s",
			ErrRolledBack, path, serial, backup, sum.Serial, restoreHint(path))
	}
	return nil
}

// checkBackupOfMissing refuses to start a new state (the file is missing,
// or holds no lineage) where the backup records objects.
func checkBackupOfMissing(path, how string) error {
	if how == "" {
		how = "does not exist"
	}
	backup := path + BackupSuffix
	if _, err := os.Stat(backup); err != nil {
		return nil
	}
	sum, err := ReadSummary(backup)
	if err != nil || sum.Lineage == "" || sum.Records == 0 {
		return nil
	}
	objects := "objects"
	if sum.Records == 1 {
		objects = "object"
	}
	return fmt.Errorf("%w: %s %s, but its backup %s records %d %s (%s). "+
		"A new state would not know the bottles those records name, and they would keep running. "+
		"Restore the backup with `bottlefile state restore-backup`; or, to start over deliberately, destroy those bottles first or remove the backup",
		ErrDamaged, path, how, backup, sum.Records, objects, sum)
}

// sameDir reports whether two paths name one directory.
func sameDir(a, b string) bool {
	if a == b {
		return true
	}
	ai, aerr := os.Stat(a)
	bi, berr := os.Stat(b)
	if aerr == nil && berr == nil {
		return os.SameFile(ai, bi)
	}
	return filepath.Clean(a) == filepath.Clean(b)
}

// Warnings are what Open found worth saying but not refusing, for reading:
// a state used from a directory other than its own.
func (s *Store) Warnings() []string { return s.warnings }

// WriteErr is the first write that failed since Open, if any: a summary
// must not claim the state records everything when one did.
func (s *Store) WriteErr() error {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.writeErr
}

// Relocate records the state's directory as the one it was opened from
// (Options.AcceptMove), after the directory was moved.
func (s *Store) Relocate() (previous string, err error) {
	if s.st == nil {
		return "", errors.New("state is open read-only")
	}
	if !s.recordsDir {
		return "", fmt.Errorf("the state %s belongs to no directory: there is nothing to relocate", s.path)
	}
	previous, _ = s.meta(keyDirectory)
	err = s.st.update(func(tx txn) error { return tx.put(bucketMeta, keyDirectory, []byte(s.dir)) })
	if err != nil {
		return previous, s.failed(fmt.Errorf("writing state %s: %w", s.path, err))
	}
	return previous, nil
}

func (s *Store) failed(err error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.writeErr == nil {
		s.writeErr = err
	}
	return err
}

// Path is the state file's path, or for a database state its name there
// as messages give it.
func (s *Store) Path() string { return s.path }

// Close releases the lock.
func (s *Store) Close() error {
	if s.st == nil {
		return nil
	}
	st := s.st
	s.st = nil
	return st.close()
}

// Lineage is the state's identity, empty until Init.
func (s *Store) Lineage() string {
	v, _ := s.meta(keyLineage)
	return v
}

// Serial counts writes.
func (s *Store) Serial() uint64 {
	v, _ := s.meta(keySerial)
	n, _ := strconv.ParseUint(v, 10, 64)
	return n
}

func (s *Store) meta(key []byte) (string, error) {
	if s.st == nil {
		return "", nil
	}
	var out string
	err := s.st.view(func(tx txn) error {
		v, err := tx.get(bucketMeta, key)
		out = string(v)
		return err
	})
	return out, err
}

// Init gives the state a lineage if it has none, and returns it.
func (s *Store) Init() (string, error) {
	if s.st == nil {
		return "", errors.New("state is open read-only")
	}
	var lineage string
	err := s.st.update(func(tx txn) error {
		if err := s.recordDir(tx); err != nil {
			return err
		}
		v, err := tx.get(bucketMeta, keyLineage)
		if err != nil || len(v) > 0 {
			lineage = string(v)
			return err
		}
		lineage = uuid.NewString()
		if err := tx.put(bucketMeta, keyVersion, []byte(strconv.Itoa(formatVersion))); err != nil {
			return err
		}
		if err := tx.put(bucketMeta, keyLineage, []byte(lineage)); err != nil {
			return err
		}
		return bump(tx)
	})
	if err != nil {
		return "", s.failed(fmt.Errorf("writing state %s: %w", s.path, err))
	}
	return lineage, nil
}

// recordDir records the directory the state belongs to, if it records
// one and has none yet.
func (s *Store) recordDir(tx txn) error {
	if !s.recordsDir {
		return nil
	}
	if v, err := tx.get(bucketMeta, keyDirectory); err != nil || v != nil {
		return err
	}
	return tx.put(bucketMeta, keyDirectory, []byte(s.dir))
}

func bump(tx txn) error {
	v, err := tx.get(bucketMeta, keySerial)
	if err != nil {
		return err
	}
	n, _ := strconv.ParseUint(string(v), 10, 64)
	return tx.put(bucketMeta, keySerial, []byte(strconv.FormatUint(n+1, 10)))
}

// Records returns every record, sorted by address.
func (s *Store) Records() ([]Record, error) {
	if s.st == nil {
		return nil, nil
	}
	var out []Record
	err := s.st.view(func(tx txn) error {
		var keys, values [][]byte // valid until the transaction ends
		if err := tx.each(bucketObjects, func(k, v []byte) error {
			keys, values = append(keys, k), append(values, v)
			return nil
		}); err != nil {
			return err
		}
		out = make([]Record, len(values))
		return decodeRecords(keys, values, out)
	})
	if errors.Is(err, ErrDamaged) {
		return nil, fmt.Errorf("reading state %s: %w\n\n%s", s.path, err, restoreHint(s.path))
	}
	if err != nil {
		return nil, fmt.Errorf("reading state %s: %w", s.path, err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Addr < out[j].Addr })
	return out, nil
}

// decodeRecords decodes values into out, in as many goroutines as there
// are processors when there are many: decoding is most of reading a large
// state. The error is the first bad record's, in key order.
func decodeRecords(keys, values [][]byte, out []Record) error {
	workers := min(runtime.GOMAXPROCS(0), len(values)/1000+1)
	bad := make([]int, workers) // each worker's first bad record, or len(values)
	var wg sync.WaitGroup
	for w := range workers {
		bad[w] = len(values)
		wg.Go(func() {
			for i := w; i < len(values); i += workers {
				if json.Unmarshal(values[i], &out[i]) != nil {
					bad[w] = i
					return
				}
			}
		})
	}
	wg.Wait()
	if i := slices.Min(bad); i < len(values) {
		err := json.Unmarshal(values[i], new(Record))
		return fmt.Errorf("record %q is not valid: %w", keys[i], err)
	}
	return nil
}

// Get returns one record.
func (s *Store) Get(addr string) (Record, bool, error) {
	recs, err := s.Records()
	if err != nil {
		return Record{}, false, err
	}
	for _, r := range recs {
		if r.Addr == addr {
			return r, true, nil
		}
	}
	return Record{}, false, nil
}

// Put writes one record in its own transaction and bumps the serial.
func (s *Store) Put(r Record) error {
	return s.write(func(tx txn) error {
		now := time.Now().UTC()
		old, err := tx.get(bucketObjects, []byte(r.Addr))
		if err != nil {
			return err
		}
		if old != nil {
			var prev Record
			if json.Unmarshal(old, &prev) == nil && r.CreatedAt.IsZero() {
				r.CreatedAt = prev.CreatedAt
			}
		}
		if err := putRecord(tx, r, now); err != nil {
			return err
		}
		return resolveIntent(tx, r.Addr) // the result is recorded
	})
}

// putRecord writes r at its address, stamped now (and created now, when it
// has no creation time yet).
func putRecord(tx txn, r Record, now time.Time) error {
	if r.CreatedAt.IsZero() {
		r.CreatedAt = now
	}
	r.UpdatedAt = now
	data, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return tx.put(bucketObjects, []byte(r.Addr), data)
}

// Move writes the records moves gives, each in place of the record at its
// key, all in one transaction that bumps the serial once: a move of a
// bottle's records (a moved block, state mv) is all done, or not at all.
// A record moved to an address the state already records, other than one
// moved away in the same call, is refused, and nothing is written.
func (s *Store) Move(moves map[string]Record) error {
	return s.write(func(tx txn) error {
		now := time.Now().UTC()
		leaving := map[string]bool{}
		for from, r := range moves {
			if from != r.Addr {
				leaving[from] = true
			}
		}
		for _, from := range slices.Sorted(maps.Keys(moves)) {
			r := moves[from]
			old, err := tx.get(bucketObjects, []byte(from))
			if err != nil {
				return err
			}
			if old == nil {
				return fmt.Errorf("moving %s: the state records nothing there", from)
			}
			there, err := tx.get(bucketObjects, []byte(r.Addr))
			if err != nil {
				return err
			}
			if from != r.Addr && there != nil && !leaving[r.Addr] {
				return fmt.Errorf("moving %s to %s: the state already records %s", from, r.Addr, r.Addr)
			}
		}
		for _, from := range slices.Sorted(maps.Keys(moves)) {
			if err := tx.del(bucketObjects, []byte(from)); err != nil {
				return err
			}
		}
		for _, from := range slices.Sorted(maps.Keys(moves)) {
			if err := putRecord(tx, moves[from], now); err != nil {
				return err
			}
		}
		return nil
	})
}

// Delete removes one record in its own transaction and bumps the serial.
func (s *Store) Delete(addr string) error {
	return s.write(func(tx txn) error {
		if err := tx.del(bucketObjects, []byte(addr)); err != nil {
			return err
		}
		return resolveIntent(tx, addr)
	})
}

func (s *Store) write(fn func(tx txn) error) error {
	if s.st == nil {
		return errors.New("state is open read-only")
	}
	err := s.st.update(func(tx txn) error {
		if v, err := tx.get(bucketMeta, keyLineage); err != nil || len(v) == 0 {
			if err != nil {
				return err
			}
			return errors.New("state has no lineage; Init must run first")
		}
		if err := fn(tx); err != nil {
			return err
		}
		return bump(tx)
	})
	if err != nil {
		return s.failed(fmt.Errorf("writing state %s: %w", s.path, err))
	}
	return nil
}
