// Package operations is the layer between the commands and the core: it
// loads a configuration, opens its state and configures its runtimes, and
// runs plans, applies and the day-to-day reads (the recorded snapshots,
// say) on them. Commands parse their flags, call an operation and render
// what it returns; they hold no business logic of their own.
package operations
