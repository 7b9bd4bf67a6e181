// Package dag is the dependency graph bottlefile plans and applies with: named
// vertices, edges from a dependent to its dependency, cycle detection that
// names every member of every cycle, and a deterministic topological order.
//
// A Graph is usable as its zero value. Vertices are identified by Name: the
// graph stores names once and never calls Name again, so a vertex's name must
// not change while it is in a graph. Every result that lists vertices is
// sorted by name, so output built from a Graph (plans, DOT, test oracles) is
// the same from run to run.
//
// Every algorithm here is linear, or n log n where a result is sorted, in the
// number of vertices and edges, so graphs of tens of thousands of vertices
// (ten thousand agents with the objects they own) stay cheap.
//
// A Graph is not safe for concurrent mutation. Its read methods do not modify
// it, so any number of goroutines may read one graph (as the executor's walker
// does) as long as nothing adds to it meanwhile.
//
// The package imports only the standard library.
package dag
