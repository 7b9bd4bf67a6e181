package planner

import "github.com/bottlefile/bottlefile/drivers"

// Action is what a plan does to one object. The zero value means no change.
//
//	action   Before            After             operations
//	NoOp     recorded attrs    desired attrs     none
//	Create   null              desired attrs     create
//	Update   recorded attrs    desired attrs     update (in place)
//	Replace  recorded attrs    desired attrs     delete, then create
//	Delete   recorded attrs    null              delete
//	Start    recorded attrs    desired attrs     start (a stopped workload)
//	Stop     recorded attrs    desired attrs     stop (a running workload), recorded as stopped
//	Adopt    null              desired attrs     record only (found live, not in state)
//	Forget   recorded attrs    null              remove the record only (already gone)
//	Migrate  recorded attrs    desired attrs     create on the new runtime, then delete on the old
//	Archive  recorded attrs    desired attrs     marked archived, then delete (the record stays; archive.go)
type Action rune

const (
	NoOp    Action = 0
	Create  Action = '+'
	Update  Action = '~'
	Replace Action = '±'
	Delete  Action = '-'
	Start   Action = '>'
	Stop    Action = '■'
	Adopt   Action = '&'
	Forget  Action = 'x'
	Migrate Action = '⇒'
	Archive Action = 'z'
)

// actionRow is everything the core knows about one action: its names,
// what the human plan says of it, the steps the apply makes of it, which
// sides of the attributes the views list, and how a plan summary counts
// it. String, Symbol, ParseAction (saved plans), Plan.Graph, the
// summaries and the views all read the table, so an action is one row.
type actionRow struct {
	action Action
	name   string // in saved plans and JSON
	symbol string // in the human plan
	// headline is what the human plan says of the object ("will be
	// created"); a change passes itself for the runtimes a migration names.
	headline func(c *Change) string
	// up is the step ordered after what the object depends on (create,
	// update, start); down the one ordered before what it depends on, and
	// after what depends on it (delete, stop). upStateOnly is up for a
	// change that only rewrites the record (Change.StateOnly).
	up, down, upStateOnly StepOp
	// shows is which attributes the views list for it.
	shows Shows
	// count adds one change of the action to a plan summary; destroys
	// marks the actions that remove the object (a snapshot's counts as a
	// snapshot deleted too).
	count    func(*Summary)
	destroys bool
}

// Shows says which attributes of a change the views list.
type Shows int

const (
	ShowsNone   Shows = iota // no attribute rows (start, stop, no-op)
	ShowsAfter               // the desired ones, as added
	ShowsBefore              // the recorded ones, as removed
	ShowsDiff                // both, with what changes marked
)

func says(s string) func(*Change) string { return func(*Change) string { return s } }

var actionTable = []actionRow{
	{action: NoOp, name: "no-op", symbol: " ", headline: says("is unchanged"), count: func(*Summary) {}},
	{action: Create, name: "create", symbol: "+", headline: says("will be created"), up: StepCreate, shows: ShowsAfter,
		count: func(s *Summary) { s.Add++ }},
	{action: Update, name: "update", symbol: "~", headline: says("will be updated in place"), up: StepUpdate, upStateOnly: StepRecord, shows: ShowsDiff,
		count: func(s *Summary) { s.Change++ }},
	{action: Replace, name: "replace", symbol: "-/+", headline: says("must be replaced"), up: StepCreate, down: StepDelete, shows: ShowsDiff,
		count: func(s *Summary) { s.Add++; s.Destroy++ }, destroys: true},
	{action: Delete, name: "delete", symbol: "-", headline: says("will be destroyed"), down: StepDelete, shows: ShowsBefore,
		count: func(s *Summary) { s.Destroy++ }, destroys: true},
	{action: Start, name: "start", symbol: ">", headline: says("will be started"), up: StepStart,
		count: func(s *Summary) { s.Start++ }},
	{action: Stop, name: "stop", symbol: "||", headline: says("will be stopped"), down: StepStop,
		count: func(s *Summary) { s.Stop++ }},
	{action: Adopt, name: "adopt", symbol: "&", headline: says("will be adopted into state"), up: StepAdopt, shows: ShowsAfter,
		count: func(s *Summary) { s.Adopt++ }},
	{action: Forget, name: "forget", symbol: "x", headline: says("will be forgotten (removed from state only)"), down: StepForget, shows: ShowsBefore,
		count: func(s *Summary) { s.Forget++ }},
	{action: Migrate, name: "migrate", symbol: "=>", up: StepCreate, down: StepDelete, shows: ShowsDiff,
		headline: func(c *Change) string {
			return "will be migrated from runtime " + quote(c.DeleteRuntime()) + " to " + quote(c.Runtime)
		},
		count: func(s *Summary) { s.Migrate++ }},
	{action: Archive, name: "archive", symbol: "zz", down: StepArchive,
		headline: func(c *Change) string {
			if c.ArchiveTo == "" {
				return "will be archived"
			}
			return "will be archived in " + c.ArchiveTo
		},
		count: func(s *Summary) { s.Archive++ }},
}

