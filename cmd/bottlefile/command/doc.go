// Package command holds bottlefile's commands. Each command parses its
// arguments into a struct, calls the core (lang, planner, executor), and lets
// a view turn the outcome into output and an exit code. Commands stay thin.
package command
