package state

import (
	"encoding/json"
	"errors"
	"fmt"
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
)

// formatVersion is the layout of the database; a newer one is refused.
const formatVersion = 1

// ErrLocked is returned when another process holds the state lock.
var ErrLocked = errors.New("state is locked")

// Record is one object bottlefile created.
type Record struct {
	Addr      string   `json:"address"`
	Kind      string   `json:"kind"`
	Driver    string   `json:"driver"`
	Runtime   string   `json:"runtime"`
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
}

// Store is an open state database. A nil db means no state file exists yet
// (read-only open of a fresh directory): it reads as empty.
type Store struct {
	path string
	db   *bolt.DB
}

// Path is the state file for a Bottlefile directory.
func Path(dir string) string { return filepath.Join(dir, Dir, File) }

// Open opens (or, unless read-only, creates) the state of a Bottlefile directory.
func Open(dir string, opts Options) (*Store, error) {
	path := Path(dir)
	s := &Store{path: path}
	if opts.ReadOnly {
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
			return s, nil
		}
	} else if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("creating state directory: %w", err)
	}
	timeout := opts.LockTimeout
	if timeout <= 0 {
		timeout = time.Nanosecond // bbolt treats 0 as "wait forever"
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: timeout, ReadOnly: opts.ReadOnly})
	if errors.Is(err, berrors.ErrTimeout) {
		return nil, fmt.Errorf("%w: another bottlefile process holds the lock on %s (the bbolt file lock); wait for it to finish, or pass -lock-timeout to wait", ErrLocked, path)
	}
	if err != nil {
		return nil, fmt.Errorf("opening state %s: %w", path, err)
	}
	s.db = db
	if err := s.check(); err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

// check refuses a database written by a newer bottlefile or not written by one at all.
func (s *Store) check() error {
	return s.db.View(func(tx *bolt.Tx) error {
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
		return nil
	})
}

// Path is the state file's path.
func (s *Store) Path() string { return s.path }

// Close releases the lock.
func (s *Store) Close() error {
	if s.db == nil {
		return nil
	}
	return s.db.Close()
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
	if s.db == nil {
		return "", nil
	}
	var out string
	err := s.db.View(func(tx *bolt.Tx) error {
		if b := tx.Bucket(bucketMeta); b != nil {
			out = string(b.Get(key))
		}
		return nil
	})
	return out, err
}

// Init gives the state a lineage if it has none, and returns it.
func (s *Store) Init() (string, error) {
	if s.db == nil {
		return "", errors.New("state is open read-only")
	}
	var lineage string
	err := s.db.Update(func(tx *bolt.Tx) error {
		meta, err := tx.CreateBucketIfNotExists(bucketMeta)
		if err != nil {
			return err
		}
		if _, err := tx.CreateBucketIfNotExists(bucketObjects); err != nil {
			return err
		}
		if v := meta.Get(keyLineage); v != nil {
			lineage = string(v)
			return nil
		}
		lineage = uuid.NewString()
		if err := meta.Put(keyVersion, []byte(strconv.Itoa(formatVersion))); err != nil {
			return err
		}
		if err := meta.Put(keyLineage, []byte(lineage)); err != nil {
			return err
		}
		return bump(meta)
	})
	if err != nil {
		return "", fmt.Errorf("writing state %s: %w", s.path, err)
	}
	return lineage, nil
}

func bump(meta *bolt.Bucket) error {
	n, _ := strconv.ParseUint(string(meta.Get(keySerial)), 10, 64)
	return meta.Put(keySerial, []byte(strconv.FormatUint(n+1, 10)))
}

// Records returns every record, sorted by address.
func (s *Store) Records() ([]Record, error) {
	if s.db == nil {
		return nil, nil
	}
	var out []Record
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketObjects)
		if b == nil {
			return nil
		}
		var keys, values [][]byte // valid until the transaction ends
		if err := b.ForEach(func(k, v []byte) error {
			keys, values = append(keys, k), append(values, v)
			return nil
		}); err != nil {
			return err
		}
		out = make([]Record, len(values))
		return decodeRecords(keys, values, out)
	})
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
	return s.write(func(objects *bolt.Bucket) error {
		now := time.Now().UTC()
		if old := objects.Get([]byte(r.Addr)); old != nil {
			var prev Record
			if json.Unmarshal(old, &prev) == nil && r.CreatedAt.IsZero() {
				r.CreatedAt = prev.CreatedAt
			}
		}
		if r.CreatedAt.IsZero() {
			r.CreatedAt = now
		}
		r.UpdatedAt = now
		data, err := json.Marshal(r)
		if err != nil {
			return err
		}
		return objects.Put([]byte(r.Addr), data)
	})
}

// Delete removes one record in its own transaction and bumps the serial.
func (s *Store) Delete(addr string) error {
	return s.write(func(objects *bolt.Bucket) error {
		return objects.Delete([]byte(addr))
	})
}

func (s *Store) write(fn func(objects *bolt.Bucket) error) error {
	if s.db == nil {
		return errors.New("state is open read-only")
	}
	err := s.db.Update(func(tx *bolt.Tx) error {
		meta, err := tx.CreateBucketIfNotExists(bucketMeta)
		if err != nil {
			return err
		}
		if meta.Get(keyLineage) == nil {
			return errors.New("state has no lineage; Init must run first")
		}
		objects, err := tx.CreateBucketIfNotExists(bucketObjects)
		if err != nil {
			return err
		}
		if err := fn(objects); err != nil {
			return err
		}
		return bump(meta)
	})
	if err != nil {
		return fmt.Errorf("writing state %s: %w", s.path, err)
	}
	return nil
}
