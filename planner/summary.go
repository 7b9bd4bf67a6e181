package planner

import (
	"fmt"

	"github.com/bottlefile/bottlefile/addrs"
	"github.com/bottlefile/bottlefile/drivers"
)

// Summary counts changes: the closing Plan: line, the JSON plan's summary
// and apply's closing line all render one. The JSON names are part of the
// plan -json and apply -json formats.
type Summary struct {
	Add     int `json:"add"`
	Change  int `json:"change"`
	Destroy int `json:"destroy"`
	Start   int `json:"start"`
	// Stop counts the workloads stopped (bottlefile stop); in JSON only
	// when a plan stops one.
	Stop int `json:"stop,omitempty"`
	// Archive counts the objects archived (bottlefile archive, an idle
	// policy): removed from their runtime, their records kept; in JSON
	// only when a plan archives one.
	Archive  int `json:"archive,omitempty"`
	Adopt    int `json:"adopt"`
	Forget   int `json:"forget"`
	Snapshot int `json:"snapshot"`
	Migrate  int `json:"migrate"`
	// SnapshotDelete counts the snapshots the plan deletes (prunes, a
	// removed agent's, a snapshot block taken again); they count in
	// Destroy too.
	SnapshotDelete int `json:"snapshot_delete,omitempty"`
	// snapshotsAtStake shows the snapshots deleted in the Plan: line even
	// when none are: the plan destroys a workload and keeps its snapshots.
	snapshotsAtStake bool
	// Move counts the agents whose records move (a moved block, another
	// runtime block on the same engine), with all they own; in JSON only
	// when a plan moves one.
	Move int `json:"move,omitempty"`
}

// Summary counts pending changes; a replacement counts as one add and one destroy.
func (p *Plan) Summary() Summary {
	s := Summary{snapshotsAtStake: len(p.Kept) > 0}
	for _, c := range p.Changes {
		if a, ok := addrs.AgentOf(c.Addr); ok && c.Moved() && a.String() == c.Addr {
			s.Move++
		}
		if c.MoveOnly() {
			continue
		}
		r := c.row()
		r.count(&s)
		if r.destroys && c.Kind == drivers.KindSnapshot {
			s.SnapshotDelete++
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
		if count := st.Op.row().count; count != nil {
			count(&s, st.Change)
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
	}{{s.Start, "start"}, {s.Stop, "stop"}, {s.Archive, "archive"}, {s.Adopt, "adopt"}, {s.Forget, "forget"}, {s.Snapshot, "snapshot"}, {s.Migrate, "migrate"}, {s.Move, "move"}} {
		if extra.n > 0 {
			line += fmt.Sprintf(", %d to %s", extra.n, extra.verb)
		}
	}
	if s.SnapshotDelete > 0 || s.snapshotsAtStake {
		line += ", " + s.SnapshotsDeleted()
	}
	return line + "."
}

// SnapshotsDeleted is "2 snapshots deleted": what a plan that deletes
// snapshots says in its Plan: line and asks approval for.
func (s Summary) SnapshotsDeleted() string {
	return fmt.Sprintf("%d %s deleted", s.SnapshotDelete, plural(s.SnapshotDelete, "snapshot", "snapshots"))
}

// Done is what an apply did, for its closing line: "1 added, 0 changed,
// 0 destroyed, 1 snapshot taken".
func (s Summary) Done() string {
	line := fmt.Sprintf("%d added, %d changed, %d destroyed", s.Add, s.Change, s.Destroy)
	if s.Start > 0 {
		line += fmt.Sprintf(", %d started", s.Start)
	}
	if s.Stop > 0 {
		line += fmt.Sprintf(", %d stopped", s.Stop)
	}
	if s.Archive > 0 {
		line += fmt.Sprintf(", %d archived", s.Archive)
	}
	if s.Snapshot > 0 {
		line += fmt.Sprintf(", %d %s taken", s.Snapshot, plural(s.Snapshot, "snapshot", "snapshots"))
	}
	if s.Move > 0 {
		line += fmt.Sprintf(", %d moved", s.Move)
	}
	if s.SnapshotDelete > 0 {
		line += ", " + s.SnapshotsDeleted()
	}
	return line
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
