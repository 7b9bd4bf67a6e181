// Package executor applies a plan. Its Walker runs a function on every vertex
// of a dag.Graph in dependency order, in parallel up to a limit: a vertex
// starts only when all its dependencies succeeded, a failure skips only what
// depends on it, and a stopped walk starts nothing new while letting running
// work finish, unless it is abandoned. The Executor builds on the Walker to
// perform each planned step through its runtime's driver and to write state
// after every step, before any dependent starts.
//
// Results shared between the walk's goroutines go through one small
// synchronized wrapper; callbacks never write shared maps directly.
package executor
