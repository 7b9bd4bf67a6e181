package command

import (
	"flag"

	"github.com/bottlefile/bottlefile/operations"
)

// registerInputs adds -var and -var-file to a command's flags.
func registerInputs(fs *flag.FlagSet) *operations.Inputs {
	in := &operations.Inputs{}
	fs.Var((*stringList)(&in.Vars), "var", "")
	fs.Var((*stringList)(&in.VarFiles), "var-file", "")
	return in
}
