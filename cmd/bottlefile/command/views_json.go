package command

import (
	"encoding/json"
	"io"
	"time"

	"github.com/bottlefile/bottlefile/lang"
	"github.com/bottlefile/bottlefile/planner"
)

// planFormatVersion is the version of the JSON plan document.
const planFormatVersion = "1.1"

// jsonPlan is the document plan -json and show -json print.
type jsonPlan struct {
	FormatVersion   string       `json:"format_version"`
	Lineage         string       `json:"lineage,omitempty"`
	Serial          uint64       `json:"serial"`
	Destroy         bool         `json:"destroy,omitempty"`
	ResourceChanges []jsonChange `json:"resource_changes"`
	// KeptSnapshots are the policy snapshots a destroy keeps.
	KeptSnapshots []jsonKept `json:"kept_snapshots,omitempty"`
	// Due is when each time policy (snapshot_policy.every, idle) is next
	// due; the plan acts on none of them, a tick on those due now.
	Due     []jsonDue       `json:"due,omitempty"`
	Summary planner.Summary `json:"summary"`
}

// jsonKept is one snapshot a destroy keeps; size and time are left out
// for one this plan takes.
type jsonKept struct {
	Address   string `json:"address"`
	SizeBytes *int64 `json:"size_bytes,omitempty"`
	Created   string `json:"created,omitempty"`
}

type jsonChange struct {
	Address string `json:"address"`
	Kind    string `json:"kind"`
	Runtime string `json:"runtime"`
	Action  string `json:"action"`
	// Reasons are the reasons' sentences, as the human plan prints them;
	// ReasonCodes the same reasons as their codes and parameters, for
	// programs (format 1.1).
	Reasons     []string                   `json:"reasons"`
	ReasonCodes []planner.Reason           `json:"reason_codes"`
	WhatIf      []string                   `json:"what_if,omitempty"`
	Changed     []string                   `json:"changed,omitempty"`
	Forcing     []string                   `json:"forces_replacement,omitempty"`
	Before      map[string]json.RawMessage `json:"before"`
	After       map[string]json.RawMessage `json:"after"`
	// Node is where the live workload runs, on a runtime of several
	// machines (a swarm node).
	Node string `json:"node,omitempty"`
	// PreviousAddress and PreviousRuntime are where the object's record
	// was, when the plan moves it (a moved block, another runtime block
	// on the same engine), as Terraform's previous_address.
	PreviousAddress string `json:"previous_address,omitempty"`
	PreviousRuntime string `json:"previous_runtime,omitempty"`
}

func planDocument(p *planner.Plan) jsonPlan {
	doc := jsonPlan{FormatVersion: planFormatVersion, Lineage: p.Lineage, Serial: p.Serial, Destroy: p.Options.Destroy, ResourceChanges: []jsonChange{}}
	for _, c := range p.Changes {
		jc := jsonChange{
			Address: c.Addr, Kind: c.Kind, Runtime: c.Runtime, Action: c.Action.String(),
			Reasons: planner.ReasonTexts(c.Reasons), ReasonCodes: append([]planner.Reason{}, c.Reasons...), WhatIf: c.WhatIf, Changed: c.Changed, Forcing: c.Forcing,
			Before: c.Before, After: c.After,
			PreviousAddress: c.MovedFrom, PreviousRuntime: c.FromRuntime,
		}
		if c.MoveOnly() {
			jc.Action = "move"
		}
		if c.Action == planner.Create || c.Action == planner.Adopt {
			jc.Before = nil // what is not recorded has no before
		}
		if c.Live != nil {
			jc.Node = c.Live.Node
		}
		if c.Action == planner.Delete || c.Action == planner.Forget {
			jc.After = nil
		}
		doc.ResourceChanges = append(doc.ResourceChanges, jc)
	}
	for _, k := range p.Kept {
		jk := jsonKept{Address: k.Addr}
		if k.Size >= 0 {
			jk.SizeBytes = &k.Size
		}
		if !k.Created.IsZero() {
			jk.Created = k.Created.UTC().Format(time.RFC3339)
		}
		doc.KeptSnapshots = append(doc.KeptSnapshots, jk)
	}
	doc.Due = dueDocument(p.Due)
	doc.Summary = p.Summary()
	return doc
}

// writePlanJSON prints the plan as one indented JSON document.
func writePlanJSON(w io.Writer, p *planner.Plan) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(planDocument(p))
}

// jsonEvent is one line of apply -json.
type jsonEvent struct {
	Type    string           `json:"type"` // apply_start, apply_progress, apply_complete, apply_errored, apply_skipped, diagnostic, summary
	Time    string           `json:"time"`
	Address string           `json:"address,omitempty"`
	Step    string           `json:"step,omitempty"`
	Elapsed float64          `json:"elapsed_seconds,omitempty"`
	Message string           `json:"message,omitempty"`
	Cause   string           `json:"cause,omitempty"`
	Summary *planner.Summary `json:"summary,omitempty"`
	// Diagnostic is set on "diagnostic" events.
	Diagnostic *lang.JSONDiagnostic `json:"diagnostic,omitempty"`
	// Plan is set on the "planned" event that opens an apply.
	Plan *jsonPlan `json:"plan,omitempty"`
}

// jsonEvents writes apply -json events, one object per line.
func jsonEvents(w io.Writer) func(jsonEvent) {
	enc := json.NewEncoder(w)
	return func(e jsonEvent) {
		e.Time = time.Now().UTC().Format(time.RFC3339Nano)
		enc.Encode(e)
	}
}
