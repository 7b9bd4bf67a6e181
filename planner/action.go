package planner

// Action is what a plan does to one object. The zero value means no change.
//
//	action   Before            After             operations
//	NoOp     recorded attrs    desired attrs     none
//	Create   null              desired attrs     create
//	Update   recorded attrs    desired attrs     update (in place)
//	Replace  recorded attrs    desired attrs     delete, then create
//	Delete   recorded attrs    null              delete
//	Start    recorded attrs    desired attrs     start (a stopped workload)
//	Adopt    null              desired attrs     record only (found live, not in state)
//	Forget   recorded attrs    null              remove the record only (already gone)
//	Migrate  recorded attrs    desired attrs     create on the new runtime, then delete on the old
type Action rune

const (
	NoOp    Action = 0
	Create  Action = '+'
	Update  Action = '~'
	Replace Action = '±'
	Delete  Action = '-'
	Start   Action = '>'
	Adopt   Action = '&'
	Forget  Action = 'x'
	Migrate Action = '⇒'
)

// actionTable is the one list of actions and their names: String, Symbol,
// ParseAction (saved plans), the JSON plan and the summaries all read it,
// so an action added here cannot be missed by any of them.
var actionTable = []struct {
	action Action
	name   string // in saved plans and JSON
	symbol string // in the human plan
}{
	{NoOp, "no-op", " "},
	{Create, "create", "+"},
	{Update, "update", "~"},
	{Replace, "replace", "-/+"},
	{Delete, "delete", "-"},
	{Start, "start", ">"},
	{Adopt, "adopt", "&"},
	{Forget, "forget", "x"},
	{Migrate, "migrate", "=>"},
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
	for _, row := range actionTable {
		if row.action == a {
			return row.name
		}
	}
	return "Action(" + string(a) + ")"
}

// Symbol is how the human plan marks the action.
func (a Action) Symbol() string {
	for _, row := range actionTable {
		if row.action == a {
			return row.symbol
		}
	}
	return string(a)
}

// IsReplace reports whether the action destroys and re-creates the object.
func (a Action) IsReplace() bool { return a == Replace }
