package state

import (
	"os"

	bolt "go.etcd.io/bbolt"
)

// storage is where a state's three buckets (meta, objects, intents) are
// kept: a bbolt file in the Bottlefile's directory (fileStorage, the
// default) or tables in a PostgreSQL database (pgStorage, a backend "pg"
// block). Store writes the contract (lineage, a serial bumped on every
// write, one record per object, intents resolved with their result) once,
// against this; a storage only keeps buckets in transactions, holds the
// lock for as long as it is open, and keeps a backup.
type storage interface {
	// view runs fn in one read transaction, update in one read-write
	// transaction that is all done, or not at all.
	view(fn func(tx txn) error) error
	update(fn func(tx txn) error) error
	// backup keeps the state as it is now as the backup of the previous
	// serial, replacing the last one.
	backup() error
	// close releases the lock.
	close() error
}

// txn is one transaction on a storage's buckets. Values get and each
// return are valid until the transaction ends.
type txn interface {
	get(bucket, key []byte) ([]byte, error)
	put(bucket, key, value []byte) error
	del(bucket, key []byte) error
	// each visits a bucket's keys in order.
	each(bucket []byte, fn func(k, v []byte) error) error
}

// fileStorage is a bbolt database: bbolt's file lock is the state lock.
type fileStorage struct {
	s        *Store
	db       *bolt.DB
	lockInfo string // this holder's lock information file, removed on close
}

func (f *fileStorage) view(fn func(tx txn) error) error {
	return safeView(f.db, func(tx *bolt.Tx) error { return fn(boltTxn{tx}) })
}

func (f *fileStorage) update(fn func(tx txn) error) error {
	return safeUpdate(f.db, func(tx *bolt.Tx) error { return fn(boltTxn{tx}) })
}

func (f *fileStorage) backup() error { return f.s.writeBackup(f.db) }

func (f *fileStorage) close() error {
	if f.lockInfo != "" {
		os.Remove(f.lockInfo)
		f.lockInfo = ""
	}
	return f.db.Close()
}

// boltTxn is a bbolt transaction: a bucket is made by its first put.
type boltTxn struct{ tx *bolt.Tx }

func (t boltTxn) get(bucket, key []byte) ([]byte, error) {
	if b := t.tx.Bucket(bucket); b != nil {
		return b.Get(key), nil
	}
	return nil, nil
}

func (t boltTxn) put(bucket, key, value []byte) error {
	b, err := t.tx.CreateBucketIfNotExists(bucket)
	if err != nil {
		return err
	}
	return b.Put(key, value)
}

func (t boltTxn) del(bucket, key []byte) error {
	if b := t.tx.Bucket(bucket); b != nil {
		return b.Delete(key)
	}
	return nil
}

func (t boltTxn) each(bucket []byte, fn func(k, v []byte) error) error {
	if b := t.tx.Bucket(bucket); b != nil {
		return b.ForEach(fn)
	}
	return nil
}
