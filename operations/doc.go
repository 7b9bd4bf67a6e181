// Package operations is the layer between the commands and the core: it
// loads a configuration, opens its state and configures its runtimes, and
// runs plans, applies, imports and the day-to-day reads on them: the
// outputs, the state's records, the recorded snapshots, and the live
// objects of an address or of the whole lineage (FindLive, LiveObjects),
// which logs, status, exec and egress denials act on. Commands parse their
// flags, call an operation and render what it returns; they hold no
// business logic of their own, and import neither drivers nor state.
package operations
