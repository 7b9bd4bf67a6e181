// Package drivertest helps test drivers and the code that uses them.
//
// Fake is a hand-written, in-memory driver: it plans agents the way the
// docker driver does (a network and a container on it), remembers what Apply
// created per lineage so that Read reports it, lets a test cause drift out of
// band (Stop, Remove, Put), and records every call with hooks in the style of
// a provider mock (XCalled, XRequest, XResponse, XFn).
//
// TestDriver is the conformance suite every driver must pass: run it from the
// driver's own tests with a function that returns a configured driver.
package drivertest
