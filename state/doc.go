// Package state is bottlefile's record of what it created: a bbolt database
// in .bottlefile/state.db holding a lineage, a serial bumped on every write,
// and one record per object. bbolt's file lock is the state lock, and every
// write is its own transaction, so a crash loses at most the action in flight.
package state
