package state

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strconv"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/bottlefile/bottlefile/atomicfile"
)

// BackupSuffix names the copy of the state kept before each writing
// session (apply, destroy, state rm): .bottlefile/state.db.backup, like
// Terraform's terraform.tfstate.backup.
const BackupSuffix = ".backup"

// BackupPath is the backup of a Bottlefile directory's state.
func BackupPath(dir string) string { return Path(dir) + BackupSuffix }

// Summary describes a state file without opening it for use.
type Summary struct {
	Path      string
	Lineage   string
	Serial    uint64
	Records   int
	Directory string
	ModTime   time.Time
}

func (s Summary) String() string {
	lineage := s.Lineage
	if lineage == "" {
		lineage = "none"
	}
	records := "records"
	if s.Records == 1 {
		records = "record"
	}
	return fmt.Sprintf("lineage %s, serial %d, %d %s, written %s", lineage, s.Serial, s.Records, records, s.ModTime.Local().Format("2006-01-02 15:04:05 MST"))
}

// ReadSummary checks a state file (or a backup) and reads its lineage,
// serial and record count. It never panics on a damaged file.
func ReadSummary(path string) (sum Summary, err error) {
	sum.Path = path
	fi, err := os.Stat(path)
	if err != nil {
		return sum, err
	}
	sum.ModTime = fi.ModTime()
	if _, err := validateFile(path); err != nil {
		return sum, err
	}
	db, err := safeBoltOpen(path, &bolt.Options{ReadOnly: true, Timeout: 2 * time.Second})
	if err != nil {
		return sum, err
	}
	defer db.Close()
	err = safeView(db, func(tx *bolt.Tx) error {
		if b := tx.Bucket(bucketMeta); b != nil {
			sum.Lineage = string(b.Get(keyLineage))
			sum.Serial, _ = strconv.ParseUint(string(b.Get(keySerial)), 10, 64)
			sum.Directory = string(b.Get(keyDirectory))
		}
		if b := tx.Bucket(bucketObjects); b != nil {
			sum.Records = b.Stats().KeyN
		}
		return nil
	})
	return sum, err
}

// safeBoltOpen is bolt.Open that turns a panic or a memory fault inside
// bbolt (a damaged file that passed the checks) into an error.
func safeBoltOpen(path string, opts *bolt.Options) (db *bolt.DB, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			db, err = nil, fmt.Errorf("%w: bbolt failed reading %s: %v", ErrDamaged, path, r)
		}
	}()
	return bolt.Open(path, 0o600, opts)
}

// safeView is db.View with bbolt's panics and faults turned into errors.
func safeView(db *bolt.DB, fn func(*bolt.Tx) error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: bbolt failed reading %s: %v", ErrDamaged, db.Path(), r)
		}
	}()
	return db.View(fn)
}

// safeUpdate is db.Update with bbolt's panics and faults turned into errors.
func safeUpdate(db *bolt.DB, fn func(*bolt.Tx) error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: bbolt failed writing %s: %v", ErrDamaged, db.Path(), r)
		}
	}()
	return db.Update(fn)
}

// verify reads the whole database, so that a damaged page is found before
// the backup is written over with a copy of it: bbolt's own consistency
// check, then every record's bytes (checked to be JSON, not decoded: the
// planner decodes them).
func (s *Store) verify(db *bolt.DB) error {
	err := safeView(db, func(tx *bolt.Tx) error {
		for err := range tx.Check() {
			return fmt.Errorf("%w: %s: a page bbolt's consistency check reads is damaged (%v). It is refused rather than written to, which would spread the damage", ErrDamaged, s.path, err)
		}
		b := tx.Bucket(bucketObjects)
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error {
			if !json.Valid(v) {
				return fmt.Errorf("%w: %s: record %q is not valid JSON", ErrDamaged, s.path, k)
			}
			return nil
		})
	})
	if err != nil {
		return fmt.Errorf("%w\n\n%s", err, restoreHint(s.path))
	}
	return nil
}

