package planner

import (
	"fmt"

	"github.com/bottlefile/bottlefile/drivers"
)

// Summary counts changes: the closing Plan: line, the JSON plan's summary
// and apply's closing line all render one. The JSON names are part of the
// plan -json and apply -json formats.
type Summary struct {
	Add      int `json:"add"`
	Change   int `json:"change"`
	Destroy  int `json:"destroy"`
	Start    int `json:"start"`
	Adopt    int `json:"adopt"`
	Forget   int `json:"forget"`
	Snapshot int `json:"snapshot"`
	Migrate  int `json:"migrate"`
}

// Summary counts pending changes; a replacement counts as one add and one destroy.
func (p *Plan) Summary() Summary {
	var s Summary
	for _, c := range p.Changes {
		if c.Kind == drivers.KindSnapshot && c.Action == Create {
			s.Snapshot++
			continue
		}
		switch c.Action {
		case Create:
			s.Add++
		case Update:
			s.Change++
		case Replace:
			s.Add++
			s.Destroy++
		case Migrate:
			s.Migrate++
		case Delete:
			s.Destroy++
		case Start:
			s.Start++
		case Adopt:
			s.Adopt++
		case Forget:
			s.Forget++
		}
	}
	return s
}

// StepSummary counts the steps an apply performed, by what they did on a
// runtime: an adopted object counts as added, and a migration as the create
// and the delete it is made of. Steps that only touch the state (record,
// forget) and moves are not counted.
func StepSummary(steps []*Step) Summary {
	var s Summary
	for _, st := range steps {
		switch st.Op {
		case StepCreate, StepAdopt:
			if st.Change.Kind == drivers.KindSnapshot {
				s.Snapshot++
			} else {
				s.Add++
			}
		case StepUpdate:
			s.Change++
		case StepDelete:
			s.Destroy++
		case StepStart:
			s.Start++
		}
	}
	return s
}

// String is the closing line of a human plan: "Plan: 1 to add, 0 to change, 0 to destroy."
func (s Summary) String() string {
	line := fmt.Sprintf("Plan: %d to add, %d to change, %d to destroy", s.Add, s.Change, s.Destroy)
	for _, extra := range []struct {
		n    int
		verb string
	}{{s.Start, "start"}, {s.Adopt, "adopt"}, {s.Forget, "forget"}, {s.Snapshot, "snapshot"}, {s.Migrate, "migrate"}} {
		if extra.n > 0 {
			line += fmt.Sprintf(", %d to %s", extra.n, extra.verb)
		}
	}
	return line + "."
}

// Done is what an apply did, for its closing line: "1 added, 0 changed,
// 0 destroyed, 1 snapshot taken".
func (s Summary) Done() string {
	line := fmt.Sprintf("%d added, %d changed, %d destroyed", s.Add, s.Change, s.Destroy)
	if s.Start > 0 {
		line += fmt.Sprintf(", %d started", s.Start)
	}
	if s.Snapshot > 0 {
		line += fmt.Sprintf(", %d %s taken", s.Snapshot, plural(s.Snapshot, "snapshot", "snapshots"))
	}
	return line
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
