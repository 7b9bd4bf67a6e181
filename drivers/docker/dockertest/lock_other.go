//go:build !unix

package dockertest

// lockFile does not lock where flock is missing; concurrent test processes
// may then import the busybox image twice, leaving an untagged copy.
func lockFile(string) (func(), error) { return func() {}, nil }
