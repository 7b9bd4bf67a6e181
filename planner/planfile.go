package planner

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"

	"github.com/bottlefile/bottlefile/drivers"
)

// PlanFileVersion is the format of saved plans this bottlefile writes and reads.
//
// Version 2 holds each reason as its code and parameters (Reason); a plan
// file of version 1, whose reasons are sentences, is read too, its reasons
// kept as they were written (ReasonText).
const PlanFileVersion = 2

// oldestPlanFileVersion is the oldest format this bottlefile reads.
const oldestPlanFileVersion = 1

// SavedPlan is what plan -out writes: enough to refuse a stale plan and to
// show it, and nothing sensitive. apply FILE re-plans from the same inputs
// and executes only when that reproduces exactly these changes.
type SavedPlan struct {
	FormatVersion int `json:"format_version"`
	// Config maps each configuration file to the hash of its content.
	Config map[string]string `json:"config"`
	// Variables holds the non-sensitive variable values given on the
	// command line; sensitive ones are read again at apply.
	Variables map[string]json.RawMessage `json:"variables,omitempty"`
	Lineage   string                     `json:"lineage"`
	Serial    uint64                     `json:"serial"`
	Options   Options                    `json:"options"`
	Changes   []SavedChange              `json:"changes"`
	// Kept are the snapshots a destroy keeps, for show.
	Kept []KeptSnapshot `json:"kept,omitempty"`
}

// SavedChange is one change as saved: its action, the hash of the desired
// configuration, and the live facts the plan saw.
type SavedChange struct {
	Addr    string                     `json:"address"`
	Kind    string                     `json:"kind"`
	Runtime string                     `json:"runtime"`
	Action  string                     `json:"action"`
	Reasons []Reason                   `json:"reasons,omitempty"`
	WhatIf  []string                   `json:"what_if,omitempty"`
	Changed []string                   `json:"changed,omitempty"`
	Forcing []string                   `json:"forcing,omitempty"`
	Hash    string                     `json:"config_hash,omitempty"`
	Before  map[string]json.RawMessage `json:"before,omitempty"`
	After   map[string]json.RawMessage `json:"after,omitempty"`
	Live    *drivers.LiveObject        `json:"live,omitempty"`
	// DependsOn orders the saved steps for graph -plan=FILE.
	DependsOn     []string `json:"depends_on,omitempty"`
	StateOnly     bool     `json:"state_only,omitempty"`
	WaitFor       []string `json:"wait_for,omitempty"`
	DeleteAfter   []string `json:"delete_after,omitempty"`
	SnapshotFirst string   `json:"snapshot_first,omitempty"`
	BootFrom      string   `json:"boot_from,omitempty"`
	ArchiveTo     string   `json:"archive_to,omitempty"`
	Carry         []string `json:"carry,omitempty"`
	CarryFrom     string   `json:"carry_from,omitempty"`
	MoveTo        string   `json:"move_to,omitempty"`
	Stray         bool     `json:"stray,omitempty"`
	Twin          bool     `json:"twin,omitempty"`
	// DeleteRuntime is where the object is deleted when that is not
	// Runtime: the runtime a migration moves it from.
	DeleteRuntime string `json:"delete_runtime,omitempty"`
	// MovedFrom, FromRuntime and NameAddr are Change's.
	MovedFrom   string `json:"moved_from,omitempty"`
	FromRuntime string `json:"from_runtime,omitempty"`
	NameAddr    string `json:"name_addr,omitempty"`
	// RuntimeNameAddr is Change's.
	RuntimeNameAddr string `json:"runtime_name_addr,omitempty"`
}

// key identifies the saved change as Change.key does: a stray copy and
// a twin are apart from the change of their address.
func (sc SavedChange) key() string {
	key := sc.Addr
	if sc.Stray {
		key += "@" + sc.Runtime
	}
	if sc.Twin && sc.Live != nil {
		key += "#" + sc.Live.ID
	}
	return key
}

// name is how a cause names the saved change: its address, and for a
// stray copy the runtime it is on.
func (sc SavedChange) name() string {
	if sc.Stray {
		return fmt.Sprintf("%s on runtime %q", sc.Addr, sc.Runtime)
	}
	if sc.Twin && sc.Live != nil {
		return sc.Addr + " copy " + shortID(sc.Live.ID)
	}
	return sc.Addr
}