// writeBackup copies the database as it is now to state.db.backup:
// a consistent snapshot (one read transaction), written to a temporary
// file, synced, and renamed over the old backup, so a crash or a full
// disk leaves the old backup or the new one, never half of one.
func (s *Store) writeBackup(db *bolt.DB) error {
	dst := s.path + BackupSuffix
	err := writeFileAtomic(dst, func(w io.Writer) error {
		return safeView(db, func(tx *bolt.Tx) error {
			_, err := tx.WriteTo(w)
			return err
		})
	})
	if err != nil {
		return fmt.Errorf("keeping the previous state as %s: %w", dst, err)
	}
	return nil
}

// copyFileAtomic copies src to dst through a synced temporary file.
func copyFileAtomic(src, dst string) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return writeFileAtomic(dst, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// writeFileAtomic writes dst, private to the user (0600), so a crash or a
// full disk leaves the old file or the new one, never half of one.
func writeFileAtomic(dst string, write func(io.Writer) error) error {
	return atomicfile.WriteFunc(dst, 0o600, write)
}

// restoreHint says how to get the state back from the backup, or what to
// do when there is none.
func restoreHint(path string) string {
	backup := path + BackupSuffix
	sum, err := ReadSummary(backup)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return fmt.Sprintf("There is no backup (%s). Do not delete the state to start over while bottles it recorded still run: a new state would not know them, and they would keep running. Restore the file from your own copy, or, if no bottle from this directory runs, move it aside and apply again.", backup)
	case err != nil:
		return fmt.Sprintf("The backup %s cannot be used either: %v. Restore the state from your own copy.", backup, err)
	}
	return fmt.Sprintf("A backup of the state as it was before the last apply, destroy or state rm is in %s (%s). Restore it with `bottlefile state restore-backup`: the damaged file is kept beside it, and objects made after the backup was taken carry this state's lineage label, so the next plan shows them to be adopted or removed.", backup, sum)
}

// RestoreResult says what RestoreBackup did.
type RestoreResult struct {
	Backup Summary
	// Kept is where the replaced state file was moved, "" if there was none.
	Kept string
}

// RestoreBackup puts .bottlefile/state.db.backup back as the state. The
// file it replaces, damaged or not, is kept as state.db.replaced-TIME. It
// refuses while another process holds the state lock.
func RestoreBackup(dir string, lockTimeout time.Duration) (RestoreResult, error) {
	path := Path(dir)
	backup := path + BackupSuffix
	var res RestoreResult
	sum, err := ReadSummary(backup)
	if errors.Is(err, os.ErrNotExist) {
		return res, fmt.Errorf("there is no backup to restore: %s does not exist (one is written before each apply, destroy or state rm that finds a state)", backup)
	}
	if err != nil {
		return res, fmt.Errorf("the backup %s cannot be restored: %w", backup, err)
	}
	if sum.Lineage == "" {
		return res, fmt.Errorf("the backup %s holds no lineage: it is not a state to restore", backup)
	}
	res.Backup = sum
	if _, err := os.Stat(path); err == nil {
		release, err := preLock(path, true, lockTimeout)
		if errors.Is(err, errLockBusy) {
			return res, fmt.Errorf("%w: another bottlefile process holds the lock on %s, so the state is not replaced under it. %s", ErrLocked, path, describeHolders(path))
		}
		if err != nil {
			return res, fmt.Errorf("locking %s: %w", path, err)
		}
		defer release()
		res.Kept = fmt.Sprintf("%s.replaced-%s", path, time.Now().UTC().Format("20060102T150405Z"))
		if err := os.Rename(path, res.Kept); err != nil {
			return res, fmt.Errorf("moving the current state aside: %w", err)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return res, err
	}
	if err := copyFileAtomic(backup, path); err != nil {
		if res.Kept != "" {
			os.Rename(res.Kept, path)
		}
		return res, fmt.Errorf("restoring %s from %s: %w", path, backup, err)
	}
	return res, nil
}
