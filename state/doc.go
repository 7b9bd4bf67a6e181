// Package state is bottlefile's record of what it created: a lineage, a
// serial bumped on every write, and one record per object. Where it is
// kept is a storage (storage.go): by default a bbolt database in
// .bottlefile/state.db, whose file lock is the state lock; with a backend
// "pg" block, tables in a PostgreSQL database, locked by a session
// advisory lock (pg.go). Every write is its own transaction, so a crash
// loses at most the action in flight.
package state
