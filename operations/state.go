package operations

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/bottlefile/bottlefile/addrs"
	"github.com/bottlefile/bottlefile/planner"
	"github.com/bottlefile/bottlefile/state"
)

// State is what the state of a Bottlefile directory records.
type State struct {
	Lineage string
	Serial  uint64
	Records []Record // in address order
}

// StatePull reads the whole state of dir, read-only: show and state pull
// print it. A directory where nothing was applied reads as empty.
func StatePull(dir string) (*State, hcl.Diagnostics) {
	s, diags := openState(dir, state.Options{ReadOnly: true})
	if diags.HasErrors() {
		return nil, diags
	}
	defer s.Close()
	recs, err := s.Records()
	if err != nil {
		return nil, hcl.Diagnostics{errorDiag("Cannot read state", err.Error())}
	}
	return &State{Lineage: s.Lineage(), Serial: s.Serial(), Records: recs}, nil
}

// StateList is the address of every object the state of dir records.
func StateList(dir string) ([]string, hcl.Diagnostics) {
	st, diags := StatePull(dir)
	if diags.HasErrors() {
		return nil, diags
	}
	addrs := make([]string, 0, len(st.Records))
	for _, r := range st.Records {
		addrs = append(addrs, r.Addr)
	}
	return addrs, diags
}

// StateShow is the record of the object at addr; none is an error.
func StateShow(dir, addr string) (Record, hcl.Diagnostics) {
	st, diags := StatePull(dir)
	if diags.HasErrors() {
		return Record{}, diags
	}
	for _, r := range st.Records {
		if r.Addr == addr {
			return r, diags
		}
	}
	known := make([]string, 0, len(st.Records))
	for _, r := range st.Records {
		known = append(known, r.Addr)
	}
	return Record{}, append(diags, unknownAddress("No such record", fmt.Sprintf("The state records no object at %s; `bottlefile state list` lists them.", addr), addr, known))
}

// StateRm removes the records at addrs, in order, and returns those it
// removed. It stops at the first address the state does not record.
// Nothing on any runtime changes.
func StateRm(dir string, addrs []string, lockTimeout time.Duration) ([]string, hcl.Diagnostics) {
	s, diags := openState(dir, state.Options{LockTimeout: lockTimeout})
	if diags.HasErrors() {
		return nil, diags
	}
	defer s.Close()
	var removed []string
	for _, addr := range addrs {
		_, ok, err := s.Get(addr)
		if err != nil {
			return removed, hcl.Diagnostics{errorDiag("Cannot read state", err.Error())}
		}
		if !ok {
			var known []string
			if recs, err := s.Records(); err == nil {
				for _, r := range recs {
					known = append(known, r.Addr)
				}
			}
			return removed, hcl.Diagnostics{unknownAddress("No such record", fmt.Sprintf("The state records no object at %s.", addr), addr, known)}
		}
		if err := s.Delete(addr); err != nil {
			return removed, hcl.Diagnostics{errorDiag("Cannot write state", err.Error())}
		}
		removed = append(removed, addr)
	}
	return removed, nil
}

// StateMv moves the records of the agent at from, with everything it owns
// (its sidecars, gateway, network, images and policy snapshots), to the
// agent address to, in one write: what a moved block does, by hand. Its
// objects keep their engine names (the records say which). Nothing on any
// runtime changes. Both must be agent addresses, not the same; the state
// must record something at from and nothing at to. It returns the
// addresses moved, old to new.
func StateMv(dir, from, to string, lockTimeout time.Duration) ([][2]string, hcl.Diagnostics) {
	for _, a := range []string{from, to} {
		addr, err := addrs.Parse(a)
		if err != nil {
			return nil, hcl.Diagnostics{errorDiag("Invalid address", err.Error())}
		}
		if !addr.IsAgent() {
			return nil, hcl.Diagnostics{errorDiag("Invalid move address", fmt.Sprintf("%s is not an agent: state mv moves an agent (agent.NAME) with everything it owns", a))}
		}
	}
	if from == to {
		return nil, hcl.Diagnostics{errorDiag("Redundant move", fmt.Sprintf("state mv %s %s moves %s to itself", from, to, from))}
	}
	s, diags := openState(dir, state.Options{LockTimeout: lockTimeout})
	if diags.HasErrors() {
		return nil, diags
	}
	defer s.Close()
	recs, err := s.Records()
	if err != nil {
		return nil, hcl.Diagnostics{errorDiag("Cannot read state", err.Error())}
	}
	below := func(addr, agent string) bool { return addr == agent || strings.HasPrefix(addr, agent+".") }
	moves := map[string]Record{}
	var known []string
	for _, r := range recs {
		known = append(known, r.Addr)
		if below(r.Addr, to) {
			return nil, hcl.Diagnostics{errorDiag("Moved object already exists", fmt.Sprintf("The state already records %s at %s; forget it first (`bottlefile state rm %s`), or move it elsewhere.", r.Addr, to, r.Addr))}
		}
		if below(r.Addr, from) {
			moves[r.Addr] = planner.MoveRecord(r, from, to)
		}
	}
	if len(moves) == 0 {
		return nil, hcl.Diagnostics{unknownAddress("No such record", fmt.Sprintf("The state records nothing at %s.", from), from, known)}
	}
	if err := s.Move(moves); err != nil {
		return nil, hcl.Diagnostics{errorDiag("Cannot write state", err.Error())}
	}
	out := make([][2]string, 0, len(moves))
	for _, old := range slices.Sorted(maps.Keys(moves)) {
		out = append(out, [2]string{old, moves[old].Addr})
	}
	return out, nil
}

// StatePath is the state file of a Bottlefile directory, and
// StateBackupPath the backup each apply, destroy and state rm keeps of it.
func StatePath(dir string) string       { return state.Path(dir) }
func StateBackupPath(dir string) string { return state.BackupPath(dir) }

// StateSummary is what a state file holds in brief: its lineage, serial,
// records and when it was written.
type StateSummary = state.Summary

// ReadStateSummary reads the summary of the state file at path, checking
// it as opening would; a file that does not exist is os.ErrNotExist.
func ReadStateSummary(path string) (StateSummary, error) { return state.ReadSummary(path) }

// RestoreResult says what StateRestoreBackup did.
type RestoreResult = state.RestoreResult

// StateRestoreBackup puts the backup back as the state of dir, keeping
// the file it replaces beside it. It refuses while another process holds
// the state lock.
func StateRestoreBackup(dir string, lockTimeout time.Duration) (RestoreResult, error) {
	return state.RestoreBackup(dir, lockTimeout)
}

// StateRelocate records dir as the directory its state belongs to (after
// the directory was moved) and returns the one it was recorded as before.
func StateRelocate(dir string, lockTimeout time.Duration) (string, hcl.Diagnostics) {
	if diags := FileStateOnly(dir, "state relocate"); diags.HasErrors() {
		return "", diags
	}
	if _, err := os.Stat(state.Path(dir)); err != nil {
		return "", hcl.Diagnostics{errorDiag("No state", fmt.Sprintf("there is no state in %s to relocate", dir))}
	}
	s, err := state.Open(dir, state.Options{LockTimeout: lockTimeout, AcceptMove: true})
	if err != nil {
		return "", hcl.Diagnostics{errorDiag("Cannot open state", err.Error())}
	}
	defer s.Close()
	prev, err := s.Relocate()
	if err != nil {
		return prev, hcl.Diagnostics{errorDiag("Cannot write state", err.Error())}
	}
	return prev, nil
}