// Save makes the saved form of a plan.
func Save(p *Plan, config map[string]string, vars map[string]json.RawMessage) *SavedPlan {
	s := &SavedPlan{FormatVersion: PlanFileVersion, Config: config, Variables: vars, Lineage: p.Lineage, Serial: p.Serial, Options: p.Options, Kept: p.Kept}
	for _, c := range p.Changes {
		deps := c.Object.DependsOn
		if c.Prior != nil && len(deps) == 0 {
			deps = c.Prior.DependsOn
		}
		deleteRuntime := c.DeleteRuntime()
		if deleteRuntime == c.Runtime {
			deleteRuntime = ""
		}
		s.Changes = append(s.Changes, SavedChange{
			Addr: c.Addr, Kind: c.Kind, Runtime: c.Runtime, Action: c.Action.String(),
			Reasons: c.Reasons, WhatIf: c.WhatIf, Changed: c.Changed, Forcing: c.Forcing, Hash: c.Fingerprint.Hash,
			Before: c.Before, After: c.After, Live: c.Live, DependsOn: deps, StateOnly: c.StateOnly,
			WaitFor: c.WaitFor, DeleteAfter: c.DeleteAfter, SnapshotFirst: c.SnapshotFirst,
			BootFrom: c.BootFrom, ArchiveTo: c.ArchiveTo, Carry: c.Carry, CarryFrom: c.CarryFrom, MoveTo: c.MoveTo, Stray: c.Stray, Twin: c.Twin, DeleteRuntime: deleteRuntime,
			MovedFrom: c.MovedFrom, FromRuntime: c.FromRuntime, NameAddr: c.NameAddr, RuntimeNameAddr: c.RuntimeNameAddr,
		})
	}
	return s
}

// WriteFile writes the plan, readable only by its owner.
func (s *SavedPlan) WriteFile(path string) error {
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, append(data, '\n'), 0o600); err != nil {
		return fmt.Errorf("writing plan file: %w", err)
	}
	return nil
}

// ReadPlanFile reads a saved plan.
func ReadPlanFile(path string) (*SavedPlan, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading plan file: %w", err)
	}
	s, err := DecodePlanFile(data)
	if err != nil {
		return nil, fmt.Errorf("%s is not a usable plan file: %w", path, err)
	}
	return s, nil
}

// DecodePlanFile parses and checks a saved plan; it never panics.
func DecodePlanFile(data []byte) (*SavedPlan, error) {
	var s SavedPlan
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("not a bottlefile plan (%v)", err)
	}
	if s.FormatVersion < oldestPlanFileVersion || s.FormatVersion > PlanFileVersion {
		return nil, fmt.Errorf("format version %d; this bottlefile reads versions %d to %d", s.FormatVersion, oldestPlanFileVersion, PlanFileVersion)
	}
	if len(s.Config) == 0 {
		return nil, errors.New("it records no configuration")
	}
	seen := map[string]bool{}
	for i, c := range s.Changes {
		if c.Addr == "" {
			return nil, fmt.Errorf("change %d has no address", i)
		}
		key := c.key()
		if seen[key] {
			return nil, fmt.Errorf("%s appears twice", c.Addr)
		}
		seen[key] = true
		if _, ok := ParseAction(c.Action); !ok {
			return nil, fmt.Errorf("%s has unknown action %q", c.Addr, c.Action)
		}
	}
	return &s, nil
}

// Plan rebuilds a plan from the saved form, for show and graph.
func (s *SavedPlan) Plan() *Plan {
	p := &Plan{Lineage: s.Lineage, Serial: s.Serial, Options: s.Options, Kept: s.Kept}
	for _, sc := range s.Changes {
		action, _ := ParseAction(sc.Action) // checked by DecodePlanFile
		p.Changes = append(p.Changes, &Change{
			Addr: sc.Addr, Kind: sc.Kind, Runtime: sc.Runtime, Action: action,
			Reasons: sc.Reasons, WhatIf: sc.WhatIf, Changed: sc.Changed, Forcing: sc.Forcing, Before: sc.Before, After: sc.After,
			Live: sc.Live, Fingerprint: Fingerprint{Hash: sc.Hash}, StateOnly: sc.StateOnly,
			Object:  drivers.Object{Addr: sc.Addr, Kind: sc.Kind, DependsOn: sc.DependsOn},
			WaitFor: sc.WaitFor, DeleteAfter: sc.DeleteAfter, SnapshotFirst: sc.SnapshotFirst,
			BootFrom: sc.BootFrom, ArchiveTo: sc.ArchiveTo, Carry: sc.Carry, CarryFrom: sc.CarryFrom, MoveTo: sc.MoveTo, Stray: sc.Stray, Twin: sc.Twin, savedDeleteRuntime: sc.DeleteRuntime,
			MovedFrom: sc.MovedFrom, FromRuntime: sc.FromRuntime, NameAddr: sc.NameAddr, RuntimeNameAddr: sc.RuntimeNameAddr,
		})
	}
	sortChanges(p.Changes)
	return p
}

// StaleError says why a saved plan can no longer be applied.
type StaleError struct {
	Causes []string
}

