// Package planner turns a configuration, the recorded state and what is live
// on each runtime into a Plan: the changes that converge them, each with the
// reason it is needed, and the ordered graph of operations that applies them.
// Planning has no side effects on any runtime.
package planner
