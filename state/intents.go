package state

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"
)

// bucketIntents holds one Intent per address: an engine create that was
// asked for and whose result is not recorded yet.
var bucketIntents = []byte("intents")

// Intent is an engine call that creates something, recorded before the
// call is made: a process killed while the call is in flight leaves the
// intent, and the next refresh resolves it (the planner adopts or removes
// what the engine made of it). Put, writing the call's result, clears it
// in the same transaction.
type Intent struct {
	Addr    string `json:"address"`
	Kind    string `json:"kind"`
	Driver  string `json:"driver"`
	Runtime string `json:"runtime"`
	// Name is the engine name the object is created under, when the
	// driver names it ahead ("" when it does not say).
	Name string `json:"name,omitempty"`
	// PID is the process that made the call; At is when.
	PID int       `json:"pid"`
	At  time.Time `json:"at"`
}

// PutIntent records an intent in its own transaction, before the engine
// call it describes. One address has at most one intent: a later one
// replaces it.
func (s *Store) PutIntent(in Intent) error {
	if in.Addr == "" {
		return errors.New("an intent needs an address")
	}
	if in.At.IsZero() {
		in.At = time.Now().UTC()
	}
	data, err := json.Marshal(in)
	if err != nil {
		return err
	}
	return s.writeIntents(func(tx txn) error { return tx.put(bucketIntents, []byte(in.Addr), data) })
}

// ClearIntent removes the intent of an address, if any: the action's
// result is recorded, or refresh resolved what it left.
func (s *Store) ClearIntent(addr string) error {
	return s.writeIntents(func(tx txn) error {
		if v, err := tx.get(bucketIntents, []byte(addr)); err != nil || v == nil {
			if err != nil {
				return err
			}
			return errNoChange
		}
		return tx.del(bucketIntents, []byte(addr))
	})
}

// resolveIntent removes the intent of addr, if any, in the transaction
// that records (or forgets) the object: the intent and the record of its
// result never both stand, and no write is spent on it alone.
func resolveIntent(tx txn, addr string) error {
	if v, err := tx.get(bucketIntents, []byte(addr)); err != nil || v == nil {
		return err
	}
	return tx.del(bucketIntents, []byte(addr))
}

// Intents returns every recorded intent, sorted by address.
func (s *Store) Intents() ([]Intent, error) {
	if s.st == nil {
		return nil, nil
	}
	var out []Intent
	err := s.st.view(func(tx txn) error {
		return tx.each(bucketIntents, func(k, v []byte) error {
			var in Intent
			if err := json.Unmarshal(v, &in); err != nil {
				return fmt.Errorf("%w: intent %q is not valid: %v", ErrDamaged, k, err)
			}
			out = append(out, in)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("reading state %s: %w", s.path, err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Addr < out[j].Addr })
	return out, nil
}

// errNoChange ends a write that has nothing to change.
var errNoChange = errors.New("no change")

// writeIntents changes the intents bucket in one transaction, through
// the same update path as records. The serial stays: it dates the records
// a saved plan was made against, and intents change none.
func (s *Store) writeIntents(fn func(tx txn) error) error {
	if s.st == nil {
		return errors.New("state is open read-only")
	}
	err := s.st.update(fn)
	if errors.Is(err, errNoChange) {
		return nil
	}
	if err != nil {
		return s.failed(fmt.Errorf("writing state %s: %w", s.path, err))
	}
	return nil
}