func (e *StaleError) Error() string {
	return "the saved plan is stale: " + strings.Join(e.Causes, "; ")
}

// CheckConfig compares the configuration files with those the plan saw.
func (s *SavedPlan) CheckConfig(config map[string]string) error {
	var causes []string
	for _, name := range sortedKeys(config) {
		switch old, ok := s.Config[name]; {
		case !ok:
			causes = append(causes, fmt.Sprintf("%s was added to the configuration", name))
		case old != config[name]:
			causes = append(causes, fmt.Sprintf("%s changed", name))
		}
	}
	for _, name := range sortedKeys(s.Config) {
		if _, ok := config[name]; !ok {
			causes = append(causes, fmt.Sprintf("%s was removed from the configuration", name))
		}
	}
	if len(causes) > 0 {
		return &StaleError{Causes: causes}
	}
	return nil
}

// CheckState compares the state's lineage and serial with those the plan saw.
func (s *SavedPlan) CheckState(lineage string, serial uint64) error {
	switch {
	case lineage != s.Lineage && s.Lineage == "":
		return &StaleError{Causes: []string{"the plan was made before the first apply, and the state has been written since"}}
	case lineage != s.Lineage:
		return &StaleError{Causes: []string{fmt.Sprintf("the state has lineage %s, but the plan was made against %s", lineage, s.Lineage)}}
	case serial != s.Serial:
		return &StaleError{Causes: []string{fmt.Sprintf("the state was written since the plan was made (serial %d, the plan saw %d)", serial, s.Serial)}}
	}
	return nil
}

// CheckFresh compares a plan made now, from the same inputs, with the saved
// one: the same changes, the same desired configuration, and the same live
// objects. Anything else means the world moved since plan.
func (s *SavedPlan) CheckFresh(fresh *Plan) error {
	var causes []string
	// Keyed as the plan keys them: a stray copy of an address on
	// another runtime (left by a migration) is a change of its own, and
	// must not be taken for the address's own change.
	now := map[string]*Change{}
	for _, c := range fresh.Changes {
		now[c.key()] = c
	}
	for _, sc := range s.Changes {
		c, ok := now[sc.key()]
		delete(now, sc.key())
		if !ok {
			if sc.Action != NoOp.String() {
				causes = append(causes, fmt.Sprintf("%s would no longer %s", sc.name(), sc.Action))
			}
			continue
		}
		if cause := liveMoved(sc.Addr, sc.Live, c.Live); cause != "" {
			causes = append(causes, cause)
		}
		if c.Action.String() != sc.Action {
			causes = append(causes, fmt.Sprintf("%s would now %s, not %s", sc.name(), c.Action, sc.Action))
			continue
		}
		if c.MovedFrom != sc.MovedFrom || c.FromRuntime != sc.FromRuntime {
			causes = append(causes, fmt.Sprintf("%s would now move otherwise (%s)", sc.name(), c.MoveLine()))
		}
		if c.Fingerprint.Hash != sc.Hash {
			causes = append(causes, fmt.Sprintf("the desired configuration of %s changed (a variable or a build context?)", sc.Addr))
		}
	}
	for _, key := range sortedKeys(now) {
		if c := now[key]; c.Action != NoOp {
			name := c.Addr
			if c.Stray {
				name = fmt.Sprintf("%s on runtime %q", c.Addr, c.Runtime)
			}
			causes = append(causes, fmt.Sprintf("%s would now %s, which the plan did not include", name, c.Action))
		}
	}
	if len(causes) > 0 {
		sort.Strings(causes)
		return &StaleError{Causes: slices.Compact(causes)}
	}
	return nil
}

// liveMoved compares the live facts of one object then and now.
func liveMoved(addr string, then, now *drivers.LiveObject) string {
	switch {
	case then == nil && now == nil:
		return ""
	case then == nil:
		return fmt.Sprintf("%s %s appeared on the runtime", addr, now.ID)
	case now == nil:
		return fmt.Sprintf("%s (%s %s) was removed from the runtime", addr, then.Kind, shortID(then.ID))
	case then.ID != now.ID:
		return fmt.Sprintf("%s was re-created on the runtime (%s, the plan saw %s)", addr, shortID(now.ID), shortID(then.ID))
	case then.ImageID != now.ImageID:
		return fmt.Sprintf("the image of %s changed (%s, the plan saw %s)", addr, shortID(now.ImageID), shortID(then.ImageID))
	case then.Running != now.Running:
		return fmt.Sprintf("%s was %s since the plan", addr, map[bool]string{true: "started", false: "stopped"}[now.Running])
	case then.Hash != now.Hash:
		return fmt.Sprintf("%s carries another config hash on the runtime than the plan saw", addr)
	}
	return ""
}
