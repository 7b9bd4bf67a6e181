package state

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// ErrOtherLineage: a whole state was to be written over a state of
// another lineage, which names other bottles.
var ErrOtherLineage = errors.New("the state has another lineage")

// Replace writes a whole state (state push, a migration between
// backends) in place of what s holds, in one transaction: lineage, serial,
// records and intents as given, timestamps kept. It refuses a state of
// another lineage (its records name other bottles, which would be lost
// track of) and one older than what s holds (a lower serial of the same
// lineage, which would undo writes); s may hold nothing yet.
func (s *Store) Replace(lineage string, serial uint64, records []Record, intents []Intent) error {
	if s.st == nil {
		return errors.New("state is open read-only")
	}
	if lineage == "" {
		return errors.New("the state to write has no lineage: it is not a bottlefile state")
	}
	err := s.st.update(func(tx txn) error {
		cur, err := tx.get(bucketMeta, keyLineage)
		if err != nil {
			return err
		}
		curSerial, err := tx.get(bucketMeta, keySerial)
		if err != nil {
			return err
		}
		n, _ := strconv.ParseUint(string(curSerial), 10, 64)
		if len(cur) > 0 && string(cur) != lineage {
			return fmt.Errorf("%w: %s has lineage %s, not %s: it records other bottles, and writing over it would lose track of them. Refused; destroy those bottles or choose another state first", ErrOtherLineage, s.path, cur, lineage)
		}
		if len(cur) > 0 && n > serial {
			return fmt.Errorf("%s holds serial %d of lineage %s, newer than serial %d to be written: writing it would undo the writes since. Refused", s.path, n, lineage, serial)
		}
		var old [][]byte
		for _, bucket := range [][]byte{bucketObjects, bucketIntents} {
			old = old[:0]
			if err := tx.each(bucket, func(k, _ []byte) error {
				old = append(old, append([]byte(nil), k...))
				return nil
			}); err != nil {
				return err
			}
			for _, k := range old {
				if err := tx.del(bucket, k); err != nil {
					return err
				}
			}
		}
		for _, r := range records {
			data, err := json.Marshal(r)
			if err != nil {
				return err
			}
			if err := tx.put(bucketObjects, []byte(r.Addr), data); err != nil {
				return err
			}
		}
		for _, in := range intents {
			data, err := json.Marshal(in)
			if err != nil {
				return err
			}
			if err := tx.put(bucketIntents, []byte(in.Addr), data); err != nil {
				return err
			}
		}
		if err := s.recordDir(tx); err != nil {
			return err
		}
		for key, v := range map[string]string{string(keyVersion): strconv.Itoa(formatVersion), string(keyLineage): lineage, string(keySerial): strconv.FormatUint(serial, 10)} {
			if err := tx.put(bucketMeta, []byte(key), []byte(v)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil && !errors.Is(err, ErrOtherLineage) {
		return s.failed(fmt.Errorf("writing state %s: %w", s.path, err))
	}
	return err
}
