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

func (a Action) String() string {
	switch a {
	case NoOp:
		return "no-op"
	case Create:
		return "create"
	case Update:
		return "update"
	case Replace:
		return "replace"
	case Delete:
		return "delete"
	case Start:
		return "start"
	case Adopt:
		return "adopt"
	case Forget:
		return "forget"
	case Migrate:
		return "migrate"
	}
	return "Action(" + string(a) + ")"
}

// Symbol is how the human plan marks the action.
func (a Action) Symbol() string {
	switch a {
	case Replace:
		return "-/+"
	case Migrate:
		return "=>"
	case NoOp:
		return " "
	}
	return string(a)
}

// IsReplace reports whether the action destroys and re-creates the object.
func (a Action) IsReplace() bool { return a == Replace }