// takeRow is a snapshot's Create: taking it. It is saved as a create; the
// plan shows it, and its summary counts it, as a snapshot taken.
var takeRow = actionRow{action: Create, name: "create", symbol: "@", headline: says("will be taken"), up: StepCreate, shows: ShowsAfter,
	count: func(s *Summary) { s.Snapshot++ }}

func quote(s string) string { return `"` + s + `"` }

// row is the table's row for a.
func (a Action) row() (actionRow, bool) {
	for _, r := range actionTable {
		if r.action == a {
			return r, true
		}
	}
	return actionRow{}, false
}

// row is the row of the change's action, for its kind: a snapshot
// created is taken.
func (c *Change) row() actionRow {
	if c.Action == Create && c.Kind == drivers.KindSnapshot {
		return takeRow
	}
	r, ok := c.Action.row()
	if !ok {
		return actionRow{action: c.Action, name: c.Action.String(), symbol: string(c.Action), headline: says("is unchanged"), count: func(*Summary) {}}
	}
	return r
}

// Actions lists every action, NoOp first.
func Actions() []Action {
	all := make([]Action, len(actionTable))
	for i, row := range actionTable {
		all[i] = row.action
	}
	return all
}

// ParseAction is the action String names.
func ParseAction(name string) (Action, bool) {
	for _, row := range actionTable {
		if row.name == name {
			return row.action, true
		}
	}
	return NoOp, false
}

func (a Action) String() string {
	if r, ok := a.row(); ok {
		return r.name
	}
	return "Action(" + string(a) + ")"
}

// Symbol is how the human plan marks the action.
func (a Action) Symbol() string {
	if r, ok := a.row(); ok {
		return r.symbol
	}
	return string(a)
}

// IsReplace reports whether the action destroys and re-creates the object.
func (a Action) IsReplace() bool { return a == Replace }

// Symbol is how the human plan marks the change: its action's symbol, "@"
// for a snapshot taken.
func (c *Change) Symbol() string { return c.row().symbol }

// Headline is what the human plan says of the change: "will be created",
// "will be taken", "will be migrated from runtime "a" to "b"".
func (c *Change) Headline() string { return c.row().headline(c) }

// Shows is which attributes of the change the views list.
func (c *Change) Shows() Shows { return c.row().shows }

// Takes reports a change that takes a snapshot.
func (c *Change) Takes() bool { return c.row().symbol == takeRow.symbol }

// StartsAfterUpdate reports an update in place of a workload the plan
// found stopped, not with bottlefile stop: the apply starts it once
// updated, as its plan says, so one apply converges (the next plan would
// start it otherwise).
func (c *Change) StartsAfterUpdate() bool {
	return c.Action == Update && !c.StateOnly && c.Object.Workload && c.Live != nil && !c.Live.Running &&
		(c.Prior == nil || c.Prior.Computed[StoppedKey] == "")
}

// steps are the up and down steps the apply makes of the change.
func (c *Change) steps() (up, down StepOp) {
	r := c.row()
	up = r.up
	if c.StateOnly && r.upStateOnly != "" {
		up = r.upStateOnly
	}
	return up, r.down
}

// StepOp is an operation on one object.
type StepOp string

const (
	StepCreate StepOp = "create"
	StepUpdate StepOp = "update"
	StepStart  StepOp = "start"
	StepStop   StepOp = "stop"
	StepDelete StepOp = "delete"
	StepAdopt  StepOp = "adopt"  // record an object found live
	StepRecord StepOp = "record" // rewrite a record; nothing on the runtime changes
	StepForget StepOp = "forget" // remove a record; the object is already gone
	StepMove   StepOp = "move"   // move a snapshot to another runtime
	// StepArchive marks the record archived, then removes the object from
	// its runtime; the record stays (archive.go).
	StepArchive StepOp = "archive"
)

