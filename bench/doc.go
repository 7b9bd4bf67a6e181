// Package bench holds bottlefile's benchmarks: Go benchmarks of plan with
// the fake driver (go test -bench=. ./bench/), and bench/real-engine.sh,
// which times the real binary against the docker CLI and against a raw-API
// program (bench/rawapi) on the local Docker engine. See README.md here.
package bench