// stepRow is everything the core knows about one step: the driver
// operation it performs (none for a step that only writes state or that
// the executor performs by itself), how an apply's closing line counts it
// once done, and the words its progress lines use.
type stepRow struct {
	op StepOp
	// driver is the drivers.Op the executor asks Apply for; "" for a
	// step the executor carries out another way.
	driver drivers.Op
	// count adds one step done to an apply's summary; nil counts nothing
	// (a step that only touches the state, a move).
	count func(*Summary, *Change)
	// stopped is what the record says of the workload afterwards:
	// +1 stopped on purpose (StoppedKey), -1 not, 0 as it was.
	stopped int
	// unarchives marks a step after which the object is live and not
	// archived: the record loses its archive marks (ArchivedKey).
	unarchives bool
	progress   [3]string // "Creating...", "Creation complete", "creating"
}

// added counts an object made on a runtime, a snapshot as taken.
func added(s *Summary, c *Change) {
	if c.Kind == drivers.KindSnapshot {
		s.Snapshot++
	} else {
		s.Add++
	}
}

var stepTable = []stepRow{
	{op: StepCreate, driver: drivers.OpCreate, count: added, stopped: -1, unarchives: true,
		progress: [3]string{"Creating...", "Creation complete", "creating"}},
	{op: StepUpdate, driver: drivers.OpUpdate, count: func(s *Summary, _ *Change) { s.Change++ }, unarchives: true,
		progress: [3]string{"Modifying...", "Modifications complete", "modifying"}},
	{op: StepStart, driver: drivers.OpStart, count: func(s *Summary, _ *Change) { s.Start++ }, stopped: -1, unarchives: true,
		progress: [3]string{"Starting...", "Start complete", "starting"}},
	{op: StepStop, count: func(s *Summary, _ *Change) { s.Stop++ }, stopped: +1,
		progress: [3]string{"Stopping...", "Stop complete", "stopping"}},
	{op: StepDelete, count: func(s *Summary, c *Change) {
		s.Destroy++
		if c.Kind == drivers.KindSnapshot {
			s.SnapshotDelete++
		}
	}, progress: [3]string{"Destroying...", "Destruction complete", "destroying"}},
	{op: StepAdopt, count: added, progress: [3]string{"Adopting...", "Adoption complete", "adopting"}},
	{op: StepRecord, unarchives: true, progress: [3]string{"Recording...", "Record updated", "recording"}},
	{op: StepForget, progress: [3]string{"Forgetting...", "Record removed", "forgetting"}},
	{op: StepMove, progress: [3]string{"Moving...", "Move complete", "moving"}},
	{op: StepArchive, count: func(s *Summary, _ *Change) { s.Archive++ },
		progress: [3]string{"Archiving...", "Archive complete", "archiving"}},
}

func (op StepOp) row() stepRow {
	for _, r := range stepTable {
		if r.op == op {
			return r
		}
	}
	return stepRow{op: op, progress: [3]string{string(op) + "...", string(op) + " complete", string(op)}}
}

// DriverOp is the operation the step asks its driver's Apply for; "" for
// a step the executor carries out another way.
func (op StepOp) DriverOp() drivers.Op { return op.row().driver }

// Stopped is what the step leaves the record saying of the workload:
// +1 stopped on purpose, -1 not, 0 as it was.
func (op StepOp) Stopped() int { return op.row().stopped }

// Unarchives reports whether the step leaves the record without its
// archive marks (ArchivedKey, ArchiveSnapshotKey): the object is live.
func (op StepOp) Unarchives() bool { return op.row().unarchives }

// Progress is the words apply's progress lines use for the step: when it
// begins ("Creating..."), when it ends ("Creation complete") and while it
// runs ("creating").
func (op StepOp) Progress() (begin, end, during string) {
	p := op.row().progress
	return p[0], p[1], p[2]
}

// StoppedKey is the computed value, on a workload's record, that marks it
// stopped on purpose (bottlefile stop): the plan leaves it stopped, not
// started again as a workload found stopped would be, until bottlefile
// start (or a change that replaces it) runs it again.
const StoppedKey = "stopped"
